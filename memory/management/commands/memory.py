"""``manage.py memory``: the memory engine from the command line.

Sub-verbs, each a thin wrapper over :mod:`memory.services` or
:mod:`memory.selectors`::

    memory remember SCOPE TEXT [--session S] [--turn T] [--source-type T] [--force]
                         [--occurred-at ISO-TIME] [--expires-at ISO-TIME]
    memory remember SCOPE --key KEY --value VALUE [--kind KIND] [--expires-at ISO-TIME]
    memory recall SCOPE QUERY [--limit N] [--min-score X] [--block [--max-chars N]]
    memory list SCOPE [--status S] [--source-type T] [--trust-tier T] [--session S]
                      [--text T] [--subtree] [--after CURSOR] [--limit N]
    memory show RECORD_ID
    memory forget SCOPE (--selector TEXT | --record-id ID ... | --utterance TEXT
                         | --episode-id ID ... | --session S)
                        [--preview] [--expect ID ...] [--expect-episode ID ...]
                        [--include-below] [--exclude ID ...] [--exclude-episode ID ...]
                        [--confirm-count N] [--reference TEXT] [--receipt-out FILE]
    memory promote SCOPE RECORD_ID [--reason TEXT] [--acknowledge]
    memory reject SCOPE RECORD_ID ... [--reason TEXT] [--receipt-out FILE]
    memory consolidate SCOPE
    memory persona SCOPE [--max-chars N]
    memory scenes SCOPE [--limit N]
    memory inspect SCOPE
    memory propose SCOPE FILE        (a JSON list of facts, or {"facts": [...]})
    memory import SCOPE FILE         (a conversation: a JSON list of turns, or {"turns": [...]};
                                      "-" reads standard input)
    memory capture SCOPE ROLE CONTENT [--session S] [--turn T]
    memory import-aetnamem PATH --map SUBJECT=SCOPE [--map ...] [--force]
                                     (move in an aetnamem 0.2.1 SQLite file, all or nothing)
    memory retention set SCOPE TARGET DAYS     (keep TARGET: episodes, quarantined or
                                                records, at SCOPE and below, for DAYS)
    memory retention remove SCOPE TARGET        (kept until forgotten again)
    memory retention list                       (each policy, what it purges next, last run)
    memory reindex [--scope S [--resplit]] [--batch N]
                                             (backfill semantic vectors; resumable; on SQLite
                                              also splits big scopes into cells, --resplit
                                              splits S again now)

``--json`` (before or after the verb) prints machine-readable JSON. Every
refusal (an invalid scope, an unknown record, a record in the wrong state, an
empty or vague forget, a forget that matches nothing, one over the unpreviewed
bound without ``--expect``, one over 10 without the right ``--confirm-count``) is one line on stderr and exit status 2, and
writes nothing (a refused forget is recorded as ``memory.forget_rejected``,
as the spec asks).
The command runs as the trusted system principal.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from aetnaweb.access import SYSTEM, system_principal
from aetnaweb.cli import refusals_exit, refuse
from aetnaweb.scopes import Scope, ScopeError
from memory import selectors, services, vectors
from memory.errors import ProposalError
from memory.services.aetnamem_import import import_aetnamem
from memory.services.erasure import (
    erasure_certificate,
    run_subject_erasure,
    start_subject_erasure,
    subject_erasure_preview,
)
from memory.services.holds import lift_legal_hold, set_legal_hold
from memory.services.retention import (
    remove_retention_policy,
    retention_preview,
    set_retention_policy,
)
from memory.services.subject_export import (
    EXPORT_MEMBER,
    expires_at,
    run_subject_export,
    start_subject_export,
    subject_export_file,
)


def _scope(raw: str) -> Scope:
    try:
        return Scope.parse(raw)
    except ScopeError as exc:
        raise refuse(exc) from exc


class Command(BaseCommand):
    help = "Remember, recall, review, forget and inspect scoped memory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON")
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

        def verb(name: str, help_text: str, *, scope: bool = True) -> Any:
            sub = verbs.add_parser(name, help=help_text)
            sub.add_argument("--json", action="store_true", dest="json_out", help="print JSON")
            if scope:
                sub.add_argument("scope", help="tenant:user:project, e.g. acme:alice:*")
            return sub

        remember = verb("remember", "store a message (or --key/--value) at exactly SCOPE")
        remember.add_argument("text", nargs="?", help="the message as received")
        remember.add_argument("--session")
        remember.add_argument("--turn")
        remember.add_argument(
            "--source-type", dest="source_type", help="user_message, webpage or tool_output"
        )
        remember.add_argument("--force", action="store_true", help="keep any prose as a note")
        remember.add_argument(
            "--occurred-at",
            dest="occurred_at",
            help="when the message was said, ISO 8601 with a zone (e.g. 2026-03-02T09:30+00:00)",
        )
        remember.add_argument(
            "--expires-at",
            dest="expires_at",
            help="when the records lapse, ISO 8601 with a zone, in the future (recall skips "
            "them from then on; the retention run purges them)",
        )
        remember.add_argument("--key", help="explicit fact key (with --value)")
        remember.add_argument("--value", help="explicit fact value (with --key)")
        remember.add_argument("--kind", help="optional kind label for an explicit fact")
        remember.add_argument("--actor")

        recall = verb("recall", "recall memories visible from SCOPE")
        recall.add_argument("query")
        recall.add_argument("--limit", type=int, default=5)
        recall.add_argument("--min-score", dest="min_score", type=float, default=None)
        recall.add_argument("--block", action="store_true", help="print the prompt block")
        recall.add_argument("--max-chars", dest="max_chars", type=int, default=2000)
        recall.add_argument("--session")

        listing = verb("list", "list records stored at SCOPE, newest first")
        listing.add_argument("--status")
        listing.add_argument("--source-type", dest="source_type")
        listing.add_argument("--trust-tier", dest="trust_tier")
        listing.add_argument("--session")
        listing.add_argument("--text", help="case-insensitive substring of the content")
        listing.add_argument("--subtree", action="store_true", help="include descendants")
        listing.add_argument("--after", help="cursor printed by the previous page")
        listing.add_argument("--limit", type=int, default=50)

        show = verb(
            "show", "a record with its supersession chain, audit events and recalls", scope=False
        )
        show.add_argument("record_id")

        forget = verb(
            "forget",
            "purge records and stored messages at exactly SCOPE and print the deletion receipt",
        )
        forget.add_argument(
            "--selector",
            help="whole words the records or stored messages to forget hold (any case)",
        )
        forget.add_argument(
            "--record-id", dest="record_ids", action="append", help="repeat for several"
        )
        forget.add_argument("--utterance", help='the user\'s words, e.g. "forget my backup email"')
        forget.add_argument(
            "--episode-id",
            dest="episode_ids",
            action="append",
            help="a stored message to forget with the records drawn from it (repeat for several)",
        )
        forget.add_argument(
            "--session", dest="session_id", help="forget every message and record of a session"
        )
        forget.add_argument(
            "--preview", action="store_true", help="show what would go; write nothing"
        )
        forget.add_argument(
            "--expect",
            action="append",
            help="a previewed record ID (repeat); refuse if the match changed",
        )
        forget.add_argument(
            "--expect-episode",
            dest="expect_episodes",
            action="append",
            help="a previewed episode ID (repeat); refuse if the match changed",
        )
        forget.add_argument(
            "--include-below",
            dest="include_below",
            action="store_true",
            help="also forget the same words' matches in every scope below SCOPE: one receipt "
            "per scope, bundled (aetnaweb-forget-bundle-v1)",
        )
        forget.add_argument(
            "--exclude",
            dest="exclude_record_ids",
            action="append",
            help="a previewed record ID to leave out (repeat; a lineage goes whole or not at all)",
        )
        forget.add_argument(
            "--exclude-episode",
            dest="exclude_episode_ids",
            action="append",
            help="a previewed stored message (episode) ID to leave out (repeat)",
        )
        forget.add_argument(
            "--confirm-count",
            dest="confirm_count",
            type=int,
            help="the number of records and messages the forget purges (the preview's count), "
            "required above 10",
        )
        forget.add_argument(
            "--reference", help="the request's reference (e.g. a ticket number), kept with it"
        )
        forget.add_argument(
            "--receipt-out", dest="receipt_out", help="also write the receipt (or bundle) here"
        )
        forget.add_argument("--actor")

        promote = verb("promote", "activate a quarantined record (user_confirmed)")
        promote.add_argument("record_id")
        promote.add_argument(
            "--acknowledge",
            action="store_true",
            help="promote even though the fact reads like an instruction or holds a credential",
        )
        reject = verb(
            "reject",
            "purge quarantined records and print the deletion receipts; a rejection must "
            "name every fact still waiting from the same source message",
        )
        reject.add_argument("record_ids", nargs="+", metavar="record_id")
        reject.add_argument(
            "--receipt-out", dest="receipt_out", help="also write the receipt (a list for several)"
        )
        for sub in (promote, reject):
            sub.add_argument("--reason", default="")
            sub.add_argument("--actor")

        verb("consolidate", "collapse duplicates and one active record per fact key")
        persona = verb("persona", "the bounded persona text of SCOPE")
        persona.add_argument("--max-chars", dest="max_chars", type=int, default=1500)
        scenes = verb("scenes", "sessions at SCOPE with their episodes and records")
        scenes.add_argument("--limit", type=int, default=20)
        verb("inspect", "everything stored at SCOPE and whether its chain verifies")
        propose = verb("propose", "propose facts from a JSON file (they land quarantined)")
        propose.add_argument("file", help='JSON: [{"content", "evidence": [ids], "fact_key"?}]')
        conversation = verb("import", "import a conversation's turns from a JSON file")
        conversation.add_argument(
            "file",
            help='JSON: [{"text", "role"?, "speaker"?, "occurred_at"?, "turn_id"?, '
            '"session_id"?}] or {"turns": [...]}; "-" for standard input',
        )
        conversation.add_argument("--actor")
        aetnamem = verb(
            "import-aetnamem",
            "move in an aetnamem 0.2.1 SQLite database (records, episodes, chain head)",
            scope=False,
        )
        aetnamem.add_argument("path", help="the aetnamem SQLite file (opened read-only)")
        aetnamem.add_argument(
            "--map",
            dest="maps",
            action="append",
            default=[],
            metavar="SUBJECT=SCOPE",
            help="the scope each source subject_id moves into (repeat; every subject needs one)",
        )
        aetnamem.add_argument(
            "--force",
            action="store_true",
            help="import even when the source chain does not verify (recorded in the event)",
        )
        aetnamem.add_argument("--actor")
        capture = verb("capture", "a host turn hook: user turns are remembered")
        capture.add_argument("role", help="user, assistant, tool_call or tool_result")
        capture.add_argument("content")
        capture.add_argument("--session")
        capture.add_argument("--turn")
        capture.add_argument(
            "--occurred-at", dest="occurred_at", help="when a user turn was said (ISO 8601)"
        )
        erase = verb(
            "erase-subject",
            "erase everything stored under one person's SCOPE subtree (every scope below it) "
            "and write the erasure certificate",
        )
        erase.add_argument(
            "--preview", action="store_true", help="only count what would go, per scope"
        )
        erase.add_argument("--reference", help="the request's reference (a ticket number)")
        erase.add_argument("--confirm", help="type SCOPE again to confirm; it cannot be undone")
        erase.add_argument(
            "--actor", help="the operator named in the audit chain (default: system)"
        )
        erase.add_argument(
            "--certificate", dest="certificate_out", help="also write the certificate here"
        )
        export = verb(
            "export-subject",
            "export everything stored under one person's SCOPE subtree (records, stored "
            "messages, audit events) with a manifest bound to the log, as a job run here; "
            "the ZIP stays in the exports directory until it expires",
        )
        export.add_argument("--reference", help="the request's reference (a ticket number)")
        export.add_argument("--zip", dest="zip_out", help="also copy the ZIP file here")
        export.add_argument("--out", help="also write the export's export.json here")
        export.add_argument(
            "--csv-dir", help="also write records.csv, episodes.csv and audit_events.csv here"
        )
        export.add_argument(
            "--actor", help="the operator named in the audit chain (default: system)"
        )
        hold = verb(
            "legal-hold",
            "set a legal hold on SCOPE and everything below it (purges there are refused), "
            "or --lift it",
        )
        hold.add_argument("--reference", help="the matter or order the hold answers")
        hold.add_argument("--lift", action="store_true", help="lift the hold at exactly SCOPE")
        hold.add_argument("--actor", help="the operator named in the audit chain")
        retain = verb(
            "retention",
            "retention policies of memory content per scope subtree (the retention run purges)",
            scope=False,
        )
        retain_verbs = retain.add_subparsers(dest="retention_verb", required=True, metavar="ACTION")
        retain_set = retain_verbs.add_parser("set", help="keep TARGET at SCOPE and below for DAYS")
        retain_set.add_argument("scope", help="tenant:user:project, e.g. acme:alice:*")
        retain_set.add_argument("target", help="episodes, quarantined or records")
        retain_set.add_argument("days", help="whole days to keep it")
        retain_set.add_argument("--actor", help="the operator named in the audit chain")
        retain_remove = retain_verbs.add_parser("remove", help="remove the policy at exactly SCOPE")
        retain_remove.add_argument("scope", help="tenant:user:project, e.g. acme:alice:*")
        retain_remove.add_argument("target", help="episodes, quarantined or records")
        retain_remove.add_argument("--actor", help="the operator named in the audit chain")
        retain_verbs.add_parser("list", help="each policy, what it purges next, when it last ran")
        reindex = verb(
            "reindex",
            "give every active record without a semantic vector one (resumable)",
            scope=False,
        )
        reindex.add_argument("--scope", help="only records stored at exactly this scope")
        reindex.add_argument("--batch", type=int, default=200, help="records per transaction")
        reindex.add_argument(
            "--resplit",
            action="store_true",
            help="with --scope, on SQLite: split that scope into cells again now, due or not "
            "(after a large forget)",
        )

    # -- dispatch -----------------------------------------------------------------

    def handle(self, *args: Any, **options: Any) -> None:
        self.as_json = bool(options.get("json") or options.get("json_out"))
        handler = getattr(self, f"_{options['verb'].replace('-', '_')}")
        with refusals_exit():
            handler(options)

    def _emit(self, data: Any, text: str) -> None:
        if self.as_json:
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str))
        else:
            self.stdout.write(text)

    # -- verbs ------------------------------------------------------------------------

    def _remember(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        if options["key"] is not None or options["value"] is not None:
            if options["key"] is None or options["value"] is None or options["text"]:
                raise refuse("give either TEXT or both --key and --value")
            result = services.remember_fact(
                principal=SYSTEM,
                scope=scope,
                key=options["key"],
                value=options["value"],
                kind=options["kind"],
                session_id=options["session"],
                turn_id=options["turn"],
                expires_at=options["expires_at"],
                actor=options["actor"],
            )
        else:
            if not options["text"]:
                raise refuse("nothing to remember: give TEXT (or --key and --value)")
            result = services.remember(
                principal=SYSTEM,
                scope=scope,
                text=options["text"],
                session_id=options["session"],
                turn_id=options["turn"],
                source_type=options["source_type"],
                force=options["force"],
                occurred_at=options["occurred_at"],
                expires_at=options["expires_at"],
                actor=options["actor"],
            )
        lines = [f"episode {result.episode_id or '-'} ({result.source_type}, {result.trust_tier})"]
        for record in result.records:
            extra = (
                f" supersedes {', '.join(record.superseded_ids)}" if record.superseded_ids else ""
            )
            lines.append(f"  {record.record_id} {record.status}: {record.content}{extra}")
        if result.duplicate_of:
            lines.append(f"  duplicate of {', '.join(result.duplicate_of)} (not stored again)")
        if result.ignored:
            lines.append(
                "  no fact or statement about the user found (use --force to keep it as a note)"
            )
        self._emit(result.as_dict(), "\n".join(lines))

    def _recall(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        if options["block"]:
            min_score = options["min_score"]
            block = services.recall_block(
                principal=SYSTEM,
                scope=scope,
                query=options["query"],
                max_items=options["limit"],
                max_chars=options["max_chars"],
                min_score=services.RECALL_BLOCK_MIN_SCORE if min_score is None else min_score,
                session_id=options["session"],
            )
            self._emit(block.as_dict(), block.text or "(nothing relevant enough to inject)")
            return
        result = services.recall(
            principal=SYSTEM,
            scope=scope,
            query=options["query"],
            limit=options["limit"],
            min_score=options["min_score"] or 0.0,
            session_id=options["session"],
        )
        lines = [
            f"{c.score:.3f} {c.record_id} [{c.scope}] {c.content}" for c in result.returned
        ] or ["(no memory matched)"]
        lines.append(f"retrieval {result.retrieval_id}: {len(result.candidates)} candidates")
        self._emit(result.as_dict(), "\n".join(lines))

    def _list(self, options: dict[str, Any]) -> None:
        page = selectors.list_records(
            system_principal(),
            scope=_scope(options["scope"]),
            status=options["status"],
            source_type=options["source_type"],
            trust_tier=options["trust_tier"],
            session_id=options["session"],
            text=options["text"],
            include_descendants=options["subtree"],
            after=options["after"],
            limit=options["limit"],
        )
        items = [selectors.record_as_dict(r) for r in page.items]
        lines = [
            f"{r['record_id']} {r['status']:<11} {r['scope']} {r['content'] or '(purged)'}"
            for r in items
        ] or ["(no records)"]
        if page.next_cursor:
            lines.append(f"more: --after {page.next_cursor}")
        self._emit({"items": items, "next_cursor": page.next_cursor}, "\n".join(lines))

    def _show(self, options: dict[str, Any]) -> None:
        detail = selectors.record_detail(system_principal(), options["record_id"]).as_dict()
        record = detail["record"]
        lines = [
            f"{record['record_id']} at {record['scope']}: {record['status']} "
            f"({record['source_type']}, {record['trust_tier']}, confidence {record['confidence']})",
            f"  content: {record['content'] or '(purged)'}",
            f"  fact key: {record['fact_key'] or '-'}",
            f"  supersedes: {' <- '.join(r['record_id'] for r in detail['supersedes_chain']) or '-'}",
            f"  superseded by: {' -> '.join(r['record_id'] for r in detail['superseded_by_chain']) or '-'}",
            f"  episode: {record['episode_id'] or '-'}",
            f"  audit events: {len(detail['audit_events'])}",
        ]
        lines += [
            f"    #{e['sequence']} {e['event_type']} by {e['actor']}"
            for e in detail["audit_events"]
        ]
        lines.append(f"  recalls: {len(detail['recalls'])}")
        self._emit(detail, "\n".join(lines))

    def _write_receipt(self, receipt: dict[str, Any] | list[Any], path: str | None) -> None:
        if path:
            Path(path).write_text(json.dumps(receipt, indent=2, sort_keys=True) + "\n")

    def _receipt_text(self, receipt: dict[str, Any]) -> str:
        return (
            f"purged {len(receipt['purged_record_ids'])} record(s), "
            f"{len(receipt['purged_episode_ids'])} episode(s) at {receipt['subject_id']}\n"
            + json.dumps(receipt, indent=2, sort_keys=True)
        )

    def _forget(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        request = {
            "selector": options["selector"],
            "record_ids": options["record_ids"],
            "utterance": options["utterance"],
            "episode_ids": options["episode_ids"],
            "session_id": options["session_id"],
        }
        if options["preview"]:
            preview = services.forget_preview(
                scope=scope, principal=SYSTEM, include_below=options["include_below"], **request
            )
            where = f"{scope} and below" if preview.include_below else str(scope)
            lines = [f"would purge {len(preview.record_ids)} record(s) at {where}:"]
            lines += [
                f"  {r['record_id']} {r['status']}{'' if r['matched'] else ' (same fact)'}"
                f"{'' if r['scope'] == str(scope) else ' at ' + r['scope']}: {r['content']}"
                for r in preview.records
            ]
            lines.append(f"and empty {len(preview.episode_ids)} stored message(s):")
            lines += [
                f"  {e['episode_id']}{' (matched)' if e['matched'] else ' (source)'}: {e['text']}"
                for e in preview.episodes
            ]
            if preview.below and not preview.include_below:
                lines.append("the same words match below (add --include-below to forget them):")
                lines += [f"  {b['scope']}: {b['count']} row(s)" for b in preview.below]
            if preview.count > preview.confirm_above:
                lines.append(
                    f"count: {preview.count} (confirm with --confirm-count {preview.count})"
                )
            self._emit(preview.as_dict(), "\n".join(lines))
            return
        receipt = services.forget(
            scope=scope,
            principal=SYSTEM,
            expected_record_ids=options["expect"],
            expected_episode_ids=options["expect_episodes"],
            include_below=options["include_below"],
            exclude_record_ids=options["exclude_record_ids"],
            exclude_episode_ids=options["exclude_episode_ids"],
            confirm_count=options["confirm_count"],
            reference=options["reference"],
            actor=options["actor"],
            **request,
        )
        self._write_receipt(receipt, options["receipt_out"])
        if receipt.get("format") == services.FORGET_BUNDLE_FORMAT:
            text = "\n".join(
                [f"forget bundle at {receipt['scope']}: {len(receipt['receipts'])} receipt(s)"]
                + [self._receipt_text(r).split("\n", 1)[0] for r in receipt["receipts"]]
            )
            self._emit(receipt, text)
            return
        self._emit(receipt, self._receipt_text(receipt))

    def _promote(self, options: dict[str, Any]) -> None:
        result = services.promote(
            principal=SYSTEM,
            scope=_scope(options["scope"]),
            record_id=options["record_id"],
            reason=options["reason"],
            acknowledged=options["acknowledge"],
            actor=options["actor"],
        )
        extra = f"; superseded {', '.join(result.superseded_ids)}" if result.superseded_ids else ""
        self._emit(result.as_dict(), f"{result.record_id} is now active (user_confirmed){extra}")

    def _reject(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        if len(options["record_ids"]) == 1:
            receipt = services.reject(
                principal=SYSTEM,
                scope=scope,
                record_id=options["record_ids"][0],
                reason=options["reason"],
                actor=options["actor"],
            )
            self._write_receipt(receipt, options["receipt_out"])
            self._emit(receipt, self._receipt_text(receipt))
            return
        decided = services.decide_records(
            principal=SYSTEM,
            items=[(scope, record_id) for record_id in options["record_ids"]],
            decision="reject",
            reason=options["reason"],
            actor=options["actor"],
        )
        receipts = list(decided.receipts)
        self._write_receipt(receipts, options["receipt_out"])
        self._emit(receipts, "\n".join(self._receipt_text(receipt) for receipt in receipts))

    def _consolidate(self, options: dict[str, Any]) -> None:
        result = services.consolidate(principal=SYSTEM, scope=_scope(options["scope"]))
        if not result.changed:
            text = "nothing to consolidate"
        else:
            retired = sum(len(g["superseded_ids"]) for g in [*result.duplicates, *result.keys])
            text = (
                f"superseded {retired} record(s): {len(result.duplicates)} duplicate group(s), "
                f"{len(result.keys)} fact key(s)"
            )
        self._emit(result.as_dict(), text)

    def _persona(self, options: dict[str, Any]) -> None:
        result = services.persona(
            principal=SYSTEM, scope=_scope(options["scope"]), max_chars=options["max_chars"]
        )
        self._emit(result.as_dict(), result.text or "(no active facts)")

    def _scenes(self, options: dict[str, Any]) -> None:
        result = services.scenes(
            principal=SYSTEM, scope=_scope(options["scope"]), limit=options["limit"]
        )
        lines = []
        for scene in result:
            lines.append(
                f"session {scene.session_id or '(none)'}: {len(scene.episodes)} episode(s), "
                f"{len(scene.records)} record(s)"
            )
            lines += [f"  {r['record_id']} {r['status']}: {r['content']}" for r in scene.records]
        self._emit([s.as_dict() for s in result], "\n".join(lines) or "(no sessions)")

    def _inspect(self, options: dict[str, Any]) -> None:
        data = selectors.inspect(system_principal(), scope=_scope(options["scope"]))
        counts = data["counts"]
        chain = data["chain"]
        text = "\n".join(
            [
                f"{data['scope']}: {counts['active']} active, {counts['quarantined']} quarantined, "
                f"{counts['superseded']} superseded, {counts['tombstoned']} tombstoned, "
                f"{counts['episodes']} episodes",
                f"chain: {'verifies' if chain['ok'] else 'BROKEN'} "
                f"({chain['events_checked']} events)",
                *chain["reasons"],
            ]
        )
        self._emit(data, text)

    def _propose(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        try:
            data = json.loads(Path(options["file"]).read_text())
        except OSError as exc:
            raise refuse(f"cannot read {options['file']}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise refuse(f"{options['file']} is not JSON: {exc}") from exc
        facts = data.get("facts") if isinstance(data, dict) else data
        if not isinstance(facts, list):
            raise ProposalError('the file must hold a JSON list of facts or {"facts": [...]}')
        result = services.propose_facts(principal=SYSTEM, scope=scope, facts=facts)
        lines = [f"accepted {len(result.accepted)} (quarantined for review)"]
        lines += [f"  {r.record_id}: {r.content}" for r in result.accepted]
        lines += [
            f"duplicate #{d['index']} of {', '.join(d['duplicate_of'])}" for d in result.duplicates
        ]
        lines += [f"rejected #{r['index']}: {r['message']}" for r in result.rejected]
        self._emit(result.as_dict(), "\n".join(lines))

    def _import(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        name = options["file"]
        try:
            raw = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
            data = json.loads(raw)
        except OSError as exc:
            raise refuse(f"cannot read {name}: {exc.strerror}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise refuse(f"{name} is not JSON: {exc}") from exc
        turns = data.get("turns") if isinstance(data, dict) else data
        if not isinstance(turns, list):
            raise refuse('the file must hold a JSON list of turns or {"turns": [...]}')
        result = services.import_conversation(
            principal=SYSTEM, scope=scope, turns=turns, actor=options["actor"]
        )
        lines = [f"imported {len(result.turns)} turn(s), {result.records_stored} record(s) stored"]
        for turn in result.turns:
            label = f"{turn.turn_id or '-'} ({turn.role})"
            lines += [f"  {label} {r.record_id} {r.status}: {r.content}" for r in turn.records]
        self._emit(result.as_dict(), "\n".join(lines))

    def _import_aetnamem(self, options: dict[str, Any]) -> None:
        mapping: dict[str, str] = {}
        for item in options["maps"]:
            subject, equals, scope = item.partition("=")
            if not equals or not subject or not scope:
                raise refuse(f"--map takes SUBJECT=SCOPE, not {item!r}")
            if subject in mapping:
                raise refuse(f"--map names subject {subject} twice")
            mapping[subject] = scope
        result = import_aetnamem(
            path=options["path"],
            mapping=mapping,
            force=options["force"],
            principal=SYSTEM,
            actor=options["actor"],
        )
        lines = [f"imported {result.path}" + (" (forced)" if result.forced else "")]
        for s in result.subjects:
            lines.append(
                f"  {s.source_subject} -> {s.scope}: {s.episodes} episode(s), {s.records} "
                f"record(s), {s.duplicates} duplicate(s), {s.skipped_records} skipped; source "
                f"head {s.source_head_hash} at sequence {s.source_head_sequence} "
                f"({s.source_events} events, chain "
                f"{'verifies' if s.chain_verified else 'BROKEN'}); event {s.event_id}"
            )
        self._emit(asdict(result), "\n".join(lines))

    def _capture(self, options: dict[str, Any]) -> None:
        result = services.capture(
            principal=SYSTEM,
            scope=_scope(options["scope"]),
            role=options["role"],
            content=options["content"],
            session_id=options["session"],
            turn_id=options["turn"],
            occurred_at=options["occurred_at"],
        )
        if result.remembered is not None:
            text = f"remembered: {len(result.remembered.records)} record(s)"
        else:
            text = f"logged {result.role} turn as audit event {result.audit_event_id}"
        self._emit(result.as_dict(), text)

    def _erase_subject(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        if options["preview"]:
            preview = subject_erasure_preview(subtree=scope, principal=SYSTEM)
            lines = [
                f"would erase {preview.records} records and {preview.episodes} stored "
                f"messages under {scope}:"
            ]
            lines += [
                f"  {row['scope']}: {sum(row['records'].values())} records "
                f"({', '.join(f'{n} {s}' for s, n in sorted(row['records'].items())) or 'none'}), "
                f"{row['episodes']} stored messages, {row['recall_events']} stored recall queries"
                for row in preview.scopes
            ]
            lines.append(f"to erase, run again with --reference REF --confirm {scope}")
            self._emit(preview.as_dict(), "\n".join(lines))
            return
        job = start_subject_erasure(
            subtree=scope,
            reference=options["reference"],
            confirmation=options["confirm"],
            principal=SYSTEM,
            started_by=options["actor"],
            queue=False,
        )
        # At a shell the erasure runs here and now, not on the task queue.
        job = run_subject_erasure(job.pk)
        certificate = erasure_certificate(job_id=job.pk, principal=SYSTEM)
        if options["certificate_out"]:
            Path(options["certificate_out"]).write_text(
                json.dumps(certificate, indent=2, sort_keys=True)
            )
        self._emit(
            {"job": job.pk, **job.result},
            f"erased {job.result['records']} records and {job.result['episodes']} stored "
            f"messages under {scope} in {job.result['receipts']} receipts (erasure {job.pk}, "
            f"reference {job.params['reference']}); certificate sha256 "
            f"{certificate['certificate_sha256']}",
        )

    def _export_subject(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        job = start_subject_export(
            subtree=scope,
            reference=options["reference"],
            principal=SYSTEM,
            started_by=options["actor"],
            queue=False,
        )
        # At a shell the export runs here and now, not on the task queue.
        job = run_subject_export(job.pk)
        job, path = subject_export_file(job_id=job.pk, principal=SYSTEM)
        body = path.read_bytes()
        if options["zip_out"]:
            Path(options["zip_out"]).write_bytes(body)
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            if options["out"]:
                Path(options["out"]).write_bytes(archive.read(EXPORT_MEMBER))
            if options["csv_dir"]:
                folder = Path(options["csv_dir"])
                folder.mkdir(parents=True, exist_ok=True)
                for name in archive.namelist():
                    if name.endswith(".csv"):
                        (folder / name).write_bytes(archive.read(name))
        result = job.result
        until = expires_at(job)
        self._emit(
            {"job": job.pk, "file": str(path), "expires_at": until, **result},
            f"exported {result['records']} records, {result['episodes']} stored messages and "
            f"{result['audit_events']} audit events under {scope} (subject export {job.pk}, "
            f"manifest sha256 {result['manifest_sha256']}) to {path}, kept until "
            f"{until:%Y-%m-%d %H:%M} UTC",
        )

    def _legal_hold(self, options: dict[str, Any]) -> None:
        scope = _scope(options["scope"])
        if options["lift"]:
            result = lift_legal_hold(scope=scope, principal=SYSTEM, actor=options["actor"])
            text = f"lifted legal hold {result.hold_id} at {scope}: purges there are possible again"
        else:
            result = set_legal_hold(
                scope=scope,
                reference=options["reference"],
                principal=SYSTEM,
                actor=options["actor"],
            )
            text = (
                f"legal hold {result.hold_id} set at {scope} (reference {result.reference}): "
                "forget, reject and erasure are refused there and below until it is lifted"
            )
        self._emit(result.as_dict(), text)

    def _retention(self, options: dict[str, Any]) -> None:
        action = options["retention_verb"]
        if action == "list":
            preview = retention_preview(principal=SYSTEM)
            lines = [
                f"{row['policy_id']} keep {row['target']} {row['keep_days']} days under "
                f"{row['scope']}: next run purges {row['records']} records and "
                f"{row['episodes']} stored messages; last ran {row['last_run_at'] or 'never'}"
                for row in preview.policies
            ] or ["no retention policy: memory content is kept until forgotten"]
            lines.append(f"records past their own expires_at: {preview.expired_records}")
            lines += [
                f"held, skipped: {row['scope']} ({row['hold_id']}) would lose {row['records']} "
                f"records and {row['episodes']} stored messages"
                for row in preview.held
            ]
            self._emit(preview.as_dict(), "\n".join(lines))
            return
        scope = _scope(options["scope"])
        if action == "set":
            result = set_retention_policy(
                scope=scope,
                target=options["target"],
                keep_days=options["days"],
                principal=SYSTEM,
                actor=options["actor"],
            )
            text = (
                f"retention policy {result.policy_id}: keep {result.target} {result.keep_days} "
                f"days at {scope} and below (purged by the next `manage.py retention run`)"
            )
        else:
            result = remove_retention_policy(
                scope=scope, target=options["target"], principal=SYSTEM, actor=options["actor"]
            )
            text = f"removed retention policy {result.policy_id}: {result.target} at {scope} kept until forgotten"
        self._emit(result.as_dict(), text)

    def _reindex(self, options: dict[str, Any]) -> None:
        scope = str(_scope(options["scope"])) if options.get("scope") else None
        if not 1 <= options["batch"] <= 10_000:
            raise refuse("--batch must be from 1 to 10000")
        if options.get("resplit") and scope is None:
            raise refuse("--resplit needs --scope")
        state = vectors.status()
        if not state.available:
            raise refuse(f"semantic index unavailable: {state.detail}")
        total = vectors.missing_count(scope)
        done = 0
        width = 30

        def progress(count: int) -> None:
            nonlocal done
            done += count
            filled = width * done // total if total else width
            # A progress bar on stderr, so --json output stays clean.
            self.stderr.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", ending=""
            )
            self.stderr.flush()

        indexed = vectors.reindex(scope=scope, batch=options["batch"], progress=progress)
        if done:
            self.stderr.write("")
        # SQLite: split every big scope that is due into cells (memory/vector_cells.py).
        trained = vectors.train_cells(scope, resplit=bool(options.get("resplit")))
        where = f" at {scope}" if scope else ""
        lines = [f"indexed {indexed} record(s){where} ({state.model} on {state.engine})"]
        lines += [
            f"split {t.scope} into {t.cells} cells ({t.refiled} vectors refiled)" for t in trained
        ]
        self._emit(
            {
                "indexed": indexed,
                "scope": scope,
                "engine": state.engine,
                "model": state.model,
                "cells": {t.scope: t.cells for t in trained},
            },
            "\n".join(lines),
        )
