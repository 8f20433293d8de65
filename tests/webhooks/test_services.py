"""Endpoint services: who may register, change and delete, what is audited, what is never stored."""

from __future__ import annotations

import json

import pytest

from aetnaweb import access
from aetnaweb.access import SYSTEM, AccessDenied, Role
from audit.models import AuditEvent
from tests.factories import make_operator
from tests.webhooks.conftest import register
from webhooks import selectors, services, signing
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db

URL = "https://93.184.215.14/hooks/aetnaweb?token=receiver-own-token"


def admin(name: str, scope: str) -> access.Principal:
    return access.operator_principal(make_operator(name, [(scope, Role.ADMIN)]))


def test_registering_returns_the_secret_once_and_stores_only_a_salt():
    # Given an admin of the acme tenant
    ada = admin("ada", "acme:*:*")
    # When she registers an endpoint
    issued = services.create_endpoint(
        principal=ada, url=URL, scope="acme:alice:*", events=["memory.record_quarantined"]
    )
    endpoint = WebhookEndpoint.objects.get()
    # Then the secret is returned, recomputable from the salt, and stored nowhere
    assert issued.secret == signing.endpoint_secret(endpoint.id, endpoint.secret_salt)
    row = json.dumps(list(WebhookEndpoint.objects.values()), default=str)
    assert issued.secret not in row
    # And the registration is audited in the scope's chain without secret or full URL
    event = AuditEvent.objects.get(event_type="webhook.endpoint_created")
    assert event.subject_id == "acme:alice:*" and event.actor == "ada"
    payload = json.loads(event.payload)
    assert payload["endpoint_id"] == endpoint.id and payload["host"] == "93.184.215.14"
    assert payload["events"] == ["memory.record_quarantined"]
    assert issued.secret not in event.payload and "receiver-own-token" not in event.payload
    assert endpoint.secret_salt not in event.payload


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"events": []}, "events"),
        ({"events": ["memory.recall"]}, "events"),
        ({"events": "memory.record_quarantined"}, "events"),
        ({"scope": "acme:alice"}, "scope"),
        ({"description": "x" * 201}, "description"),
        ({"url": "https://10.0.0.1/"}, "url"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(kwargs, field):
    arguments = {
        "principal": SYSTEM,
        "url": URL,
        "scope": "acme:*:*",
        "events": ["action.proposed"],
    } | kwargs
    with pytest.raises(services.WebhookError) as refused:
        services.create_endpoint(**arguments)
    assert refused.value.field == field
    assert not WebhookEndpoint.objects.exists()
    assert not AuditEvent.objects.exists()


def test_only_an_admin_of_the_scope_or_above_may_register():
    alice_admin = admin("al", "acme:alice:*")
    reviewer = access.operator_principal(make_operator("rev", [("acme:*:*", Role.REVIEWER)]))
    for principal, scope in (
        (alice_admin, "acme:*:*"),  # above her grant
        (alice_admin, "acme:bob:*"),  # a sibling
        (reviewer, "acme:*:*"),  # not an admin
    ):
        with pytest.raises(AccessDenied):
            services.create_endpoint(
                principal=principal, url=URL, scope=scope, events=["action.proposed"]
            )
    assert not WebhookEndpoint.objects.exists()
    assert not AuditEvent.objects.filter(event_type__startswith="webhook.").exists()
    # Inside her subtree she may
    services.create_endpoint(
        principal=alice_admin, url=URL, scope="acme:alice:proj", events=["action.proposed"]
    )


def test_an_admin_sees_and_changes_only_endpoints_within_her_grants():
    # Given endpoints in two users' subtrees
    bob_hook, _ = register(URL, scope="acme:bob:*")
    alice_hook, _ = register(URL, scope="acme:alice:*")
    alice_admin = admin("al", "acme:alice:*")
    # Then she lists only hers
    assert [e.id for e in selectors.endpoints_administered(alice_admin)] == [alice_hook.id]
    # And every write on bob's answers as if it did not exist, writing nothing
    before = AuditEvent.objects.count()
    for attempt in (
        lambda: services.update_endpoint(
            principal=alice_admin, endpoint_id=bob_hook.id, url=URL, events=["action.proposed"]
        ),
        lambda: services.delete_endpoint(principal=alice_admin, endpoint_id=bob_hook.id),
        lambda: services.rotate_secret(principal=alice_admin, endpoint_id=bob_hook.id),
        lambda: services.send_test_event(principal=alice_admin, endpoint_id=bob_hook.id),
    ):
        with pytest.raises(AccessDenied):
            attempt()
    assert AuditEvent.objects.count() == before
    assert WebhookEndpoint.objects.filter(pk=bob_hook.id).exists()
    assert not WebhookDelivery.objects.exists()


def test_update_rotate_and_delete_are_audited():
    endpoint, secret = register(URL)
    services.update_endpoint(
        principal=SYSTEM,
        endpoint_id=endpoint.id,
        url="https://93.184.215.15/new",
        events=["audit.verification_failed"],
        active=False,
    )
    endpoint.refresh_from_db()
    assert (endpoint.active, endpoint.events) == (False, ["audit.verification_failed"])
    rotated = services.rotate_secret(principal=SYSTEM, endpoint_id=endpoint.id)
    assert rotated.secret != secret
    services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    services.delete_endpoint(principal=SYSTEM, endpoint_id=endpoint.id)
    assert not WebhookEndpoint.objects.exists() and not WebhookDelivery.objects.exists()
    types = list(
        AuditEvent.objects.filter(event_type__startswith="webhook.")
        .order_by("sequence")
        .values_list("event_type", flat=True)
    )
    assert types == [
        "webhook.endpoint_created",
        "webhook.endpoint_updated",
        "webhook.secret_rotated",
        "webhook.endpoint_deleted",
    ]
    for event in AuditEvent.objects.filter(event_type__startswith="webhook."):
        assert secret not in event.payload and rotated.secret not in event.payload


def test_retry_refuses_a_delivered_delivery():
    endpoint, _ = register(URL)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="delivered")
    with pytest.raises(services.WebhookError, match="already delivered"):
        services.retry_delivery(principal=SYSTEM, delivery_id=delivery.id)


def test_backoff_doubles_and_is_capped(settings):
    settings.AETNAWEB_WEBHOOKS_BACKOFF_SECONDS = 30
    assert [services.backoff_seconds(n) for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert services.backoff_seconds(40) == services.MAX_BACKOFF_SECONDS
