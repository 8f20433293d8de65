"""GET /api/v1/audit/checkpoints/consistency: the offline consistency bundle for auditor tokens."""

from __future__ import annotations

import json

import pytest

from aetnaweb.access import SYSTEM
from audit import notes, selectors
from audit.models import Checkpoint
from audit.services import create_checkpoint
from tests.audit.conftest import append
from tests.audit.test_consistency_bundles import (
    alice_auditor_principal,
    check_offline,
    checkpoint_after,
    fork,
)

pytestmark = pytest.mark.django_db

PATH = "/audit/checkpoints/consistency"


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate("aetnaweb.test/audit")
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


@pytest.fixture
def pair(signer):
    """Two signed checkpoints pinning alice's chain only."""
    principal = alice_auditor_principal()
    return checkpoint_after(2, principal=principal), checkpoint_after(3, principal=principal)


def test_an_auditor_token_gets_the_bundle_and_the_tool_verifies_it(
    make_api,
    pair,
    signer,
    tmp_path,
):
    old, new = pair
    response = make_api("acme:alice:*", ["audit"]).get(PATH, {"old": old.pk, "new": new.pk})
    assert response.status_code == 200, response.content
    assert response.data == selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)
    code, out = check_offline(response.data, signer, tmp_path)
    assert code == 0, out
    # new defaults to the newest checkpoint the token may see
    latest = make_api("acme:alice:*", ["audit"]).get(PATH, {"old": old.pk})
    assert latest.data["new_head"]["checkpoint_id"] == new.pk


def test_a_fork_is_a_200_that_says_so(make_api, pair, signer):
    old, new = pair
    fork(old, signer)
    response = make_api("acme:alice:*", ["audit"]).get(PATH, {"old": old.pk, "new": new.pk})
    assert response.status_code == 200
    assert response.data["consistent"] is False and response.data["fork"] is True
    assert response.data["failures"][0].startswith("FORK:")


def test_capability_and_subtree_are_required(make_api, pair):
    old, new = pair
    query = {"old": old.pk, "new": new.pk}
    # No audit capability: 403
    refused = make_api("acme:alice:*", ["read"]).get(PATH, query)
    assert refused.status_code == 403 and refused.data["error"] == "capability_missing"
    # An auditor of another subtree: 404, whether or not the checkpoint exists
    elsewhere = make_api("acme:bob:*", ["audit"])
    assert elsewhere.get(PATH, query).status_code == 404
    assert elsewhere.get(PATH, {"old": 10**9}).data == elsewhere.get(PATH, query).data
    # A platform-wide checkpoint pins chains beyond alice's grant: 404 for her token
    append("acme:bob:proj")
    wide = create_checkpoint(principal=SYSTEM, actor="system")
    wide_id = Checkpoint.objects.get(checkpoint_sha256=wide["checkpoint_sha256"]).pk
    mine = make_api("acme:alice:*", ["audit"])
    assert mine.get(PATH, {"old": old.pk, "new": wide_id}).status_code == 404
    # Anonymous: 401
    assert make_api("acme:alice:*", ["audit"]).get(PATH, query, secret="").status_code == 401


@pytest.mark.parametrize(
    ("query", "error", "field"),
    [
        ({}, "missing_field", "old"),
        ({"old": "x"}, "invalid_field", "old"),
        ({"old": 0}, "invalid_field", "old"),
        ({"old": 2**63}, "invalid_field", "old"),
        ({"old": 1, "new": "1\x00"}, "invalid_field", "new"),
    ],
)
def test_bad_ids_are_400s_naming_the_field(make_api, pair, query, error, field):
    response = make_api("acme:alice:*", ["audit"]).get(PATH, query)
    assert response.status_code == 400, response.content
    assert (response.data["error"], response.data["field"]) == (error, field)


def test_pairs_no_proof_answers_are_400s_naming_the_argument(make_api, pair):
    old, new = pair
    response = make_api("acme:alice:*", ["audit"]).get(PATH, {"old": new.pk, "new": old.pk})
    assert response.status_code == 400
    assert response.data["error"] == "checkpoint_not_provable"
    assert response.data["field"] == "old"
    assert "older (smaller) one as old" in response.data["detail"]


def test_the_endpoint_is_documented_with_its_codes_and_an_example(client):
    schema = json.loads(client.get("/api/v1/openapi.json").content)
    operation = schema["paths"]["/api/v1/audit/checkpoints/consistency"]["get"]
    assert {"200", "400", "401", "403", "404", "503"} <= set(operation["responses"])
    assert "checkpoint_not_provable" in json.dumps(schema)
    bundle_schema = schema["components"]["schemas"]["ConsistencyBundleOut"]
    assert bundle_schema["examples"][0]["format"] == "aetnaweb-consistency-bundle-v1"
