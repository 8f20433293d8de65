"""Deletion receipts: ``aetnamem-deletion-receipt-v1`` (audit-log-v1).

A receipt is bound to the ``memory.forget`` (or ``memory.record_rejected``)
event that recorded the purge: it names that event's ID and hash, and the
event's payload lists the same purged record and episode IDs. The event's
payload must therefore carry ``purged_record_ids`` and ``purged_episode_ids``
(lists of strings) and, when the receipt has one, the same ``selector_sha256``.

Only a real purge can back a receipt: the bound event's type must be one of
:data:`PURGE_EVENT_TYPES`. Agent-logged events (``agent.*``) never qualify,
whatever their payload says. Where the records are at hand, the memory engine
registers a check (:func:`register_purge_check`) that every record the
receipt names is tombstoned and every episode purged; the evidence layer
imports nothing from the memory engine, so the check comes to it.

Failure messages are shared word for word with ``tools/verify_audit.py``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from aetnaweb import access
from aetnaweb.access import Principal
from audit import merkle, notes, tree
from audit.canonical import CanonicalJSONError, digest, loads_strict
from audit.chain import PREIMAGE_FIELDS, compute_event_hash
from audit.models import AuditEvent
from audit.verification import COLUMNS, is_canonical_subject

DELETION_RECEIPT_FORMAT = "aetnamem-deletion-receipt-v1"

# The only events that purge (audit-log-v1 "Receipt rule").
PURGE_EVENT_TYPES = ("memory.forget", "memory.record_rejected")

# (subject_id, record IDs, episode IDs) -> failures; see register_purge_check.
PurgeCheck = Callable[[str, list[str], list[str]], list[str]]
_purge_checks: list[PurgeCheck] = []


def register_purge_check(check: PurgeCheck) -> None:
    """Add a check that the records and episodes a receipt names really were purged.

    The memory engine registers one when the app loads (``memory.apps``);
    registering the same function twice keeps one copy.
    """
    if check not in _purge_checks:
        _purge_checks.append(check)


def not_a_purge_failure(event_id: str, event_type: str) -> str:
    return (
        f"audit event {event_id} is a {event_type} event, not a purge "
        f"({' or '.join(PURGE_EVENT_TYPES)})"
    )


# field -> the type it must have; lists must hold strings
RECEIPT_FIELDS: dict[str, type] = {
    "format": str,
    "subject_id": str,
    "created_at": str,
    "selector_sha256": str,
    "purged_record_ids": list,
    "purged_episode_ids": list,
    "audit_event_id": str,
    "audit_event_hash": str,
    "receipt_sha256": str,
}


# Every field a receipt may hold: those above and the optional log proof. Each
# one is a field of the bound event (or its payload) or recomputed from it, so
# the event's hash binds them all; anything else is a claim nothing binds.
ALLOWED_RECEIPT_FIELDS = frozenset(RECEIPT_FIELDS) | {"log_proof"}


def unknown_field_failures(receipt: dict[str, Any]) -> list[str]:
    """A field the format does not define (a "note", a second date): refused, not ignored."""
    extra = sorted(str(name) for name in receipt if name not in ALLOWED_RECEIPT_FIELDS)
    if not extra:
        return []
    return [f"receipt holds fields its format does not define: {', '.join(extra)}"]


def created_at_failure(receipt_time: Any, event_id: str, event_time: Any) -> list[str]:
    """``created_at`` is the bound event's time, exactly: a receipt cannot be backdated."""
    if receipt_time == event_time:
        return []
    return [
        f"receipt created_at {receipt_time} is not the time of audit event {event_id} "
        f"({event_time}): the receipt was changed after it was issued"
    ]


def build_deletion_receipt(
    *,
    event: AuditEvent,
    selector_sha256: str,
    purged_record_ids: list[str],
    purged_episode_ids: list[str],
) -> dict[str, Any]:
    """The receipt for a purge already recorded by ``event`` (same transaction)."""
    receipt: dict[str, Any] = {
        "format": DELETION_RECEIPT_FORMAT,
        "subject_id": event.subject_id,
        "created_at": event.created_at,
        "selector_sha256": selector_sha256,
        "purged_record_ids": list(purged_record_ids),
        "purged_episode_ids": list(purged_episode_ids),
        "audit_event_id": event.event_id,
        "audit_event_hash": event.event_hash,
        # Additive (issue 14): the v1 digest covers it like every other field.
        "log_proof": log_proof_for(event),
    }
    receipt["receipt_sha256"] = digest(receipt)
    return receipt


def _id_list(value: Any) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return sorted(value)


def receipt_shape_failures(receipt: Any) -> list[str]:
    """What makes ``receipt`` not a v1 deletion receipt at all (empty when well formed)."""
    if not isinstance(receipt, dict):
        return ["receipt is not a JSON object"]
    failures = []
    if receipt.get("format") != DELETION_RECEIPT_FORMAT:
        failures.append(f"receipt format is not {DELETION_RECEIPT_FORMAT}")
    for name, kind in RECEIPT_FIELDS.items():
        value = receipt.get(name)
        if name == "format":
            continue
        well_typed = _id_list(value) is not None if kind is list else isinstance(value, kind)
        if not well_typed:
            failures.append(f"receipt field {name} is missing or has the wrong type")
    return failures or unknown_field_failures(receipt)


def verify_deletion_receipt(receipt: Any, *, principal: Principal) -> list[str]:
    """The receipt rule; returns the failures (an empty list means the receipt holds).

    ``receipt_sha256`` recomputes; the event ``audit_event_id`` exists in the
    receipt subject's chain with hash ``audit_event_hash`` (and that hash
    recomputes from the stored row); its type is a purge; its payload lists the
    same purged record and episode IDs; and, through the registered checks,
    each named record is tombstoned and each episode purged. An altered
    receipt digest skips the remaining checks: the rest of an altered receipt
    proves nothing. ``receipt_sha256`` is unkeyed, so the receipt is bound
    field by field to the event instead: its ``created_at`` is the event's
    time, its ``selector_sha256`` the one the payload commits, and a field
    the format does not define is refused.
    """
    failures = receipt_shape_failures(receipt)
    if failures:
        return failures
    if not _receipt_digest_holds(receipt):
        return ["receipt_sha256 does not match the receipt's content"]
    subject_id = receipt["subject_id"]
    event_id = receipt["audit_event_id"]
    if not is_canonical_subject(subject_id):
        return ["receipt subject_id is not a canonical scope string"]
    access.require(principal, access.AUDIT, subject_id)
    stored = (
        AuditEvent.objects.filter(event_id=event_id, subject_id=subject_id)
        .values(*COLUMNS[1:])  # every column but sequence: the preimage and the stored hash
        .first()
    )
    if stored is None:
        return [f"audit event {event_id} is not in subject {subject_id}'s chain"]
    failures = _event_failures(receipt, dict(stored))
    for check in _purge_checks:
        failures.extend(
            check(
                subject_id,
                sorted(receipt["purged_record_ids"]),
                sorted(receipt["purged_episode_ids"]),
            )
        )
    if "log_proof" in receipt:
        failures.extend(
            server_log_proof_failures(receipt["log_proof"], receipt["audit_event_hash"])
        )
    return failures


def _receipt_digest_holds(receipt: dict[str, Any]) -> bool:
    claimed = {key: value for key, value in receipt.items() if key != "receipt_sha256"}
    try:
        return bool(digest(claimed) == receipt["receipt_sha256"])
    except CanonicalJSONError:
        return False


def _event_failures(receipt: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """How the stored event ``row`` disagrees with the receipt that names it."""
    event_id = receipt["audit_event_id"]
    failures: list[str] = []
    if row["event_type"] not in PURGE_EVENT_TYPES:
        failures.append(not_a_purge_failure(event_id, str(row["event_type"])))
    if row["event_hash"] != receipt["audit_event_hash"]:
        failures.append(f"audit event {event_id} has a different event_hash than the receipt names")
    # The two columns outside the preimage come off the row; the rest recomputes the hash.
    payload_text = row.pop("payload")
    stored_hash = row.pop("event_hash")
    try:
        payload = loads_strict(payload_text)
    except ValueError:
        payload = None
    recomputed: str | None = None
    if not isinstance(payload, dict):
        payload = {}
    else:
        try:
            recomputed = compute_event_hash(payload=payload, **row)
        except CanonicalJSONError:
            recomputed = None
    if recomputed != stored_hash:
        failures.append(f"audit event {event_id} does not recompute to its event_hash")
    for field in ("purged_record_ids", "purged_episode_ids"):
        if _id_list(payload.get(field)) != _id_list(receipt[field]):
            noun = field.removeprefix("purged_").removesuffix("_ids")
            failures.append(f"audit event {event_id} payload lists different purged {noun} IDs")
    # Every purge event commits its selector digest; one that does not (or
    # names another) leaves the receipt's selector_sha256 bound to nothing.
    if payload.get("selector_sha256") != receipt["selector_sha256"]:
        failures.append(f"audit event {event_id} payload names a different selector_sha256")
    failures.extend(created_at_failure(receipt["created_at"], event_id, row["created_at"]))
    return failures


def server_log_proof_failures(proof: Any, event_hash: str) -> list[str]:
    """A receipt's ``log_proof`` checked with this server's key and against its stored log."""
    try:
        signer = notes.configured_signer()
    except notes.NoteError as exc:
        return [f"the log proof's signature could not be checked: {exc}"]
    failures, _ = verify_log_proof(
        proof, event_hash=event_hash, key=signer.verifier if signer else None
    )
    if failures:
        return failures
    # The proof holds offline; it must also agree with the log as stored now.
    try:
        if tree.root_at(proof["tree_size"]) != base64.b64decode(proof["root_hash"]):
            failures.append("log_proof root differs from this log's root at that size (a fork)")
    except tree.TreeError as exc:
        failures.append(f"log_proof names a tree this log does not hold: {exc}")
    return failures


# -- Merkle log proofs in receipts (issue 14) ----------------------------------------

LOG_PROOF_FORMAT = "aetnaweb-log-proof-v1"


def log_proof_for(event: AuditEvent) -> dict[str, Any]:
    """The ``log_proof`` a receipt carries: the event, its inclusion proof and a signed head.

    Called in the event's own transaction, right after its append: the tree's
    newest leaf is this event, so the head is signed at exactly its size. With
    no signing key configured the head is given unsigned (``root_hash``), and a
    holder can check inclusion but not who vouches for the root.
    """
    # The event's own transaction holds the tree lock: integrating the pending
    # batch (this event included) here is what makes it a leaf to prove.
    tree.lock_tree()  # already held (re-entrant); says so where it matters
    tree.integrate_pending()
    found = tree.proof_for_sequence(event.sequence)
    if found is None:
        raise tree.TreeError(f"event #{event.sequence} is not a leaf of the Merkle log")
    leaf_index, size, root, path = found
    proof: dict[str, Any] = {
        "format": LOG_PROOF_FORMAT,
        "event": {
            key: (loads_strict(event.payload) if key == "payload" else getattr(event, key))
            for key in PREIMAGE_FIELDS
        },
        "leaf_index": leaf_index,
        "tree_size": size,
        "inclusion_proof": [base64.b64encode(node).decode() for node in path],
        "root_hash": base64.b64encode(root).decode(),
    }
    signer = notes.configured_signer()
    if signer is not None:
        proof["checkpoint"] = notes.sign_checkpoint(signer, size, root)
    return proof


def _log_proof_well_typed(proof: dict[str, Any]) -> bool:
    event, nodes = proof.get("event"), proof.get("inclusion_proof")
    return (
        isinstance(event, dict)
        and set(event) == set(PREIMAGE_FIELDS)
        and type(proof.get("leaf_index")) is int
        and type(proof.get("tree_size")) is int
        and isinstance(nodes, list)
        and all(isinstance(node, str) for node in nodes)
        and isinstance(proof.get("root_hash"), str)
    )


def verify_log_proof(
    proof: Any, *, event_hash: str, key: notes.VerifierKey | None
) -> tuple[list[str], str]:
    """(failures, signature verdict) for a receipt's ``log_proof``, offline: no database.

    The event recomputes to ``event_hash``; its leaf is included under the
    proof's root; the root is the signed checkpoint's, and the checkpoint is
    signed by ``key`` ("verified"), or could not be checked ("not checked":
    no key given; "not signed": the proof has no checkpoint).
    """
    if not isinstance(proof, dict) or proof.get("format") != LOG_PROOF_FORMAT:
        return [f"log_proof is not an {LOG_PROOF_FORMAT} object"], "not signed"
    if not _log_proof_well_typed(proof):
        return ["log_proof is missing a field or has one of the wrong type"], "not signed"
    event, index, size = proof["event"], proof["leaf_index"], proof["tree_size"]
    nodes = proof["inclusion_proof"]
    failures: list[str] = []
    try:
        recomputed = compute_event_hash(**event)
    except (CanonicalJSONError, TypeError):
        recomputed = None
    if recomputed != event_hash:
        failures.append("log_proof event does not recompute to the receipt's audit_event_hash")
    try:
        root = base64.b64decode(proof["root_hash"], validate=True)
        path = [base64.b64decode(node, validate=True) for node in nodes]
    except (binascii.Error, ValueError):
        return [*failures, "log_proof holds a hash that is not base64"], "not signed"
    verdict = "not signed"
    if "checkpoint" in proof:
        try:
            note = notes.parse_checkpoint(proof["checkpoint"])
        except notes.NoteError as exc:
            return [*failures, f"log_proof checkpoint is malformed: {exc}"], "not signed"
        if note.size != size or note.root != root:
            failures.append("log_proof checkpoint names a different tree size or root")
        if key is None:
            verdict = "not checked"
        elif note.signed_by(key):
            verdict = "verified"
        else:
            verdict = "invalid"
            failures.append("log_proof checkpoint is not signed by the given key")
    try:
        merkle.verify_inclusion(
            index=index,
            size=size,
            leaf=merkle.event_leaf_hash(event_hash),
            proof=path,
            root=root,
        )
    except merkle.ProofError as exc:
        failures.append(f"log_proof inclusion proof does not verify: {exc}")
    return failures, verdict
