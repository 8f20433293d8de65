"""A witness: cosign a log's checkpoint only if it extends the last one this witness cosigned.

A second organisation runs it with its own key and state file (docs/auditors.md
"Running a witness"). A log that shows one history to the witness and another
to someone else must fork, and the witness refuses to cosign a fork: holders
who require the witness's cosignature cannot be shown a rewritten log.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from audit import merkle, notes, tree
from audit.checkpoints import CheckpointError


class WitnessError(CheckpointError):
    """A checkpoint the witness will not cosign (bad signature, rollback, fork)."""

    code = "witness_refused"
    status = 400
    meaning = "the witness will not cosign this checkpoint (bad signature, rollback, fork)"


def _load_state(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None  # first run: trust on first use, documented
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        state["root_bytes"] = base64.b64decode(state["root"], validate=True)
        int(state["size"])
        str(state["origin"])
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise WitnessError(f"the witness state file {path} is unreadable: {exc}") from exc
    return state


def _save_state(path: Path, note: notes.Checkpoint, text: str) -> None:
    state = {
        "origin": note.origin,
        "size": note.size,
        "root": base64.b64encode(note.root).decode(),
        "note": text,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed: a crash never leaves a half-written state.
    fd, temporary = tempfile.mkstemp(prefix=".witness-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _proof(state: dict[str, Any], note: notes.Checkpoint, bundle: Any) -> list[bytes]:
    if bundle is None:
        try:
            return tree.consistency_proof(int(state["size"]), note.size)
        except tree.TreeError as exc:
            raise WitnessError(f"no consistency proof from this database: {exc}") from exc
    try:
        old = notes.parse_checkpoint(bundle["old"])
        new = notes.parse_checkpoint(bundle["new"])
        proof = [base64.b64decode(item, validate=True) for item in bundle["proof"]]
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise WitnessError(f"the consistency bundle is malformed: {exc}") from exc
    if (old.size, old.root) != (int(state["size"]), state["root_bytes"]) or (
        new.size,
        new.root,
    ) != (note.size, note.root):
        raise WitnessError("the consistency bundle is not about these two checkpoints")
    return proof


def witness_cosign(
    note_text: str,
    *,
    witness_key: notes.SignerKey,
    log_key: notes.VerifierKey,
    state_path: Path,
    bundle: Any = None,
) -> str:
    """The note with the witness's signature added; the state file then names it."""
    note = notes.parse_checkpoint(note_text)
    if note.origin != log_key.name or not note.signed_by(log_key):
        raise WitnessError("the checkpoint is not signed by the log's key: not cosigned")
    state = _load_state(state_path)
    if state is not None:
        if state["origin"] != note.origin:
            raise WitnessError(f"this witness follows {state['origin']}, not {note.origin}")
        if note.size < int(state["size"]):
            raise WitnessError(
                f"the checkpoint ({note.size} leaves) is older than the last cosigned "
                f"({state['size']}): a rollback, not cosigned"
            )
        if note.size == int(state["size"]):
            if note.root != state["root_bytes"]:
                raise WitnessError("FORK: same tree size, different root; not cosigned")
        else:
            try:
                merkle.verify_consistency(
                    old_size=int(state["size"]),
                    new_size=note.size,
                    old_root=state["root_bytes"],
                    new_root=note.root,
                    proof=_proof(state, note, bundle),
                )
            except merkle.ProofError as exc:
                raise WitnessError(
                    f"FORK: the checkpoint does not extend the last cosigned ({exc}); not cosigned"
                ) from exc
    cosigned = notes.add_signature(note_text, witness_key)
    _save_state(state_path, note, note_text)
    return cosigned
