"""The webhook pages: permission matrix, the secret shown once, test and retry buttons, CSRF."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from aetnaweb.access import SYSTEM, Role
from audit.models import AuditEvent
from tests.factories import login_as, make_operator
from tests.webhooks.conftest import register
from webhooks import services
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db

HOOK = "https://93.184.215.14/hook"


@pytest.fixture
def alice_hook():
    endpoint, _ = register(HOOK, scope="acme:alice:*")
    return endpoint


def test_anonymous_is_sent_to_login(client, alice_hook):
    for url in (reverse("webhooks:list"), reverse("webhooks:detail", args=[alice_hook.id])):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize(
    ("grants", "sees"),
    [
        ([], False),  # no grant
        ([("acme:alice:*", Role.VIEWER)], False),  # a grant, but not admin
        ([("acme:bob:*", Role.ADMIN)], False),  # a sibling's admin
        ([("acme:alice:*", Role.ADMIN)], True),  # the right admin grant
        ([("acme:*:*", Role.ADMIN)], True),  # an admin above it
    ],
)
def test_permission_matrix(client, alice_hook, grants, sees, django_assert_max_num_queries):
    login_as(client, make_operator("op", grants))
    with django_assert_max_num_queries(8):
        listing = client.get(reverse("webhooks:list"))
    assert listing.status_code == 200
    assert (alice_hook.id in listing.content.decode()) is sees
    with django_assert_max_num_queries(8):
        detail = client.get(reverse("webhooks:detail", args=[alice_hook.id]))
    assert detail.status_code == (200 if sees else 404)
    # Writes on an endpoint out of reach are 404 and write nothing
    for name in ("test", "rotate", "delete"):
        response = client.post(reverse(f"webhooks:{name}", args=[alice_hook.id]))
        assert response.status_code == (404 if not sees else response.status_code)
    if not sees:
        assert not WebhookDelivery.objects.exists()
        assert WebhookEndpoint.objects.filter(pk=alice_hook.id).exists()


def test_registering_shows_the_secret_once(client):
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    response = client.post(
        reverse("webhooks:list"),
        {"url": HOOK, "scope": "acme:alice:*", "events": ["memory.record_quarantined"]},
    )
    assert response.status_code == 201
    html = response.content.decode()
    endpoint = WebhookEndpoint.objects.get()
    secret = services.signing.endpoint_secret(endpoint.id, endpoint.secret_salt)
    assert secret in html and "shown only this once" in html and "data-copy" in html
    assert response["Cache-Control"].startswith("max-age=0")
    # The endpoint's own page never shows it again
    detail = client.get(reverse("webhooks:detail", args=[endpoint.id])).content.decode()
    assert secret not in detail


def test_a_refused_registration_is_a_form_error_and_writes_nothing(client):
    login_as(client, make_operator("al", [("acme:alice:*", Role.ADMIN)]))
    before = AuditEvent.objects.count()
    for body, message in (
        ({"url": "https://10.0.0.1/", "scope": "acme:alice:*"}, "not a public address"),
        ({"url": HOOK, "scope": "acme:*:*"}, "do not hold the admin role"),
        ({"url": HOOK, "scope": "acme:alice"}, "three segments"),
    ):
        response = client.post(reverse("webhooks:list"), body | {"events": ["action.proposed"]})
        assert response.status_code == 400
        assert message in response.content.decode()
    assert not WebhookEndpoint.objects.exists() and AuditEvent.objects.count() == before


def test_forms_need_the_csrf_token(alice_hook):
    client = Client(enforce_csrf_checks=True)
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    response = client.post(reverse("webhooks:test", args=[alice_hook.id]))
    assert response.status_code == 403
    assert not WebhookDelivery.objects.exists()


def test_send_test_event_and_retry_now_from_the_page(client, alice_hook):
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    response = client.post(reverse("webhooks:test", args=[alice_hook.id]))
    assert response.status_code == 302
    delivery = WebhookDelivery.objects.get()
    assert delivery.event_type == "webhook.test" and delivery.status == "pending"
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status="failed", attempts=3, last_status_code=500, last_error="HTTP 500"
    )
    page = client.get(reverse("webhooks:detail", args=[alice_hook.id])).content.decode()
    assert "failed" in page and "HTTP 500" in page and "Retry now" in page
    response = client.post(reverse("webhooks:retry", args=[delivery.id]))
    assert response.status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.next_attempt_at is not None


def test_edit_and_delete_from_the_page(client, alice_hook):
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    response = client.post(
        reverse("webhooks:detail", args=[alice_hook.id]),
        {"url": HOOK + "2", "events": ["action.transaction_uncertain"], "active": ""},
    )
    assert response.status_code == 302
    alice_hook.refresh_from_db()
    assert alice_hook.url == HOOK + "2" and not alice_hook.active
    confirm = client.get(reverse("webhooks:delete", args=[alice_hook.id]))
    assert "Delete this endpoint?" in confirm.content.decode()
    client.post(reverse("webhooks:delete", args=[alice_hook.id]))
    assert not WebhookEndpoint.objects.exists()


def test_the_url_is_escaped_on_the_page(client):
    endpoint, _ = register('https://93.184.215.14/"><script>alert(1)</script>', scope="acme:*:*")
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    html = client.get(reverse("webhooks:detail", args=[endpoint.id])).content.decode()
    assert "<script>alert(1)</script>" not in html


def test_the_nav_shows_webhooks_to_admins_only(client):
    login_as(client, make_operator("vic", [("acme:*:*", Role.VIEWER)]))
    assert reverse("webhooks:list") not in client.get("/").content.decode()
    client.logout()
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    assert reverse("webhooks:list") in client.get("/").content.decode()


def test_system_registered_endpoint_in_the_platform_listing(client):
    register(HOOK, scope="zeta:*:*", principal=SYSTEM)
    login_as(client, make_operator("root", [("platform:*:*", Role.ADMIN)]))
    assert "zeta:*:*" in client.get(reverse("webhooks:list")).content.decode()


def test_an_admin_picks_memory_changes_on_the_forms(client):
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    # The registration form offers them in their own group, none ticked
    page = client.get(reverse("webhooks:list")).content.decode()
    assert "Memory changes (IDs and digests, never content)" in page
    assert 'value="memory.record_forgotten"' in page and "checked" not in page
    assert "if you choose them, when memory changes" in page
    # Registering with one of them keeps exactly what was chosen
    response = client.post(
        reverse("webhooks:list"),
        {"url": HOOK, "scope": "acme:alice:*", "events": ["memory.record_created"]},
    )
    assert response.status_code == 201
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.events == ["memory.record_created"]
    # And the edit form changes the choice
    response = client.post(
        reverse("webhooks:detail", args=[endpoint.id]),
        {
            "url": HOOK,
            "events": ["memory.record_expired", "memory.record_quarantined"],
            "active": "on",
        },
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.events == ["memory.record_expired", "memory.record_quarantined"]
    edit = client.get(reverse("webhooks:detail", args=[endpoint.id])).content.decode()
    ticked = re.findall(r'<input type="checkbox" name="events" value="([^"]+)"[^>]*checked', edit)
    assert sorted(ticked) == ["memory.record_expired", "memory.record_quarantined"]
    # An unknown event name is a form error and changes nothing
    response = client.post(
        reverse("webhooks:detail", args=[endpoint.id]),
        {"url": HOOK, "events": ["memory.record_read"], "active": "on"},
    )
    assert response.status_code == 400
    endpoint.refresh_from_db()
    assert endpoint.events == ["memory.record_expired", "memory.record_quarantined"]


def test_deliveries_filter_by_status(client, alice_hook, django_assert_max_num_queries):
    # Given two test deliveries, one since failed
    login_as(client, make_operator("ada", [("acme:*:*", Role.ADMIN)]))
    for _ in range(2):
        client.post(reverse("webhooks:test", args=[alice_hook.id]))
    failed, pending = WebhookDelivery.objects.order_by("created_at", "id")
    WebhookDelivery.objects.filter(pk=failed.pk).update(status="failed", last_error="HTTP 500")
    url = reverse("webhooks:detail", args=[alice_hook.id])
    client.get(url)  # shows (and so clears) the "test event queued" messages naming both
    # When the admin shows only failed deliveries, then only that one is listed
    with django_assert_max_num_queries(8):
        page = client.get(url, {"status": "failed"}).content.decode()
    assert failed.id in page and pending.id not in page
    assert '<a href="?status=failed" aria-current="page">Failed</a>' in page
    # And "All" lists both
    page = client.get(url).content.decode()
    assert failed.id in page and pending.id in page
    # And an unknown status is a 400 that says which exist, listing everything (nothing written)
    before = WebhookDelivery.objects.count()
    response = client.get(url, {"status": "lost"})
    assert response.status_code == 400
    assert "Unknown delivery status &#x27;lost&#x27;: choose pending, delivered, failed" in (
        response.content.decode()
    )
    assert WebhookDelivery.objects.count() == before
