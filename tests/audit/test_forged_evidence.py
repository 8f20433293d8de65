"""Issue 29 items 1 and 2: offline verification cannot be fooled; receipts are bound to the log.

Each test is one forgery shape from the issue's scripts: a receipt built from
nothing (no checkpoint), a fabricated action receipt, unsigned and mixed heads
in a consistency bundle, a check with no ``cryptography`` package, and a real
receipt backdated, given an extra "note" or a changed ``selector_sha256``. The
standalone tool runs as the auditor runs it (``main`` with the same argv);
the database surfaces are the ones ``tests/api/test_forged_receipts.py``
walks (the tool on the database, ``manage.py audit verify --receipt``, the
receipt verify page and the evidence upload page).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from aetnaweb.access import SYSTEM
from audit import merkle, notes
from audit.canonical import digest, sha256_text
from audit.chain import compute_event_hash
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import services
from tests.api.test_forged_receipts import SCOPE, committed, four_verdicts, remember_fact
from tests.audit.conftest import append, tool
from tests.factories import login_as, make_operator

ORIGIN = "aetnaweb.test/audit"
BACKDATED = "2025-01-01T00:00:00.000000Z"
NOTE = "Deleted under GDPR Art. 17 at the data subject's request"


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate(ORIGIN)
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


def offline(tmp_path: Path, option: str, artefact: dict[str, Any], *extra: str) -> tuple[int, str]:
    """``verify_audit.py --offline-receipt|--consistency FILE [extra]``: (exit status, stdout)."""
    path = tmp_path / "artefact.json"
    path.write_text(json.dumps(artefact))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = tool.main([option, str(path), *extra])
    return code, out.getvalue()


def key_args(signer: notes.SignerKey) -> tuple[str, str]:
    return ("--public-key", signer.verifier.text())


def resign(receipt: dict[str, Any]) -> dict[str, Any]:
    """What a holder can always do: recompute the unkeyed ``receipt_sha256``."""
    body = {k: v for k, v in receipt.items() if k != "receipt_sha256"}
    return body | {"receipt_sha256": digest(body)}


def one_leaf_proof(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(event hash, log proof) for a made-up event alone in a made-up tree, no checkpoint."""
    event_hash = compute_event_hash(**event)
    root = merkle.event_leaf_hash(event_hash)
    return event_hash, {
        "format": "aetnaweb-log-proof-v1",
        "event": event,
        "leaf_index": 0,
        "tree_size": 1,
        "inclusion_proof": [],
        "root_hash": base64.b64encode(root).decode(),
    }


def made_up_event(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": "aud_" + "ab" * 16,
        "subject_id": SCOPE,
        "event_type": event_type,
        "created_at": "2026-01-01T00:00:00.000000Z",
        "actor": "alice",
        "session_id": None,
        "turn_id": None,
        "record_id": None,
        "payload": payload,
        "prev_hash": None,
    }


def fabricated_deletion_receipt() -> dict[str, Any]:
    selector = sha256_text("backup email")
    event = made_up_event(
        "memory.forget",
        {"selector_sha256": selector, "purged_record_ids": ["rec_x"], "purged_episode_ids": []},
    )
    event_hash, proof = one_leaf_proof(event)
    return resign(
        {
            "format": "aetnamem-deletion-receipt-v1",
            "subject_id": SCOPE,
            "created_at": event["created_at"],
            "selector_sha256": selector,
            "purged_record_ids": ["rec_x"],
            "purged_episode_ids": [],
            "audit_event_id": event["event_id"],
            "audit_event_hash": event_hash,
            "log_proof": proof,
        }
    )


def fabricated_action_receipt() -> dict[str, Any]:
    operations = [{"operation_id": "op_1", "adapter": "mail", "state": "committed"}]
    payload = {
        "transaction_id": "act_1",
        "plan_hash": "1" * 64,
        "terminal_state": "committed",
        "operations_digest": digest(operations),
    }
    event = made_up_event("action.receipt_issued", payload)
    event_hash, proof = one_leaf_proof(event)
    return resign(
        {
            "format": "aetna-action-receipt-v1",
            "transaction_id": "act_1",
            "subject_id": SCOPE,
            "plan_hash": "1" * 64,
            "terminal_state": "committed",
            "operation_receipts": operations,
            "audit_event_id": event["event_id"],
            "audit_event_hash": event_hash,
            "created_at": event["created_at"],
            "log_proof": proof,
        }
    )


def real_receipt() -> dict[str, Any]:
    """A genuine receipt from a forget through the memory service."""
    record_id = remember_fact()
    return services.forget(principal=SYSTEM, scope=SCOPE, record_ids=[record_id])


# -- item 1: with a key, only a checkpoint signed by it passes ----------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("build", [fabricated_deletion_receipt, fabricated_action_receipt])
def test_a_receipt_with_no_checkpoint_fails_with_the_key(build, signer, tmp_path):
    # Given a receipt built from nothing: a made-up event alone in a one-leaf tree
    forged = build()
    # When it is checked offline with the real verifier key
    code, out = offline(tmp_path, "--offline-receipt", forged, *key_args(signer))
    # Then it fails (exit 1) and says why in one line, and never says "verified"
    assert code == 1, out
    assert (
        "  log_proof checkpoint is missing: nothing signed by the given key vouches for this root"
        in out.splitlines()
    )
    assert "verified" not in out


@pytest.mark.django_db
def test_a_real_receipt_verifies_with_the_key_and_not_without_it(signer, tmp_path):
    # Given a genuine receipt whose log proof carries a checkpoint signed by the log's key
    receipt = real_receipt()
    assert "checkpoint" in receipt["log_proof"]
    # Then with the key it verifies: exit 0
    code, out = offline(tmp_path, "--offline-receipt", receipt, *key_args(signer))
    assert code == 0, out
    assert out.splitlines()[-1] == "verified offline: every checkpoint is signed by the given key"
    # And without a key it says nothing proves who made it, exits 3, and never says "verified"
    code, out = offline(tmp_path, "--offline-receipt", receipt)
    assert code == 3, out
    assert "nothing proves who made these artefacts" in out
    assert "verified" not in out.lower().replace("not verified", "")
    # And only an explicit --no-signature-check turns that into exit 0, with the same warning
    code, out = offline(tmp_path, "--offline-receipt", receipt, "--no-signature-check")
    assert code == 0 and "nothing proves who made these artefacts" in out
    # And the two options together are a usage error
    assert (
        offline(tmp_path, "--offline-receipt", receipt, "--no-signature-check", *key_args(signer))[
            0
        ]
        == 2
    )


@pytest.mark.django_db
def test_a_fabricated_receipt_without_a_key_is_not_a_pass(tmp_path):
    # Given the same receipt built from nothing, checked with no key at all
    code, out = offline(tmp_path, "--offline-receipt", fabricated_deletion_receipt())
    # Then the tool does not exit 0: nothing proves who made it
    assert code == 3 and "nothing proves who made these artefacts" in out


@pytest.mark.django_db
def test_an_unverifiable_signature_is_a_failure(signer, tmp_path, monkeypatch):
    # Given a genuine signed receipt, on a Python without the cryptography package
    receipt = real_receipt()
    monkeypatch.setitem(sys.modules, "cryptography", None)
    monkeypatch.setitem(sys.modules, "cryptography.exceptions", None)
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric.ed25519", None)
    # When it is checked offline with the key
    code, out = offline(tmp_path, "--offline-receipt", receipt, *key_args(signer))
    # Then the tool cannot check the signature, and that is a failure (exit 1), not "not checked"
    assert code == 1, out
    assert (
        "  log_proof checkpoint signature cannot be checked (the 'cryptography' package is not "
        "installed): nothing proves the key signed it"
    ) in out.splitlines()


# -- item 1: consistency bundles ------------------------------------------------------------------


def log_leaves() -> list[bytes]:
    hashes = AuditEvent.objects.order_by("sequence").values_list("event_hash", flat=True)
    return [merkle.event_leaf_hash(h) for h in hashes]


def consistency_proof(leaves: list[bytes], old_size: int) -> list[str]:
    ranges = merkle.consistency_ranges(old_size, len(leaves))
    nodes = [merkle.root_of_leaves(leaves[start:end]) for start, end in ranges]
    return [base64.b64encode(node).decode() for node in nodes]


def head(size: int, root: bytes) -> dict[str, Any]:
    return {"tree_size": size, "root_hash": base64.b64encode(root).decode()}


@pytest.mark.django_db
def test_a_bundle_of_two_unsigned_heads_fails_with_the_key(signer, tmp_path):
    # Given two unsigned heads of a tree (any tree anyone can build) and a valid proof between them
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(6)]
    bundle = {
        "old": None,
        "new": None,
        "old_head": head(2, merkle.root_of_leaves(leaves[:2])),
        "new_head": head(6, merkle.root_of_leaves(leaves)),
        "proof": consistency_proof(leaves, 2),
    }
    # When it is checked with the key
    code, out = offline(tmp_path, "--consistency", bundle, *key_args(signer))
    # Then it fails, naming both unsigned heads
    assert code == 1, out
    for side in ("old", "new"):
        assert (
            f"  the {side} checkpoint is not signed: with --public-key it must be signed by that key"
            in out.splitlines()
        )


@pytest.mark.django_db
def test_a_real_old_note_with_an_invented_unsigned_new_head_fails(signer, tmp_path):
    # Given a real old checkpoint signed by the log's key
    for _ in range(3):
        append(SCOPE)
    real = log_leaves()
    old_note = notes.sign_checkpoint(signer, len(real), merkle.root_of_leaves(real))
    # And an invented "new" head that appends 40 fake leaves, unsigned, with a proof that holds
    grown = real + [merkle.leaf_hash(b"fake %d" % i) for i in range(40)]
    bundle = {
        "old": old_note,
        "new": None,
        "new_head": head(len(grown), merkle.root_of_leaves(grown)),
        "proof": consistency_proof(grown, len(real)),
    }
    # When it is checked with the key
    code, out = offline(tmp_path, "--consistency", bundle, *key_args(signer))
    # Then it fails: the new head is not signed, whatever the proof says
    assert code == 1, out
    assert (
        "  the new checkpoint is not signed: with --public-key it must be signed by that key"
        in out.splitlines()
    )
    # And the same bundle with the new head signed by the key holds (the proof itself is fine)
    signed = bundle | {
        "new": notes.sign_checkpoint(signer, len(grown), merkle.root_of_leaves(grown)),
        "new_head": None,
    }
    assert offline(tmp_path, "--consistency", signed, *key_args(signer))[0] == 0
    # But not on a Python that cannot check the signatures: that fails too, never "not checked"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "cryptography", None)
        patch.setitem(sys.modules, "cryptography.exceptions", None)
        code, out = offline(tmp_path, "--consistency", signed, *key_args(signer))
    assert code == 1, out
    assert (
        "  the new checkpoint signature cannot be checked (the 'cryptography' package is not "
        "installed): nothing proves the key signed it"
    ) in out.splitlines()


# -- item 2: a real receipt cannot be backdated or given extra claims ---------------------------


@committed
def test_a_backdated_receipt_fails_on_every_surface(client, signer, tmp_path):
    # Given a genuine receipt, backdated and its unkeyed digest recomputed
    receipt = real_receipt()
    event_id = receipt["audit_event_id"]
    backdated = resign(receipt | {"created_at": BACKDATED})
    expected = (
        f"receipt created_at {BACKDATED} is not the time of audit event {event_id} "
        f"({receipt['created_at']}): the receipt was changed after it was issued"
    )
    # When every surface verifies it
    verdicts = four_verdicts(client, backdated, tmp_path)
    # Then every one refuses it, with the same words
    for surface in ("tool", "receipt page", "upload page"):
        assert expected in verdicts[surface], (surface, verdicts[surface])
    assert expected in verdicts["command"][0]
    assert verify_deletion_receipt(backdated, principal=SYSTEM) == [expected]
    # And offline, with the key
    code, out = offline(tmp_path, "--offline-receipt", backdated, *key_args(signer))
    assert code == 1 and f"  {expected}" in out.splitlines()
    # While the genuine receipt holds everywhere
    assert all(v == [] for v in four_verdicts(client, receipt, tmp_path).values())


@committed
def test_a_receipt_with_an_extra_field_fails_on_every_surface(client, signer, tmp_path):
    # Given a genuine receipt given an extra claim ("note"), its digest recomputed
    receipt = real_receipt()
    noted = resign(receipt | {"note": NOTE})
    expected = "receipt holds fields its format does not define: note"
    # When every surface verifies it, then every one refuses it
    verdicts = four_verdicts(client, noted, tmp_path)
    for surface in ("tool", "receipt page", "upload page"):
        assert verdicts[surface] == [expected], (surface, verdicts[surface])
    assert expected in verdicts["command"][0]
    code, out = offline(tmp_path, "--offline-receipt", noted, *key_args(signer))
    assert code == 1 and f"  {expected}" in out.splitlines()


@committed
def test_a_changed_selector_digest_fails_on_every_surface(client, signer, tmp_path):
    # Given a genuine receipt whose selector_sha256 is swapped, digest recomputed
    receipt = real_receipt()
    event_id = receipt["audit_event_id"]
    changed = resign(receipt | {"selector_sha256": sha256_text("something else entirely")})
    expected = f"audit event {event_id} payload names a different selector_sha256"
    # When every surface verifies it, then every one refuses it
    verdicts = four_verdicts(client, changed, tmp_path)
    for surface in ("tool", "receipt page", "upload page"):
        assert expected in verdicts[surface], (surface, verdicts[surface])
    assert expected in verdicts["command"][0]
    # And offline the selector is bound to the event under the signed root
    code, out = offline(tmp_path, "--offline-receipt", changed, *key_args(signer))
    assert code == 1
    assert "  log_proof event payload names a different selector_sha256" in out.splitlines()


@pytest.mark.django_db
def test_a_backdated_or_annotated_action_receipt_fails_offline(signer, tmp_path):
    # Given a made-up action receipt whose event is signed into a tree by the real key
    forged = fabricated_action_receipt()
    proof = forged["log_proof"]
    root = base64.b64decode(proof["root_hash"])
    signed = resign(
        forged | {"log_proof": proof | {"checkpoint": notes.sign_checkpoint(signer, 1, root)}}
    )
    assert offline(tmp_path, "--offline-receipt", signed, *key_args(signer))[0] == 0
    # When its created_at is changed, or a field added, and its digest recomputed
    backdated = resign(signed | {"created_at": BACKDATED})
    noted = resign(signed | {"note": NOTE})
    # Then each fails offline
    code, out = offline(tmp_path, "--offline-receipt", backdated, *key_args(signer))
    assert code == 1 and "the receipt was changed after it was issued" in out
    code, out = offline(tmp_path, "--offline-receipt", noted, *key_args(signer))
    assert code == 1 and "receipt holds fields its format does not define: note" in out


# -- item 1: the dashboard publishes the key and the commands to copy ---------------------------


@pytest.mark.django_db
def test_receipt_and_checkpoint_pages_publish_the_key_and_the_offline_commands(
    client, signer, django_user_model
):
    # Given a genuine receipt, and an admin of its tenant signed in
    receipt = real_receipt()
    login_as(client, make_operator("ada", [("acme:*:*", "admin")]))
    key = signer.verifier.text()
    # When the receipt page is shown
    page = client.get(reverse("memory:receipt", args=[receipt["audit_event_id"]]))
    html = page.content.decode()
    # Then it publishes the verifier key and the exact offline command, key included
    assert page.status_code == 200
    assert f'<code id="verifier-key">{key}</code>' in html
    assert (
        "python3 tools/verify_audit.py \\\n"
        f"  --offline-receipt deletion-receipt-{receipt['audit_event_id']}.json \\\n"
        f"  --public-key '{key}'"
    ) in html
    # And the checkpoints page publishes the same key and the bundle command
    html = client.get(reverse("audit:checkpoints")).content.decode()
    assert f'<code id="verifier-key">{key}</code>' in html
    assert (
        "python3 tools/verify_audit.py --consistency consistency-OLD-NEW.json \\\n"
        f"  --public-key '{key}'"
    ) in html


@pytest.mark.django_db
def test_pages_say_plainly_when_no_key_signs_anything(client, settings):
    # Given a server with no checkpoint key, and a genuine receipt
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = ""
    receipt = real_receipt()
    login_as(client, make_operator("ada", [("acme:*:*", "admin")]))
    # When the receipt and checkpoints pages are shown
    for url in (
        reverse("memory:receipt", args=[receipt["audit_event_id"]]),
        reverse("audit:checkpoints"),
    ):
        html = client.get(url).content.decode()
        # Then they say nothing can prove who made the evidence offline, and offer no key
        assert 'id="verifier-key-missing"' in html, url
        assert "nothing can prove who made" in html
        assert 'id="verifier-key"' not in html
