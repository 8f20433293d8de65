"""Consistency bundles served (issue 14): the checkpoints page's download, the tool's check.

A bundle holds both checkpoints (signed notes, or unsigned heads), their
sizes and roots, and the RFC 9162 proof from this log; ``tools/verify_audit.py
--consistency`` checks it with no database. A fork is an answer, not an error.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit import notes, selectors
from audit.canonical import canonical_json
from audit.checkpoints import CONSISTENCY_BUNDLE_FORMAT, CheckpointError, checkpoint_digest
from audit.models import Checkpoint
from audit.services import create_checkpoint
from tests.audit.conftest import append, tool
from tests.factories import access_matrix, make_operator

pytestmark = pytest.mark.django_db

ORIGIN = "aetnaweb.test/audit"
SCOPE = "acme:alice:proj"


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate(ORIGIN)
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


def alice_auditor_principal() -> access.Principal:
    user = get_user_model().objects.filter(username="alice-auditor").first()
    user = user or make_operator("alice-auditor", [(SCOPE, "auditor")])
    return access.operator_principal(user)


def checkpoint_after(events: int, *, principal: access.Principal = SYSTEM) -> Checkpoint:
    """``events`` more events in alice's chain, then a checkpoint of them."""
    for n in range(events):
        append(SCOPE, payload={"n": n})
    document = create_checkpoint(principal=principal, actor="auditor")
    return Checkpoint.objects.get(checkpoint_sha256=document["checkpoint_sha256"])


def fork(checkpoint: Checkpoint, signer: notes.SignerKey) -> None:
    """Make ``checkpoint`` one of another history: same size, another root, signed by the log key.

    What a log that showed this auditor a different history (a split view, or
    a rewrite since) leaves behind; its digest recomputes, so only the proof
    can tell.
    """
    document = json.loads(checkpoint.document)
    size = document["log"]["tree_size"]
    other_root = b"\x07" * 32
    document["log"]["root_hash"] = base64.b64encode(other_root).decode()
    document["log"]["note"] = notes.sign_checkpoint(signer, size, other_root)
    document["checkpoint_sha256"] = checkpoint_digest(document)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        document=canonical_json(document), root_hash=document["log"]["root_hash"]
    )


def check_offline(
    bundle: dict, signer: notes.SignerKey | None, tmp_path: Path, *extra: str
) -> tuple[int, str]:
    """The standalone tool on the bundle as a file, the way an auditor runs it."""
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    argv = ["--consistency", str(path), *extra]
    if signer is not None:
        argv += ["--public-key", signer.verifier.text()]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = tool.main(argv)
    return code, out.getvalue()


# -- the bundle (selector) -----------------------------------------------------------------


def test_bundle_is_self_contained_and_verifies_offline(signer, tmp_path):
    # Given two signed checkpoints, the log grown between them
    old, new = checkpoint_after(3), checkpoint_after(5)
    # When the bundle between them is asked for
    bundle = selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)
    # Then it names both checkpoints, carries both notes and the proof
    assert bundle["format"] == CONSISTENCY_BUNDLE_FORMAT
    assert bundle["old_head"]["checkpoint_id"] == old.pk and bundle["old_head"]["tree_size"] == 3
    assert bundle["new_head"]["checkpoint_id"] == new.pk and bundle["new_head"]["tree_size"] == 8
    assert bundle["old"] == json.loads(old.document)["log"]["note"]
    assert bundle["consistent"] is True and bundle["fork"] is False and bundle["proof"]
    # And the standalone tool, with only the bundle and the public key, agrees
    code, out = check_offline(bundle, signer, tmp_path)
    assert code == 0, out
    assert out.splitlines()[0].endswith("(signatures verified)")
    # And without the key it says plainly what it did not check, and exits 3, not 0
    code, out = check_offline(bundle, None, tmp_path)
    assert code == 3 and "(signatures not checked: no --public-key given)" in out
    assert "nothing proves who made these artefacts" in out


def test_new_defaults_to_the_newest_visible_checkpoint(signer):
    old = checkpoint_after(2)
    checkpoint_after(1)
    newest = checkpoint_after(1)
    bundle = selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=None)
    assert bundle["new_head"]["checkpoint_id"] == newest.pk


def test_a_tampered_bundle_is_refused_by_the_tool(signer, tmp_path):
    old, new = checkpoint_after(3), checkpoint_after(6)
    bundle = selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)
    # An edited proof hash
    edited = dict(bundle, proof=[base64.b64encode(b"\x01" * 32).decode(), *bundle["proof"][1:]])
    code, out = check_offline(edited, signer, tmp_path)
    assert code == 1 and "the newer checkpoint does not extend the older" in out
    # A head that no longer matches its signed note
    edited = dict(bundle, new_head=dict(bundle["new_head"], tree_size=7))
    code, out = check_offline(edited, signer, tmp_path)
    assert code == 1 and "new_head names a different tree size or root than its note" in out
    # A note re-signed by someone else's key
    stranger = notes.SignerKey.generate(ORIGIN)
    forged = notes.sign_checkpoint(stranger, 9, b"\x02" * 32)
    edited = dict(bundle, new=forged, new_head=None)
    code, out = check_offline(edited, signer, tmp_path)
    assert code == 1 and "not signed by the given key" in out
    # The server's verdict inside the bundle is not what the tool trusts
    edited = dict(bundle, proof=[], consistent=True, failures=[])
    assert check_offline(edited, signer, tmp_path)[0] == 1


def test_a_forked_old_checkpoint_is_flagged_not_a_500(signer, tmp_path):
    # Given an older checkpoint whose signed root is not a prefix of this log
    old, new = checkpoint_after(4), checkpoint_after(3)
    fork(old, signer)
    # When the bundle is asked for
    bundle = selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)
    # Then it answers: not consistent, a fork, and why
    assert bundle["consistent"] is False and bundle["fork"] is True
    assert bundle["failures"][0].startswith("FORK: the newer checkpoint does not extend the older")
    # And the tool, offline, refuses the bundle too
    code, out = check_offline(bundle, signer, tmp_path)
    assert code == 1 and "the newer checkpoint does not extend the older" in out


def test_unsigned_checkpoints_give_a_bundle_the_tool_checks_as_not_signed(tmp_path):
    old, new = checkpoint_after(2), checkpoint_after(2)
    bundle = selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)
    assert bundle["old"] is None and bundle["old_head"]["signed"] is False
    code, out = check_offline(bundle, None, tmp_path)
    assert code == 3 and "(signatures not signed)" in out
    # Only an explicit --no-signature-check accepts unsigned proofs with exit 0
    code, out = check_offline(bundle, None, tmp_path, "--no-signature-check")
    assert code == 0 and "nothing proves who made these artefacts" in out
    assert "verified" not in out


def test_requests_no_proof_can_answer_are_refused_naming_the_argument(signer):
    # Given a checkpoint of an empty log and two real ones
    empty = Checkpoint.objects.get(
        checkpoint_sha256=create_checkpoint(principal=SYSTEM, actor="a")["checkpoint_sha256"]
    )
    old, new = checkpoint_after(2), checkpoint_after(2)
    with pytest.raises(CheckpointError, match="older \\(smaller\\) one as old") as refused:
        selectors.consistency_bundle(SYSTEM, old_id=new.pk, new_id=old.pk)
    assert refused.value.field == "old"
    with pytest.raises(CheckpointError, match="empty log") as refused:
        selectors.consistency_bundle(SYSTEM, old_id=empty.pk, new_id=new.pk)
    assert refused.value.field == "old"
    # A checkpoint from before the Merkle log has no head to prove anything about
    document = json.loads(old.document)
    del document["log"]
    document["checkpoint_sha256"] = checkpoint_digest(document)
    Checkpoint.objects.filter(pk=old.pk).update(document=canonical_json(document), tree_size=None)
    with pytest.raises(CheckpointError, match="predates the Merkle log") as refused:
        selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)
    assert refused.value.field == "old"
    with pytest.raises(Checkpoint.DoesNotExist):
        selectors.consistency_bundle(SYSTEM, old_id=10**9, new_id=new.pk)


def test_the_command_prints_the_same_bundle(signer, capsys):
    from django.core.management import call_command

    old, new = checkpoint_after(2), checkpoint_after(3)
    call_command("audit", "prove-consistency", str(old.pk), str(new.pk), "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed == selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)


# -- the checkpoints page -------------------------------------------------------------------


@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_page_download_permissions(client, case, signer, django_assert_max_num_queries):
    principal = alice_auditor_principal()
    old, new = checkpoint_after(2, principal=principal), checkpoint_after(3, principal=principal)
    case.sign_in(client)
    url = reverse("audit:checkpoint_consistency") + f"?old={old.pk}&new={new.pk}"
    with django_assert_max_num_queries(14):
        response = client.get(url)
    case.check(response)
    if case.allowed:
        assert response["Content-Disposition"] == (
            f'attachment; filename="consistency-{old.pk}-{new.pk}.json"'
        )
        bundle = json.loads(response.content)
        assert bundle == selectors.consistency_bundle(SYSTEM, old_id=old.pk, new_id=new.pk)


def test_page_links_each_row_to_its_bundle_and_the_download_round_trips(client, signer, tmp_path):
    principal = alice_auditor_principal()
    old, new = checkpoint_after(2, principal=principal), checkpoint_after(3, principal=principal)
    client.force_login(get_user_model().objects.get(username="alice-auditor"))
    page = client.get(reverse("audit:checkpoints")).content.decode()
    href = f"{reverse('audit:checkpoint_consistency')}?old={old.pk}&amp;new={new.pk}"
    assert href in page
    response = client.get(href.replace("&amp;", "&"))
    code, out = check_offline(json.loads(response.content), signer, tmp_path)
    assert code == 0, out


def test_page_flags_a_fork_in_the_download(client, signer, tmp_path):
    principal = alice_auditor_principal()
    old, new = checkpoint_after(4, principal=principal), checkpoint_after(1, principal=principal)
    fork(old, signer)
    client.force_login(get_user_model().objects.get(username="alice-auditor"))
    assert "FORK" in client.get(reverse("audit:checkpoints")).content.decode()
    response = client.get(reverse("audit:checkpoint_consistency"), {"old": old.pk, "new": new.pk})
    assert response.status_code == 200
    assert json.loads(response.content)["fork"] is True
    assert check_offline(json.loads(response.content), signer, tmp_path)[0] == 1


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({}, "old"),
        ({"old": "x"}, "old"),
        ({"old": "0"}, "old"),
        ({"old": "\u0661"}, "old"),  # an Arabic-Indic digit: isdigit() but not an ID
        ({"old": str(2**63)}, "old"),
        ({"old": "1", "new": "1\x00"}, "new"),
    ],
)
def test_page_refuses_a_bad_id_in_plain_text(client, query, field):
    principal = alice_auditor_principal()
    checkpoint_after(1, principal=principal)
    client.force_login(get_user_model().objects.get(username="alice-auditor"))
    response = client.get(reverse("audit:checkpoint_consistency"), query)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith(f"{field}: ")
