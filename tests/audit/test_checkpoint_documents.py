"""Issue 29 item 7: an edited stored checkpoint is never shown as "consistent".

The checkpoints page judged consistency from the row's columns (tree size,
root) and never looked at the stored document: editing the document in the
database left the page saying "consistent".
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from access.models import Role
from aetnaweb.access import SYSTEM
from audit import notes
from audit.canonical import canonical_json
from audit.checkpoints import checkpoint_digest, stored_document_failures
from audit.models import Checkpoint
from audit.services import create_checkpoint
from tests.actions.conftest import grant
from tests.audit.conftest import append, tamper

pytestmark = pytest.mark.django_db


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate("aetnaweb.test/audit")
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


@pytest.fixture
def three_checkpoints(signer, client, django_user_model) -> list[Checkpoint]:
    user = django_user_model.objects.create_user(username="aud", password="pw-auditor-12345")
    grant(user, "platform:*:*", Role.AUDITOR)
    client.force_login(user)
    for round_ in range(3):
        for i in range(3):
            append("acme:alice:proj", payload={"r": round_, "n": i})
        create_checkpoint(principal=SYSTEM, actor="auditor")
    return list(Checkpoint.objects.order_by("id"))


def _edit_document(checkpoint: Checkpoint, change, *, rehash: bool) -> None:
    document = json.loads(checkpoint.document)
    change(document)
    if rehash:  # the editor recomputes the document's own digest too
        document["checkpoint_sha256"] = checkpoint_digest(document)
    tamper(
        "UPDATE audit_checkpoint SET document = %s WHERE id = %s",
        [canonical_json(document), checkpoint.pk],
    )


def _pin(document: dict) -> None:
    document["subjects"]["acme:alice:proj"]["event_hash"] = "ab" * 32


def _grow(document: dict) -> None:
    document["log"]["tree_size"] += 40


@pytest.mark.parametrize(
    ("change", "rehash", "says"),
    [
        (_pin, False, "does not hash to its checkpoint_sha256"),
        (_pin, True, "is not the one it was issued with"),
        (_grow, True, "log head differs from the checkpoint's columns"),
    ],
    ids=["pinned-hash", "pinned-hash-rehashed", "log-head"],
)
def test_an_edited_stored_document_is_flagged_not_consistent(
    three_checkpoints, client, change, rehash, says
):
    # Given three checkpoints the page shows as two consistent steps
    page = client.get(reverse("audit:checkpoints")).content.decode()
    assert page.count(">consistent<") == 2
    # When the middle one's stored document is edited in the database
    middle = three_checkpoints[1]
    _edit_document(middle, change, rehash=rehash)
    # Then the page no longer calls either step through it consistent, and says why
    page = client.get(reverse("audit:checkpoints")).content.decode()
    assert ">consistent<" not in page
    assert page.count(">ALTERED<") == 2 and escape(says) in page
    assert any(
        says in reason
        for reason in stored_document_failures(middle.__class__.objects.get(pk=middle.pk))
    )


def test_an_edited_column_is_flagged_too(three_checkpoints, client):
    # When the row's root column is edited (the document is untouched)
    tamper(
        "UPDATE audit_checkpoint SET tree_size = tree_size + 1 WHERE id = %s",
        [three_checkpoints[2].pk],
    )
    page = client.get(reverse("audit:checkpoints")).content.decode()
    assert "log head differs from the checkpoint&#x27;s columns" in page
    assert page.count(">consistent<") == 1


def test_untouched_checkpoints_have_no_failures(three_checkpoints):
    assert [stored_document_failures(cp) for cp in three_checkpoints] == [[], [], []]
