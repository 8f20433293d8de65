"""The memory admin is for looking only: no add, change or delete."""

from __future__ import annotations

import pytest
from django.urls import reverse

from aetnaweb.access import SYSTEM
from memory import services
from tests.factories import login_as, make_operator


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model", ["record", "episode", "retrievalevent", "deletionreceipt", "scopestats"]
)
def test_memory_admin_is_read_only(client, model):
    services.remember(principal=SYSTEM, scope="acme:alice:*", text="My car is red.")
    login_as(client, make_operator("root", is_superuser=True))
    assert client.get(reverse(f"admin:memory_{model}_changelist")).status_code == 200
    assert client.get(reverse(f"admin:memory_{model}_add")).status_code == 403
