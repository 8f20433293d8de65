"""tools/verify_audit.py and audit/* agree on shared vectors (issue 34 item 7).

The tool re-implements the evidence rules on purpose (it imports nothing from
the project, so an auditor can trust none of it). These vectors are computed
by both sides and must agree: canonical JSON and receipt digests, event
hashes, RFC 6962 leaf and node hashes (pinned to the RFC's own test vectors,
so the two cannot drift together), inclusion and consistency proofs, and the
checkpoint note's signed text and key ID.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.db import transaction

from audit import merkle, notes
from audit.canonical import canonical_json, digest
from audit.chain import compute_event_hash
from audit.receipts import build_deletion_receipt
from audit.services import append_event
from tests.audit.conftest import tool

# RFC 6962's reference leaves (certificate-transparency test data) and the
# roots of their first n leaves, as published with them.
RFC_LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
RFC_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

JSON_VECTORS = [
    {},
    {"b": 1, "a": [True, False, None], "c": {"z": "", "y": -0.5}},
    {"unicode": "Zoë Ångström \u2014 東京 \U0001f600", "control": '\x00\x1f\n\t"\\'},
    {"numbers": [0, -1, 1.5, 10**15, 1e-7, 123456789.125]},
    ["nested", [["deep"]], {"k": [{"v": 1}]}],
    "plain text",
]


@pytest.mark.parametrize("value", JSON_VECTORS, ids=range(len(JSON_VECTORS)))
def test_canonical_json_and_digest_agree(value):
    assert tool.canonical_json(value) == canonical_json(value)
    assert tool.digest(value) == digest(value)


def test_leaf_and_node_hashes_agree_and_match_rfc_6962():
    leaves_app = [merkle.leaf_hash(data) for data in RFC_LEAVES]
    assert leaves_app == [tool.leaf_hash(data) for data in RFC_LEAVES]
    assert merkle.node_hash(leaves_app[0], leaves_app[1]) == tool.node_hash(
        leaves_app[0], leaves_app[1]
    )
    for size, root in RFC_ROOTS.items():
        assert merkle.root_of_leaves(leaves_app[:size]).hex() == root
    event_hash = "ab" * 32
    assert merkle.event_leaf_hash(event_hash) == tool.event_leaf_hash(event_hash)
    assert tool.LEAF_DATA_PREFIX == merkle.LEAF_DATA_PREFIX


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8])
def test_inclusion_and_consistency_proofs_made_by_the_app_verify_in_the_tool(size):
    leaves = [merkle.leaf_hash(bytes([n])) for n in range(size)]
    root = merkle.root_of_leaves(leaves)

    def hashes(ranges):
        return [merkle.root_of_leaves(leaves[start:end]) for start, end in ranges]

    for index in range(size):
        proof = hashes(merkle.inclusion_ranges(index, size))
        tool.verify_inclusion(index, size, leaves[index], proof, root)
        with pytest.raises(tool.ProofError):
            tool.verify_inclusion(index, size, merkle.leaf_hash(b"other"), proof, root)
    for old in range(1, size + 1):
        proof = hashes(merkle.consistency_ranges(old, size))
        tool.verify_consistency(old, size, merkle.root_of_leaves(leaves[:old]), root, proof)


def test_event_hashes_agree():
    fields = {
        "event_id": "evt_1",
        "subject_id": "acme:alice:proj",
        "event_type": "memory.forget",
        "created_at": "2026-05-01T09:00:00.000000Z",
        "actor": "alice",
        "session_id": None,
        "turn_id": "t-1",
        "record_id": None,
        "payload": {"purged_record_ids": ["mem_1"], "note": "Zoë"},
        "prev_hash": "cd" * 32,
    }
    expected = compute_event_hash(**fields)
    # The tool reads a row as stored: the payload is JSON text
    row = [json.dumps(fields[k]) if k == "payload" else fields[k] for k in tool.PREIMAGE_KEYS]
    assert tool.verify_event_hash(row) == expected


def test_checkpoint_signing_payload_and_key_id_agree():
    signer = notes.SignerKey.generate("aetnaweb.test/audit")
    root = merkle.root_of_leaves([merkle.leaf_hash(b"x")])
    note = notes.sign_checkpoint(signer, 1, root)
    origin, size, parsed_root, signed, signatures = tool.parse_note(note)
    # The text the signature covers is the app's checkpoint body, byte for byte
    assert signed == notes.checkpoint_body(signer.name, 1, root)
    assert (origin, size, parsed_root) == (signer.name, 1, root)
    # The key ID in the signature line and in the verifier key is the app's
    name, public = tool.parse_verifier_key(signer.verifier.text())
    assert signatures[0][1] == notes.key_id(name, public) == signer.verifier.key_id
    assert tool.note_signature_verdict(note, (name, public)) == "verified"
    assert base64.b64decode(signer.verifier.text().split("+", 2)[2])[1:] == public


@pytest.mark.django_db
def test_a_receipt_digest_made_by_the_app_recomputes_in_the_tool():
    with transaction.atomic():
        event = append_event(
            subject="acme:alice:proj",
            event_type="memory.forget",
            actor="alice",
            payload={
                "selector_sha256": "0" * 64,
                "purged_record_ids": ["mem_1"],
                "purged_episode_ids": [],
            },
        )
        receipt = build_deletion_receipt(
            event=event,
            selector_sha256="0" * 64,
            purged_record_ids=["mem_1"],
            purged_episode_ids=[],
        )
    claimed = receipt.pop("receipt_sha256")
    assert tool.digest(receipt) == claimed == digest(receipt)


def test_a_certificate_listing_a_receipt_without_a_digest_fails_instead_of_crashing():
    # A receipt entry without receipt_sha256 beside one with it: sorting None
    # with text raised TypeError; now it is simply not the committed set.
    certificate = {
        "closing_proof": {"event": {"payload": {"receipt_sha256s": ["a" * 64]}}},
        "receipts": [{"receipt_sha256": "a" * 64}, {}],
    }
    failures = tool._closing_failures(certificate, None, "certificate", lambda event: [])
    assert any("not the set its closing event commits" in reason for reason in failures)
