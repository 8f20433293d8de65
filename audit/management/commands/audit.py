"""``manage.py audit``: log agent events, read a chain, verify, checkpoint, export.

    manage.py audit log SCOPE EVENT_TYPE --payload JSON     append an agent.* event
    manage.py audit show SCOPE [--json]                      the chain, oldest first
    manage.py audit verify [--subject S] [--checkpoints FILE] [--receipt FILE ...]
    manage.py audit checkpoint [--sink FILE]                 pin every chain, append to the sink
    manage.py audit export [--subject S] [--out FILE]        JSON Lines of the rows
    manage.py audit export --async [--scope S] [--since T] [--until T]
                                                  queue a file export (a worker writes it)
    manage.py audit keygen NAME --out FILE                   a checkpoint signing key (0600)
    manage.py audit public-key                               the verifier key to publish
    manage.py audit prove-consistency OLD NEW [--json]       does NEW extend OLD? (fork check)
    manage.py audit witness NOTE --key F --state F --log-key K   cosign after checking consistency

Each verb is a thin wrapper over ``audit.services``/``selectors``/verifiers.
Bad input (an invalid scope, malformed JSON, a missing or malformed file) is
one line on stderr and a non-zero exit, with nothing written. ``verify``
exits 0 only when every chain, checkpoint line and receipt holds.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import UnstorableText
from audit import notes, selectors, tree
from audit.canonical import canonical_json, loads_strict
from audit.checkpoints import (
    CheckpointError,
    LogHead,
    prove_consistency,
    read_checkpoint_lines,
    verify_checkpoints,
)
from audit.errors import AuditError
from audit.exports import ExportError, start_export
from audit.models import Checkpoint
from audit.receipts import verify_deletion_receipt
from audit.services import create_checkpoint, log_agent_event
from audit.verification import verify_all, verify_subject
from audit.witness import witness_cosign
from jobs.services import exports_dir


class _OneLineParser(CommandParser):
    """Usage errors as one line on stderr (exit 2), like every other refusal here."""

    def error(self, message: str) -> Any:
        if self.called_from_command_line:
            self.exit(2, f"{self.prog}: error: {message}\n")
        raise CommandError(f"Error: {message}")


def _scope(raw: str, what: str) -> str:
    try:
        return str(Scope.parse(raw))
    except ScopeError as exc:
        raise CommandError(f"{what}: {exc}") from exc


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CommandError(f"cannot read {what} {path}: {reason}") from exc


class Command(BaseCommand):
    help = "The audit chain: log agent events, show a chain, verify, checkpoint, export."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # BaseCommand builds a plain CommandParser; the subclass only changes error().
        parser.__class__ = _OneLineParser
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(
            dest="verb", required=True, metavar="VERB", parser_class=_OneLineParser
        )
        log = verbs.add_parser("log", help="append an agent.* event to SCOPE's chain")
        log.add_argument("scope")
        log.add_argument("event_type", help="agent.<something>, stored as agent.log.<something>")
        log.add_argument("--payload", default="{}", help="a JSON object of digests and IDs")
        log.add_argument("--actor", default="agent")
        log.add_argument("--session-id")
        log.add_argument("--turn-id")
        log.add_argument("--record-id")

        show = verbs.add_parser("show", help="print SCOPE's chain, oldest first")
        show.add_argument("scope")
        show.add_argument("--json", action="store_true", help="JSON Lines, one row per line")

        verify = verbs.add_parser("verify", help="check chains, checkpoints and receipts")
        verify.add_argument("--subject", help="verify only this chain")
        verify.add_argument("--checkpoints", action="append", default=[], metavar="FILE")
        verify.add_argument("--receipt", action="append", default=[], nargs="+", metavar="FILE")

        checkpoint = verbs.add_parser("checkpoint", help="pin every chain; append to the sink")
        checkpoint.add_argument("--sink", help="JSONL file (default AETNAWEB_CHECKPOINT_SINK)")
        checkpoint.add_argument("--actor", default="system")

        keygen = verbs.add_parser("keygen", help="create an Ed25519 checkpoint signing key")
        keygen.add_argument(
            "name", help="the key name, also the log origin (e.g. example.org/audit)"
        )
        keygen.add_argument("--out", required=True, help="new file for the private key (0600)")

        verbs.add_parser("public-key", help="print the configured checkpoint verifier key")

        _add_log_verbs(verbs)
        _add_export_verb(verbs)

    def handle(self, *args: Any, verb: str, **options: Any) -> None:
        handler = getattr(self, "_" + verb.replace("-", "_"))
        try:
            handler(options)
        except (
            AuditError,
            CheckpointError,
            notes.NoteError,
            access.AccessDenied,
            UnstorableText,
            ExportError,
        ) as exc:
            raise CommandError(str(exc)) from exc

    # -- verbs ------------------------------------------------------------------------

    def _log(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"], "scope")
        try:
            payload = loads_strict(options["payload"])
        except ValueError as exc:
            raise CommandError(f"--payload is not JSON: {exc}") from exc
        if not isinstance(payload, dict):
            raise CommandError('--payload must be a JSON object, e.g. \'{"tool_sha256": "..."}\'')
        event = log_agent_event(
            principal=SYSTEM,
            subject=scope,
            event_type=options["event_type"],
            payload=payload,
            actor=options["actor"],
            session_id=options["session_id"],
            turn_id=options["turn_id"],
            record_id=options["record_id"],
        )
        self.stdout.write(
            f"appended {event.event_id} ({event.event_type}) to {event.subject_id} at sequence "
            f"{event.sequence} (event_hash {event.event_hash})"
        )

    def _show(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"], "scope")
        principal = access.system_principal()
        if options["json"]:
            for line in selectors.export_lines(principal, subject=scope):
                self.stdout.write(line, ending="")
            return
        after, shown = 0, 0
        while True:
            events = selectors.chain_events(principal, scope, after=after, limit=1000)
            for event in events:
                self.stdout.write(_readable(event))
            shown += len(events)
            if len(events) < 1000:
                break
            after = events[-1].sequence
        report = verify_subject(scope, principal=SYSTEM)
        verdict = "the chain holds" if report.ok else "the chain FAILS verification"
        self.stdout.write(f"{scope}: {shown} events; {verdict}")

    def _verify(self, options: dict[str, Any]) -> None:
        subject = options["subject"]
        if subject is not None:
            subject = _scope(subject, "--subject")
        # Every input is read and parsed before anything is checked or printed.
        checkpoint_files = []
        for path in options["checkpoints"]:
            text = _read(path, "checkpoint file")
            try:
                read_checkpoint_lines(text.splitlines())
            except CheckpointError as exc:
                raise CommandError(f"{path}: {exc}") from exc
            checkpoint_files.append((path, text))
        receipts = []
        for path in [p for group in options["receipt"] for p in group]:
            try:
                receipt = loads_strict(_read(path, "receipt"))
            except ValueError as exc:
                raise CommandError(f"receipt {path} is not JSON: {exc}") from exc
            receipts.append((path, receipt))

        problems = 0
        reports = (
            [verify_subject(subject, principal=SYSTEM)]
            if subject is not None
            else verify_all(principal=SYSTEM).subjects
        )
        for report in reports:
            problems += self._verdict(report.ok, report.subject_id, report.failure_lines())
        for path, text in checkpoint_files:
            for result in verify_checkpoints(text.splitlines(), principal=SYSTEM):
                label = f"checkpoint {path} line {result.line_number}"
                problems += self._verdict(result.ok, label, result.failures)
        for path, receipt in receipts:
            failures = verify_deletion_receipt(receipt, principal=SYSTEM)
            problems += self._verdict(not failures, f"receipt {path}", failures)
        if subject is None:
            log_failures = tree.verify_log()
            waiting = tree.pending_count()
            label = f"merkle log ({tree.tree_size()} leaves"
            label += f", {waiting} newer events wait for the next batch)" if waiting else ")"
            problems += self._verdict(not log_failures, label, log_failures)
        events = sum(report.events_checked for report in reports)
        if problems:
            raise CommandError(
                f"verification FAILED: {problems} chain(s), checkpoint line(s) or receipt(s) "
                "did not verify (reasons above)"
            )
        self.stdout.write(f"verified: {events} events in {len(reports)} chains")

    def _verdict(self, ok: bool, label: str, reasons: list[str]) -> int:
        self.stdout.write(f"{'OK' if ok else 'FAIL'} {label}")
        for reason in reasons:
            self.stdout.write(f"  {reason}")
        return 0 if ok else 1

    def _checkpoint(self, options: dict[str, Any]) -> None:
        document = create_checkpoint(principal=SYSTEM, actor=options["actor"], sink=options["sink"])
        self.stdout.write(canonical_json(document))
        sink = options["sink"] or settings.AETNAWEB_CHECKPOINT_SINK
        self.stderr.write(f"checkpoint of {len(document['subjects'])} chains appended to {sink}")

    def _keygen(self, options: dict[str, Any]) -> None:
        key = notes.SignerKey.generate(options["name"])
        notes.write_private_key(Path(options["out"]), key)
        self.stdout.write(key.verifier.text())
        self.stderr.write(
            f"private key written to {options['out']} (0600); set AETNAWEB_CHECKPOINT_KEY_FILE "
            "to it and publish the verifier key above"
        )

    def _public_key(self, options: dict[str, Any]) -> None:
        signer = notes.configured_signer(required=True)
        assert signer is not None  # required=True raises instead
        self.stdout.write(signer.verifier.text())

    def _head(self, reference: str) -> LogHead:
        if reference.isdigit():
            row = Checkpoint.objects.filter(pk=int(reference)).first()
            if row is None:
                raise CommandError(f"no checkpoint with ID {reference}")
            return LogHead.parse(row.document, checkpoint_id=row.pk)
        return LogHead.parse(_read(reference, "checkpoint"))

    def _prove_consistency(self, options: dict[str, Any]) -> None:
        old, new = self._head(options["old"]), self._head(options["new"])
        verdict = prove_consistency(old, new)
        if options["json"]:
            self.stdout.write(canonical_json(verdict.bundle(old, new)))
        else:
            for node in verdict.bundle(old, new)["proof"]:
                self.stdout.write(f"  {node}")
            signatures = ", ".join(f"{k} {v}" for k, v in verdict.signatures.items())
            self.stdout.write(f"signatures: {signatures}")
        if not verdict.ok:
            raise CommandError("; ".join(verdict.failures))
        self.stderr.write(
            f"OK: the checkpoint of {new.size} leaves extends the one of {old.size} leaves"
        )

    def _witness(self, options: dict[str, Any]) -> None:
        note_text = _read(options["note"], "checkpoint note")
        witness_key = notes.SignerKey.parse(_read(options["key"], "witness key"))
        log_key_arg = options["log_key"]
        log_key = notes.VerifierKey.parse(
            _read(log_key_arg, "log key") if Path(log_key_arg).is_file() else log_key_arg
        )
        bundle = None
        if options["proof"]:
            try:
                bundle = loads_strict(_read(options["proof"], "consistency bundle"))
            except ValueError as exc:
                raise CommandError(f"the consistency bundle is not JSON: {exc}") from exc
        cosigned = witness_cosign(
            note_text,
            witness_key=witness_key,
            log_key=log_key,
            state_path=Path(options["state"]),
            bundle=bundle,
        )
        self.stdout.write(cosigned, ending="")

    def _export(self, options: dict[str, Any]) -> None:
        if options["queued"]:
            self._export_queued(options)
            return
        for name in ("scope", "since", "until"):
            if options[name] is not None:
                raise CommandError(f"--{name} needs --async (the streamed export takes --subject)")
        subject = options["subject"]
        if subject is not None:
            subject = _scope(subject, "--subject")
        lines = selectors.export_lines(access.system_principal(), subject=subject)
        out = options["out"]
        if out is None:
            for line in lines:
                self.stdout.write(line, ending="")
            return
        target = Path(out)
        if not target.parent.is_dir():
            raise CommandError(f"cannot write {out}: directory {target.parent} does not exist")
        # Written beside the target and renamed, so a failed export leaves no partial file.
        fd, temporary = tempfile.mkstemp(prefix=".audit-export-", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                count = 0
                for line in lines:
                    handle.write(line)
                    count += 1
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.stderr.write(f"exported {count} events to {out}")

    def _export_queued(self, options: dict[str, Any]) -> None:
        for name in ("subject", "out"):
            if options[name] is not None:
                raise CommandError(f"--{name} cannot be used with --async (use --scope)")
        scope = _scope(options["scope"], "--scope") if options["scope"] is not None else None
        job = start_export(
            principal=access.system_principal(),
            scope=scope,
            since=_instant(options["since"], "--since"),
            until=_instant(options["until"], "--until"),
        )
        job.refresh_from_db()
        where = exports_dir()
        if job.has_file:  # the immediate backend ran it on commit
            self.stdout.write(f"{where / job.file_name}  sha256 {job.file_sha256}")
        elif job.status == job.Status.ERROR:
            raise CommandError(f"export job {job.pk} failed: {job.error}")
        else:
            self.stdout.write(
                f"queued export job {job.pk}; a task worker (manage.py db_worker) writes it "
                f"under {where}; see /jobs/{job.pk}/"
            )


def _instant(raw: str | None, what: str) -> datetime | None:
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise CommandError(f"{what} is not an ISO-8601 date or time: {raw[:40]!r}") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _readable(event: Any) -> str:
    context = " ".join(
        f"{name}={value}"
        for name, value in (
            ("session", event.session_id),
            ("turn", event.turn_id),
            ("record", event.record_id),
        )
        if value
    )
    prev = event.prev_hash[:12] + "…" if event.prev_hash else "(first)"
    return (
        f"#{event.sequence} {event.created_at} {event.event_type} by {event.actor}"
        f"{' ' + context if context else ''}\n"
        f"    payload {event.payload}\n"
        f"    prev {prev}  hash {event.event_hash[:12]}…  id {event.event_id}"
    )


def _add_log_verbs(verbs: Any) -> None:
    """The Merkle log's verbs: consistency proofs and witness cosigning."""
    prove = verbs.add_parser(
        "prove-consistency", help="prove checkpoint NEW extends OLD, or flag a fork"
    )
    prove.add_argument("old", help="a checkpoint ID, or a file with a note or checkpoint line")
    prove.add_argument("new", help="a checkpoint ID, or a file with a note or checkpoint line")
    prove.add_argument("--json", action="store_true", help="print the offline bundle")

    witness = verbs.add_parser(
        "witness", help="cosign a checkpoint note after checking it extends the last one"
    )
    witness.add_argument("note", help="file holding the log's signed checkpoint note")
    witness.add_argument("--key", required=True, help="the witness's PRIVATE+KEY file")
    witness.add_argument("--state", required=True, help="the witness's state file")
    witness.add_argument("--log-key", required=True, help="the log's verifier key (or file)")
    witness.add_argument(
        "--proof", help="consistency bundle from the log (default: ask this database)"
    )


def _add_export_verb(verbs: Any) -> None:
    export = verbs.add_parser("export", help="the rows as JSON Lines, by sequence")
    export.add_argument("--subject")
    export.add_argument("--out", help="write to FILE instead of stdout")
    export.add_argument(
        "--async",
        dest="queued",
        action="store_true",
        help="queue an export of a subtree for the task worker (file under AETNAWEB_EXPORT_DIR)",
    )
    export.add_argument("--scope", help="with --async: the subtree to export (default: all)")
    export.add_argument("--since", help="with --async: events created at or after (ISO 8601)")
    export.add_argument("--until", help="with --async: events created before (ISO 8601)")
