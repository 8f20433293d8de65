"""The admin shows the evidence layer read-only: no add, change or delete, even for a superuser."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from audit.models import AuditDailyCount, AuditEvent, AuditSubject, Checkpoint, VerificationRun
from tests.audit.conftest import append

pytestmark = pytest.mark.django_db

MODELS = [AuditEvent, AuditSubject, AuditDailyCount, Checkpoint, VerificationRun]


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.org", "pw-root-1")


@pytest.mark.parametrize("model", MODELS)
def test_every_audit_model_is_registered_read_only(model, superuser):
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/")
    request.user = superuser
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    assert model_admin.get_actions(request) == {}


def test_a_superuser_can_look_but_not_post(client, superuser):
    event = append("acme:alice:proj")
    client.force_login(superuser)
    changelist = client.get(reverse("admin:audit_auditevent_changelist"))
    assert changelist.status_code == 200 and "acme:alice:proj" in changelist.content.decode()
    change_url = reverse("admin:audit_auditevent_change", args=[event.pk])
    assert client.get(change_url).status_code == 200
    response = client.post(change_url, {"actor": "mallory"})
    assert response.status_code == 403
    assert client.post(reverse("admin:audit_auditevent_delete", args=[event.pk])).status_code == 403
    assert AuditEvent.objects.get(pk=event.pk).actor == "system"
