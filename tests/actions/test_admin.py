"""The actions admin only looks, and never shows payload content."""

from __future__ import annotations

import pytest

from actions import services
from actions.models import ActionPayload
from aetnaweb.access import SYSTEM
from tests.actions.conftest import SCOPE, write_op


@pytest.mark.django_db
def test_admin_is_read_only_and_hides_payload_content(actions_root, admin_client):
    services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "very private words")]
    )
    payload = ActionPayload.objects.get()
    page = admin_client.get(f"/admin/actions/actionpayload/{payload.pk}/change/")
    assert page.status_code == 200
    assert b"very private words" not in page.content
    assert admin_client.get("/admin/actions/actiontransaction/add/").status_code == 403
    listing = admin_client.get("/admin/actions/actiontransaction/")
    assert listing.status_code == 200 and b"awaiting" in listing.content
