"""Properties: whatever the content, it never reaches the audit table (C-5)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actions import services
from aetnaweb.access import SYSTEM
from tests.actions.conftest import SCOPE, audit_dump, stage_and_approve, write_op

# A marker no structural text contains, then anything: a leak would show the marker
# (raw, or escaped as canonical JSON escapes it).
# Text a file and a database can hold: no lone surrogates (not UTF-8), no NUL (PostgreSQL).
storable = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
content = st.text(storable, min_size=1, max_size=200).map(lambda text: "\u00absecret\u00bb" + text)


@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=content, after=content, reason=content)
def test_no_content_before_image_or_reason_in_the_audit_table(
    actions_root, approval_key, approver_principal, before, after, reason
):
    # Given a file holding some content and a plan to replace it
    target = actions_root / "file.txt"
    target.write_text(before)
    txn_id = stage_and_approve([write_op("file.txt", after)], approver_principal)
    # When it is committed, and another such plan is denied with a reason
    services.commit(transaction_id=txn_id, principal=approver_principal)
    other = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("file.txt", before)]
    ).transaction_id
    services.deny(transaction_id=other, reason=reason, principal=approver_principal)
    # Then neither content, nor the before-image (plain or base64), nor the reason is audited
    dump = audit_dump()
    for secret in (before, after, reason.strip()):
        assert secret not in dump
        assert json.dumps(secret)[1:-1] not in dump
    assert base64.b64encode(before.encode()).decode()[:16] not in dump
