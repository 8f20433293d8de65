"""Signed checkpoints, receipts with inclusion proofs, consistency and the witness (issue 14)."""

from __future__ import annotations

import base64
import json
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from aetnaweb.access import SYSTEM
from audit import notes, tree
from audit.canonical import canonical_json, digest
from audit.checkpoints import LogHead, prove_consistency, verify_checkpoints
from audit.models import Checkpoint
from audit.receipts import build_deletion_receipt, verify_deletion_receipt
from audit.services import append_event, create_checkpoint
from audit.witness import WitnessError, witness_cosign
from tests.audit.conftest import append, tamper, tool

pytestmark = pytest.mark.django_db

ORIGIN = "aetnaweb.test/audit"


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate(ORIGIN)
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


def forget(subject="acme:alice:proj"):
    with transaction.atomic():
        event = append_event(
            subject=subject,
            event_type="memory.forget",
            actor="alice",
            payload={
                "selector_sha256": "0" * 64,
                "purged_record_ids": ["rec_1"],
                "purged_episode_ids": [],
            },
        )
        return build_deletion_receipt(
            event=event,
            selector_sha256="0" * 64,
            purged_record_ids=["rec_1"],
            purged_episode_ids=[],
        )


# -- signed notes ------------------------------------------------------------------------


def test_keys_round_trip_and_notes_verify(signer):
    assert notes.SignerKey.parse(signer.text()) == signer
    verifier = notes.VerifierKey.parse(signer.verifier.text())
    text = notes.sign_checkpoint(signer, 7, b"\x01" * 32)
    lines = text.split("\n")
    assert lines[:3] == [ORIGIN, "7", base64.b64encode(b"\x01" * 32).decode()]
    assert lines[3] == "" and lines[4].startswith("\u2014 " + ORIGIN + " ")
    note = notes.parse_checkpoint(text)
    assert note.signed_by(verifier)
    # Another key, or one changed byte of the body, does not verify
    assert not note.signed_by(notes.SignerKey.generate(ORIGIN).verifier)
    forged = notes.parse_checkpoint(text.replace("\n7\n", "\n8\n"))
    assert not forged.signed_by(verifier)


@pytest.mark.parametrize(
    "text",
    [
        "origin\n7\n" + "A" * 44 + "\n",  # no signature block
        "origin\n07\n" + base64.b64encode(b"x" * 32).decode() + "\n\n\u2014 o AAAAAAA=\n",
        "origin\n-1\n" + base64.b64encode(b"x" * 32).decode() + "\n\n\u2014 o AAAAAAA=\n",
        "origin\n7\nnot base64!\n\n\u2014 o AAAAAAA=\n",
        "origin\n7\n" + base64.b64encode(b"x" * 31).decode() + "\n\n\u2014 o AAAAAAA=\n",
        "origin\x00\n7\n" + base64.b64encode(b"x" * 32).decode() + "\n\n\u2014 o AAAAAAA=\n",
        "origin\n7\n" + base64.b64encode(b"x" * 32).decode() + "\n\n- o AAAAAAA=\n",
        "\ud800\n7\n",
    ],
)
def test_malformed_notes_are_refused(text):
    with pytest.raises(notes.NoteError):
        notes.parse_checkpoint(text)


def test_a_bad_key_file_is_a_clear_error(tmp_path, settings):
    path = tmp_path / "bad_key"
    path.write_text("PRIVATE+KEY+x+00000000+AAAA\n")
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    with pytest.raises(notes.NoteError, match="Ed25519"):
        notes.configured_signer()
    with pytest.raises(notes.NoteError, match="never overwritten"):
        notes.write_private_key(path, notes.SignerKey.generate("x"))


# -- signed checkpoints ---------------------------------------------------------------------


def test_checkpoints_carry_a_signed_log_head(signer, checkpoint_sink):
    for i in range(5):
        append("acme:alice:proj", payload={"n": i})
    document = create_checkpoint(principal=SYSTEM, actor="auditor")
    log = document["log"]
    assert log["tree_size"] == 5
    assert base64.b64decode(log["root_hash"]) == tree.root_at(5)
    assert log["verifier_key"] == signer.verifier.text()
    assert notes.parse_checkpoint(log["note"]).signed_by(signer.verifier)
    [result] = verify_checkpoints(checkpoint_sink.read_text().splitlines(), principal=SYSTEM)
    assert result.ok and result.signature == "verified" and result.tree_size == 5


def test_a_checkpoint_signed_by_another_key_fails(signer, checkpoint_sink, tmp_path, settings):
    append("acme:alice:proj")
    create_checkpoint(principal=SYSTEM, actor="auditor")
    other = tmp_path / "other_key"
    notes.write_private_key(other, notes.SignerKey.generate(ORIGIN))
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(other)
    [result] = verify_checkpoints(checkpoint_sink.read_text().splitlines(), principal=SYSTEM)
    assert result.signature == "invalid"
    assert result.failures == ["log note is not signed by this server's checkpoint key"]


def test_old_unsigned_checkpoints_still_verify(checkpoint_sink):
    # Given a v1 document as issued before the log existed (no "log" key)
    append("acme:alice:proj")
    document = create_checkpoint(principal=SYSTEM, actor="auditor")
    old = {k: v for k, v in document.items() if k not in {"log", "checkpoint_sha256"}}
    old["checkpoint_sha256"] = digest(old)
    [result] = verify_checkpoints([canonical_json(old)], principal=SYSTEM)
    assert result.ok and result.signature == "not signed" and result.tree_size is None
    # And an unsigned head (no key configured) verifies, reported as not signed
    [result] = verify_checkpoints(checkpoint_sink.read_text().splitlines(), principal=SYSTEM)
    assert result.ok and result.signature == "not signed" and result.tree_size == 1


# -- receipts with proofs, verified offline ----------------------------------------------------


def test_a_receipt_verifies_offline_with_the_public_key_only(signer):
    append("acme:alice:proj")
    receipt = forget()
    append("acme:bob:proj")  # the log grows after the receipt
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
    # Then the standalone tool, with the receipt and the key only, says it holds
    key = tool.parse_verifier_key(signer.verifier.text())
    failures, verdict = tool.verify_receipt_offline(json.loads(json.dumps(receipt)), key)
    assert failures == [] and verdict == "verified"
    # Without a key it still checks the proof and says plainly what it did not check
    assert tool.verify_receipt_offline(receipt, None) == ([], "not checked: no --public-key given")


def test_an_offline_receipt_with_a_forged_part_fails(signer):
    receipt = forget()
    key = tool.parse_verifier_key(signer.verifier.text())

    def resign(value):
        value = {k: v for k, v in value.items() if k != "receipt_sha256"}
        value["receipt_sha256"] = digest(value)
        return value

    proof = receipt["log_proof"]
    wrong_ids = resign(receipt | {"purged_record_ids": ["rec_2"]})
    assert tool.verify_receipt_offline(wrong_ids, key)[0] == [
        "log_proof event payload lists different purged record IDs"
    ]
    event = proof["event"] | {"actor": "mallory"}
    edited = resign(receipt | {"log_proof": proof | {"event": event}})
    assert tool.verify_receipt_offline(edited, key)[0][0] == (
        "log_proof event does not recompute to the receipt's audit_event_hash"
    )
    other_root = base64.b64encode(b"\x00" * 32).decode()
    moved = resign(receipt | {"log_proof": proof | {"root_hash": other_root}})
    failures = tool.verify_receipt_offline(moved, key)[0]
    assert "log_proof checkpoint names a different tree size or root" in failures
    stranger = tool.parse_verifier_key(notes.SignerKey.generate(ORIGIN).verifier.text())
    assert tool.verify_receipt_offline(receipt, stranger) == (
        ["log_proof checkpoint is not signed by the given key"],
        "invalid",
    )


def test_the_tool_says_when_it_cannot_check_a_signature(signer, monkeypatch):
    receipt = forget()
    key = tool.parse_verifier_key(signer.verifier.text())
    monkeypatch.setitem(sys.modules, "cryptography", None)
    monkeypatch.setitem(sys.modules, "cryptography.exceptions", None)
    # When the tool cannot check the signature (no cryptography package) but was given a key
    failures, verdict = tool.verify_receipt_offline(receipt, key)
    # Then that is a failure, never a pass, and it says why
    assert verdict == "not checked: the 'cryptography' package is not installed"
    assert failures == [
        "log_proof checkpoint signature cannot be checked (the 'cryptography' package is not "
        "installed): nothing proves the key signed it"
    ]


# -- consistency and forks ---------------------------------------------------------------------


def test_prove_consistency_between_two_checkpoints(signer, capsys):
    for i in range(3):
        append("acme:alice:proj", payload={"n": i})
    create_checkpoint(principal=SYSTEM, actor="auditor")
    for i in range(6):
        append("acme:bob:proj", payload={"n": i})
    create_checkpoint(principal=SYSTEM, actor="auditor")
    old_row, new_row = Checkpoint.objects.order_by("id")
    verdict = prove_consistency(LogHead.parse(old_row.document), LogHead.parse(new_row.document))
    assert verdict.ok and verdict.signatures == {"old": "verified", "new": "verified"}
    # The command prints the offline bundle, which the standalone tool accepts
    call_command("audit", "prove-consistency", str(old_row.pk), str(new_row.pk), "--json")
    bundle = json.loads(capsys.readouterr().out)
    key = tool.parse_verifier_key(signer.verifier.text())
    assert tool.verify_consistency_bundle(bundle, key) == ([], "verified")
    bundle["proof"][0] = base64.b64encode(b"\x00" * 32).decode()
    assert tool.verify_consistency_bundle(bundle, key)[0][0].startswith(
        "the newer checkpoint does not extend the older"
    )


def test_a_rewritten_log_is_flagged_as_a_fork(signer):
    # Given a signed checkpoint, then a rewrite of the stored tree under it
    for i in range(4):
        append("acme:alice:proj", payload={"n": i})
    create_checkpoint(principal=SYSTEM, actor="auditor")
    old = LogHead.parse(Checkpoint.objects.get().document)
    tamper("UPDATE audit_tree_leaf SET leaf_hash = %s WHERE leaf_index = 1", ["ab" * 32])
    tamper("DELETE FROM audit_tree_node")
    with transaction.atomic():
        tree.lock_tree()
        # a forger rebuilds the nodes so the log answers proofs again
        from audit import merkle

        leaves = [bytes.fromhex(h) for h in tree_leaf_hashes()]
        frontier: list[bytes] = []
        for size, leaf in enumerate(leaves):
            frontier, done = merkle.append_to_frontier(frontier, size, leaf)
            for level, position, value in done[1:]:
                tamper(
                    "INSERT INTO audit_tree_node (node_id, hash) VALUES (%s, %s)",
                    [tree.node_id(level, position), value.hex()],
                )
    for i in range(3):
        append("acme:alice:proj", payload={"m": i})
    create_checkpoint(principal=SYSTEM, actor="auditor")
    new = LogHead.parse(Checkpoint.objects.order_by("-id").first().document)
    verdict = prove_consistency(old, new)
    assert not verdict.ok and verdict.failures[0].startswith("FORK:")
    with pytest.raises(CommandError, match="FORK"):
        call_command(
            "audit",
            "prove-consistency",
            str(Checkpoint.objects.order_by("id")[0].pk),
            str(Checkpoint.objects.order_by("-id")[0].pk),
        )
    # And the stored tree no longer matches audit_log
    assert tree.verify_log()


def tree_leaf_hashes() -> list[str]:
    from audit.models import AuditTreeLeaf

    return list(AuditTreeLeaf.objects.order_by("leaf_index").values_list("leaf_hash", flat=True))


# -- the witness ------------------------------------------------------------------------------


def test_witness_cosigns_growth_and_refuses_forks_and_rollbacks(signer, tmp_path):
    witness = notes.SignerKey.generate("witness.example/w1")
    state = tmp_path / "witness-state.json"
    append("acme:alice:proj")
    tree.integrate()
    first = notes.sign_checkpoint(signer, 1, tree.root_at(1))
    cosigned = witness_cosign(first, witness_key=witness, log_key=signer.verifier, state_path=state)
    note = notes.parse_checkpoint(cosigned)
    assert note.signed_by(signer.verifier) and note.signed_by(witness.verifier)
    for _ in range(4):
        append("acme:alice:proj")
    tree.integrate()
    grown = notes.sign_checkpoint(signer, 5, tree.root_at(5))
    witness_cosign(grown, witness_key=witness, log_key=signer.verifier, state_path=state)
    assert json.loads(state.read_text())["size"] == 5
    saved = state.read_text()
    # A fork: same log key, a root that does not extend the cosigned one
    append("acme:alice:proj")
    tree.integrate()
    fork = notes.sign_checkpoint(signer, 6, b"\x07" * 32)
    with pytest.raises(WitnessError, match="FORK"):
        witness_cosign(fork, witness_key=witness, log_key=signer.verifier, state_path=state)
    with pytest.raises(WitnessError, match="rollback"):
        witness_cosign(first, witness_key=witness, log_key=signer.verifier, state_path=state)
    stranger = notes.SignerKey.generate(ORIGIN)
    with pytest.raises(WitnessError, match="not signed by the log's key"):
        witness_cosign(
            notes.sign_checkpoint(stranger, 6, tree.root_at(6)),
            witness_key=witness,
            log_key=signer.verifier,
            state_path=state,
        )
    # Then a refusal never moves the witness's state
    assert state.read_text() == saved


def test_witness_command(signer, tmp_path, capsys):
    append("acme:alice:proj")
    tree.integrate()
    witness_path = tmp_path / "witness_key"
    call_command("audit", "keygen", "witness.example/w1", "--out", str(witness_path))
    witness_vkey = capsys.readouterr().out.strip()
    note_path = tmp_path / "note"
    note_path.write_text(notes.sign_checkpoint(signer, 1, tree.root_at(1)))
    call_command(
        "audit",
        "witness",
        str(note_path),
        "--key",
        str(witness_path),
        "--state",
        str(tmp_path / "state.json"),
        "--log-key",
        signer.verifier.text(),
    )
    cosigned = notes.parse_checkpoint(capsys.readouterr().out)
    assert cosigned.signed_by(notes.VerifierKey.parse(witness_vkey))
    call_command("audit", "public-key")
    assert capsys.readouterr().out.strip() == signer.verifier.text()


# -- the checkpoints page ----------------------------------------------------------------------


def test_checkpoints_page_shows_consistency_and_flags_a_fork(
    signer, client, django_user_model, django_assert_max_num_queries
):
    from django.urls import reverse

    from access.models import Role
    from tests.actions.conftest import grant

    user = django_user_model.objects.create_user(username="aud", password="pw-auditor-12345")
    grant(user, "platform:*:*", Role.AUDITOR)
    client.force_login(user)
    for round_ in range(3):
        for i in range(3):
            append("acme:alice:proj", payload={"r": round_, "n": i})
        create_checkpoint(principal=SYSTEM, actor="auditor")
    with django_assert_max_num_queries(12):
        page = client.get(reverse("audit:checkpoints")).content.decode()
    assert page.count(">consistent<") == 2 and "FORK" not in page
    assert "9 leaves, signed" in page
    # When a stored node under the older heads is rewritten, the page flags the fork
    tamper(
        "UPDATE audit_tree_node SET hash = %s WHERE node_id = %s", ["ab" * 32, tree.node_id(1, 0)]
    )
    page = client.get(reverse("audit:checkpoints")).content.decode()
    assert "FORK" in page


def test_demo_creates_a_checkpoint_key_once(tmp_path, settings):
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = ""
    first = notes.ensure_demo_key(tmp_path)
    key_file = tmp_path / "checkpoint_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert notes.ensure_demo_key(tmp_path) == first  # reused, never overwritten
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(key_file)
    assert notes.ensure_demo_key(tmp_path).startswith("checkpoints are signed by ")


def test_upload_shows_the_log_verdict_and_a_truncation(signer, client, django_user_model):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from access.models import Role
    from tests.actions.conftest import grant

    user = django_user_model.objects.create_user(username="aud", password="pw-auditor-12345")
    grant(user, "platform:*:*", Role.AUDITOR)
    client.force_login(user)
    events = [append("acme:alice:proj", payload={"n": i}) for i in range(3)]
    line = canonical_json(create_checkpoint(principal=SYSTEM, actor="auditor"))

    def upload() -> str:
        response = client.post(
            reverse("audit:evidence_verify"),
            {"evidence": SimpleUploadedFile("c.jsonl", line.encode())},
        )
        return response.content.decode()

    assert "Merkle log: 3 leaves, signature verified." in upload()
    tamper("DELETE FROM audit_log WHERE sequence = %s", [events[-1].sequence])
    assert "the log was truncated" in upload()
