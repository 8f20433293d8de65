"""Checkpoints: ``aetnamem-checkpoint-v1`` documents and the containment rule.

A checkpoint pins, per subject, the sequence and ``event_hash`` of the chain's
newest event and its event count. Kept somewhere the database's operator
cannot rewrite, it is what detects a deleted chain tail or a swapped
database, which the chain rule alone cannot (audit-log-v1 "What each layer
detects"). Writing one is :func:`audit.services.create_checkpoint`; this module
builds and checks documents.

Failure messages are shared word for word with ``tools/verify_audit.py``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import ScopeError
from audit import merkle, notes, tree
from audit.canonical import CanonicalJSONError, digest, loads_strict
from audit.chain import utc_now_iso
from audit.models import AuditSubject, Checkpoint

CHECKPOINT_FORMAT = "aetnamem-checkpoint-v1"
CONSISTENCY_BUNDLE_FORMAT = "aetnaweb-consistency-bundle-v1"
# The failures of prove_consistency that mean a rewritten history, not a bad signature.
FORK_PREFIXES = ("FORK:", "this log cannot prove")
_LOOKUP_BATCH = 500


class CheckpointError(DomainError, ValueError):
    """A checkpoint that cannot be issued, or input that is not a v1 checkpoint file.

    ``field`` names the request argument at fault when there is one (``old``,
    ``new``), so the API and the page can point at it.
    """

    code = "invalid_checkpoint"
    status = 400
    meaning = "a checkpoint cannot be issued or the input is not a v1 checkpoint file"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)


def checkpoint_digest(document: dict[str, Any]) -> str:
    """``checkpoint_sha256``: the digest of the document without that key."""
    return digest({key: value for key, value in document.items() if key != "checkpoint_sha256"})


def _pinned_rows(sequences: list[int]) -> dict[int, tuple[str, str]]:
    """sequence -> (subject_id, event_hash) for the rows that exist, in batched lookups."""
    found: dict[int, tuple[str, str]] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(sequences), _LOOKUP_BATCH):
            batch = sequences[start : start + _LOOKUP_BATCH]
            marks = ", ".join(["%s"] * len(batch))
            cursor.execute(
                "SELECT sequence, subject_id, event_hash FROM audit_log"  # noqa: S608  (placeholders only)
                f" WHERE sequence IN ({marks})",
                batch,
            )
            for sequence, subject_id, event_hash in cursor.fetchall():
                found[int(sequence)] = (subject_id, event_hash)
    return found


def build_checkpoint_document(*, subject_ids: Iterable[str] | None = None) -> dict[str, Any]:
    """A new checkpoint of every chain (or of ``subject_ids``), digest included.

    Heads come from the subject index (O(subjects), one consistent row per
    subject even while appends continue) and each pinned head is confirmed in
    ``audit_log`` before it is issued: a checkpoint never pins an event that is
    not there.
    """
    heads = AuditSubject.objects.order_by("subject_id")
    if subject_ids is not None:
        heads = heads.filter(subject_id__in=list(subject_ids))
    rows = list(heads.values_list("subject_id", "head_sequence", "head_hash", "event_count"))
    stored = _pinned_rows([sequence for _, sequence, _, _ in rows])
    subjects: dict[str, dict[str, Any]] = {}
    for subject_id, sequence, event_hash, event_count in rows:
        if stored.get(sequence) != (subject_id, event_hash):
            raise CheckpointError(
                f"audit_log does not hold the head recorded for {subject_id} (sequence "
                f"{sequence}); run 'manage.py audit verify' before issuing a checkpoint"
            )
        subjects[subject_id] = {
            "sequence": sequence,
            "event_hash": event_hash,
            "event_count": event_count,
        }
    document: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "created_at": utc_now_iso(),
        "subjects": subjects,
        "log": log_head(),
    }
    document["checkpoint_sha256"] = checkpoint_digest(document)
    return document


def log_head() -> dict[str, Any]:
    """The Merkle log's head now: size, root and, with a key configured, the signed note.

    Additive to v1: ``checkpoint_sha256`` covers it like any other key, and a
    v1 reader that does not know it still checks the rest. The caller holds
    the tree lock so the head and the pinned chains describe one moment.
    """
    tree.integrate_pending()  # the head covers every event committed so far
    size = tree.tree_size()
    root = tree.root_at(size)
    head: dict[str, Any] = {"tree_size": size, "root_hash": base64.b64encode(root).decode()}
    try:
        signer = notes.configured_signer()
    except notes.NoteError as exc:
        raise CheckpointError(str(exc)) from exc
    if signer is not None:
        head["note"] = notes.sign_checkpoint(signer, size, root)
        head["verifier_key"] = signer.verifier.text()
    return head


def parse_checkpoint_line(line: str, *, line_number: int) -> dict[str, Any]:
    """One line of a checkpoint file as a v1 document, or :class:`CheckpointError`."""
    where = f"checkpoint line {line_number}"
    try:
        document = loads_strict(line)
    except ValueError as exc:
        raise CheckpointError(f"{where} is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise CheckpointError(f"{where} is not a JSON object")
    if document.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{where}: format is not {CHECKPOINT_FORMAT}")
    if not isinstance(document.get("created_at"), str):
        raise CheckpointError(f"{where}: created_at is missing or not a string")
    if not isinstance(document.get("checkpoint_sha256"), str):
        raise CheckpointError(f"{where}: checkpoint_sha256 is missing or not a string")
    subjects = document.get("subjects")
    if not isinstance(subjects, dict):
        raise CheckpointError(f"{where}: subjects is missing or not an object")
    for subject_id, entry in subjects.items():
        if (
            not isinstance(entry, dict)
            or type(entry.get("sequence")) is not int
            or not isinstance(entry.get("event_hash"), str)
        ):
            raise CheckpointError(
                f"{where}: subject {subject_id} needs an integer sequence and a string event_hash"
            )
    log = document.get("log")
    if log is not None and (
        not isinstance(log, dict)
        or type(log.get("tree_size")) is not int
        or log["tree_size"] < 0
        or not isinstance(log.get("root_hash"), str)
        or not isinstance(log.get("note", ""), str)
    ):
        raise CheckpointError(
            f"{where}: log needs a non-negative integer tree_size and a base64 root_hash"
        )
    return document


def read_checkpoint_lines(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    """Every non-blank line parsed, numbered from 1; the first malformed line raises."""
    documents = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            documents.append((number, parse_checkpoint_line(line, line_number=number)))
    return documents


@dataclass
class CheckpointResult:
    """The verdict on one checkpoint line."""

    line_number: int
    created_at: str
    checkpoint_sha256: str
    subject_count: int
    failures: list[str] = field(default_factory=list)
    # "verified", "not signed" (no log head, or a head without a note) or
    # "not checked" (this server has no key to check it with).
    signature: str = "not signed"
    tree_size: int | None = None

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line_number,
            "ok": self.ok,
            "created_at": self.created_at,
            "checkpoint_sha256": self.checkpoint_sha256,
            "subject_count": self.subject_count,
            "failures": list(self.failures),
            "signature": self.signature,
            "tree_size": self.tree_size,
        }


def containment_failures(subjects: dict[str, Any]) -> list[str]:
    """The containment rule for every pinned subject (empty when every pin holds)."""
    stored = _pinned_rows(sorted({entry["sequence"] for entry in subjects.values()}))
    failures = []
    for subject_id, entry in sorted(subjects.items()):
        sequence = entry["sequence"]
        found = stored.get(sequence)
        if found is None:
            failures.append(f"subject {subject_id}: pinned event at sequence {sequence} is missing")
        elif found[0] != subject_id:
            failures.append(
                f"subject {subject_id}: pinned event at sequence {sequence} belongs to "
                "another subject"
            )
        elif found[1] != entry["event_hash"]:
            failures.append(
                f"subject {subject_id}: pinned event at sequence {sequence} has a different "
                "event_hash"
            )
    return failures


def verify_checkpoints(lines: Iterable[str], *, principal: Principal) -> list[CheckpointResult]:
    """Check each checkpoint line: its digest, then containment for each pinned subject.

    Malformed input raises :class:`CheckpointError` before anything is checked;
    an altered checkpoint (digest mismatch) is refused and its pins ignored.
    """
    documents = read_checkpoint_lines(lines)
    if not principal.is_system:
        for _, document in documents:
            for subject_id in document["subjects"]:
                try:
                    access.require(principal, access.AUDIT, subject_id)
                except ScopeError as exc:
                    raise access.AccessDenied(str(exc)) from exc
    results = []
    for number, document in documents:
        result = CheckpointResult(
            line_number=number,
            created_at=document["created_at"],
            checkpoint_sha256=document["checkpoint_sha256"],
            subject_count=len(document["subjects"]),
        )
        try:
            recomputed = checkpoint_digest(document)
        except CanonicalJSONError:
            recomputed = None
        if recomputed != document["checkpoint_sha256"]:
            result.failures.append("checkpoint_sha256 does not match the checkpoint's content")
        else:
            result.failures.extend(containment_failures(document["subjects"]))
            if "log" in document:
                result.tree_size = document["log"]["tree_size"]
                result.signature, log_failures = log_head_failures(document["log"])
                result.failures.extend(log_failures)
        results.append(result)
    return results


def log_head_failures(log: dict[str, Any]) -> tuple[str, list[str]]:
    """(signature verdict, failures) for a checkpoint's log head against this database.

    The signed root must be the root of the first ``tree_size`` events of
    ``audit_log`` (the log only grew since), recomputed from the rows
    themselves (O(n)); the stored tree is checked by :func:`tree.verify_log`.
    """
    failures: list[str] = []
    size = log["tree_size"]
    try:
        root = base64.b64decode(log["root_hash"], validate=True)
    except (binascii.Error, ValueError):
        return "not signed", ["log root_hash is not base64"]
    signature = "not signed"
    if log.get("note"):
        try:
            note = notes.parse_checkpoint(log["note"])
        except notes.NoteError as exc:
            return "not signed", [f"log note is malformed: {exc}"]
        if note.size != size or note.root != root:
            failures.append("log note names a different tree size or root than the checkpoint")
        try:
            signer = notes.configured_signer()
        except notes.NoteError as exc:
            signer = None
            failures.append(f"the signature could not be checked: {exc}")
        if signer is None:
            signature = "not checked"
        elif note.signed_by(signer.verifier):
            signature = "verified"
        else:
            signature = "invalid"
            failures.append("log note is not signed by this server's checkpoint key")
    # Worded as tools/verify_audit.py words it: both recompute from audit_log.
    recomputed = tree.events_root(size)
    if recomputed is None:
        failures.append(
            f"audit_log holds fewer than the {size} events this checkpoint's log signed: "
            "the log was truncated"
        )
    elif recomputed != root:
        failures.append(
            f"the log root at tree size {size}, recomputed from audit_log, differs from the "
            "checkpoint's: the log was rewritten (a fork)"
        )
    return signature, failures


# -- consistency between two checkpoints (issue 14) -------------------------------------


@dataclass(frozen=True)
class LogHead:
    """A signed or unsigned tree head taken from a checkpoint document or a bare note."""

    size: int
    root: bytes
    note: str | None = None
    # Where the head came from, for a bundle's reader: the stored checkpoint's
    # ID, created_at and checkpoint_sha256 (empty for a bare note).
    source: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_document(
        cls, document: dict[str, Any], *, checkpoint_id: int | None = None
    ) -> LogHead:
        log = document.get("log")
        if not isinstance(log, dict):
            raise CheckpointError("this checkpoint predates the Merkle log: it has no log head")
        try:
            root = base64.b64decode(log["root_hash"], validate=True)
        except (binascii.Error, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError("the checkpoint's log root_hash is not base64") from exc
        source = {
            "checkpoint_id": checkpoint_id,
            "created_at": document.get("created_at"),
            "checkpoint_sha256": document.get("checkpoint_sha256"),
        }
        return cls(
            int(log["tree_size"]),
            root,
            log.get("note") or None,
            tuple((key, value) for key, value in source.items() if value is not None),
        )

    def describe(self) -> dict[str, Any]:
        """The head as a bundle carries it: size, base64 root, where it came from."""
        return {
            **dict(self.source),
            "tree_size": self.size,
            "root_hash": base64.b64encode(self.root).decode(),
            "signed": self.note is not None,
        }

    @classmethod
    def parse(cls, text: str, *, checkpoint_id: int | None = None) -> LogHead:
        """A checkpoint note, or the last v1 JSON line of a checkpoint file."""
        if text.lstrip().startswith("{"):
            lines = [line for line in text.splitlines() if line.strip()]
            document = parse_checkpoint_line(lines[-1], line_number=len(lines))
            return cls.from_document(document, checkpoint_id=checkpoint_id)
        try:
            note = notes.parse_checkpoint(text)
        except notes.NoteError as exc:
            raise CheckpointError(f"not a checkpoint note or checkpoint line: {exc}") from exc
        return cls(note.size, note.root, text)


@dataclass
class ConsistencyVerdict:
    old_size: int
    new_size: int
    proof: list[bytes]
    signatures: dict[str, str]
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def fork(self) -> bool:
        """The log cannot show that NEW extends OLD: one of the two histories was rewritten."""
        return any(failure.startswith(FORK_PREFIXES) for failure in self.failures)

    def bundle(self, old: LogHead, new: LogHead) -> dict[str, Any]:
        """The self-contained bundle ``tools/verify_audit.py --consistency`` checks offline.

        ``old`` and ``new`` are the signed notes (null for an unsigned head; the
        keys and the ``proof`` are what earlier bundles held, so a witness reads
        either); ``old_head``/``new_head`` give each size and root in the clear
        and which checkpoint it came from. ``consistent`` and ``failures`` are
        this server's verdict, for a reader: the tool recomputes its own.
        """
        return {
            "format": CONSISTENCY_BUNDLE_FORMAT,
            "old": old.note,
            "new": new.note,
            "old_head": old.describe(),
            "new_head": new.describe(),
            "proof": [base64.b64encode(node).decode() for node in self.proof],
            "consistent": self.ok,
            "fork": self.fork,
            "failures": list(self.failures),
            "signatures": dict(self.signatures),
        }


def _signature_verdict(head: LogHead, key: notes.VerifierKey | None) -> str:
    if head.note is None:
        return "not signed"
    if key is None:
        return "not checked"
    return "verified" if notes.parse_checkpoint(head.note).signed_by(key) else "invalid"


def prove_consistency(old: LogHead, new: LogHead) -> ConsistencyVerdict:
    """Does ``new`` extend ``old``? The proof comes from this log; a failure is a fork.

    Each head's signature is checked with this server's key when one is
    configured; a head this log cannot reproduce is reported, never hidden.
    """
    try:
        signer = notes.configured_signer()
    except notes.NoteError as exc:
        raise CheckpointError(str(exc)) from exc
    key = signer.verifier if signer else None
    signatures = {"old": _signature_verdict(old, key), "new": _signature_verdict(new, key)}
    failures = [
        f"the {which} checkpoint's signature is invalid"
        for which, verdict in signatures.items()
        if verdict == "invalid"
    ]
    if old.size > new.size:
        raise CheckpointError(
            f"OLD has {old.size} leaves and NEW {new.size}: give the older checkpoint first"
        )
    proof: list[bytes] = []
    if old.size == 0:
        failures.append("the older checkpoint is of an empty log: there is nothing to extend")
        return ConsistencyVerdict(old.size, new.size, proof, signatures, failures)
    try:
        proof = tree.consistency_proof(old.size, new.size)
    except tree.TreeError as exc:
        failures.append(f"this log cannot prove the newer checkpoint: {exc}")
        return ConsistencyVerdict(old.size, new.size, proof, signatures, failures)
    try:
        merkle.verify_consistency(
            old_size=old.size, new_size=new.size, old_root=old.root, new_root=new.root, proof=proof
        )
    except merkle.ProofError as exc:
        failures.append(f"FORK: the newer checkpoint does not extend the older ({exc})")
    return ConsistencyVerdict(old.size, new.size, proof, signatures, failures)


def stored_document_failures(checkpoint: Checkpoint) -> list[str]:
    """Why a stored checkpoint no longer is the document that was issued (empty: it is).

    The checkpoints page judges consistency from the row's columns (tree size,
    root); those and the document must still agree, and the document must
    still hash to the ``checkpoint_sha256`` it was issued with, or an edit in
    the database would be shown as "consistent" (issue 29 item 7).
    """
    try:
        document = parse_checkpoint_line(checkpoint.document, line_number=1)
    except CheckpointError as exc:
        return [f"the stored document is no longer a checkpoint ({exc})"]
    failures = []
    if checkpoint_digest(document) != document["checkpoint_sha256"]:
        failures.append("the stored document does not hash to its checkpoint_sha256")
    if document["checkpoint_sha256"] != checkpoint.checkpoint_sha256:
        failures.append("the stored document's checkpoint_sha256 is not the one it was issued with")
    log = document.get("log")
    head = (log["tree_size"], log["root_hash"], "note" in log) if log else (None, "", False)
    if head != (checkpoint.tree_size, checkpoint.root_hash, checkpoint.note_signed):
        failures.append("the stored document's log head differs from the checkpoint's columns")
    if len(document["subjects"]) != checkpoint.subject_count:
        failures.append("the stored document pins a different number of chains")
    return failures
