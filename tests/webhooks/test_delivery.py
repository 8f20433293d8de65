"""Sending: a real loopback receiver, signatures it can check, retries, timeouts, giving up."""

from __future__ import annotations

import json
import time

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from aetnaweb.access import SYSTEM
from tests.webhooks.conftest import register
from tests.webhooks.test_signing import docs_verifier
from webhooks import services
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.django_db


def test_a_delivery_reaches_the_receiver_signed(receiver):
    # Given an endpoint and a queued test event
    endpoint, secret = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    # When it is attempted
    done = services.deliver(delivery.id)
    # Then the receiver got exactly the stored body, signed with the endpoint's secret
    (request,) = receiver.requests
    assert request.path == "/hooks/aetnaweb"
    assert request.body == delivery.body.encode()
    assert request.headers["Webhook-Id"] == delivery.id
    assert request.headers["Webhook-Event"] == "webhook.test"
    assert request.headers["Content-Type"] == "application/json"
    assert docs_verifier()(secret, request.headers["Webhook-Signature"], request.body)
    # And the delivery reads delivered, with its status and a short excerpt
    assert done is not None and done.status == WebhookDelivery.Status.DELIVERED
    assert (done.attempts, done.last_status_code, done.response_excerpt) == (1, 200, "ok")
    assert done.next_attempt_at is None and done.delivered_at is not None
    # And a second attempt of the same delivery sends nothing more
    assert services.deliver(delivery.id) is None and len(receiver.requests) == 1


def test_a_500_is_retried_later_with_backoff(receiver, settings):
    settings.AETNAWEB_WEBHOOKS_BACKOFF_SECONDS = 30
    receiver.script = [(500, 0, b"<h1>Internal Server Error</h1>" + b"x" * 1000)]
    endpoint, _ = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    before = timezone.now()
    done = services.deliver(delivery.id)
    assert done is not None and done.status == "pending"
    assert (done.attempts, done.last_status_code, done.last_error) == (1, 500, "HTTP 500")
    assert len(done.response_excerpt) <= 200  # only a short excerpt is kept
    wait = (done.next_attempt_at - before).total_seconds()
    assert 29 <= wait <= 31
    # The retry is queued on the database backend to run then (run_after)
    queued = DBTaskResult.objects.filter(task_path="webhooks.tasks.deliver_webhook")
    assert queued.filter(run_after__isnull=False).count() == 1
    # Not due yet: an early task does nothing
    assert services.deliver(delivery.id) is None and len(receiver.requests) == 1
    # When the time has come, the next attempt delivers and doubles nothing further
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    again = services.deliver(delivery.id)
    assert again is not None and again.status == "delivered" and again.attempts == 2


def test_a_timeout_is_a_failed_attempt(receiver):
    receiver.script = [(200, 2.5, b"too late")]  # the timeout is 1 s in these tests
    endpoint, _ = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    started = time.monotonic()
    done = services.deliver(delivery.id)
    assert time.monotonic() - started < 2.4
    assert done is not None and done.status == "pending"
    assert done.last_error == "timed out" and done.last_status_code is None


def test_it_gives_up_after_the_last_attempt(receiver, settings):
    settings.AETNAWEB_WEBHOOKS_MAX_ATTEMPTS = 3
    receiver.default = (503, 0, b"down")
    endpoint, _ = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    for _ in range(3):
        done = services.deliver(delivery.id)
        assert done is not None
    assert (done.status, done.attempts, done.next_attempt_at) == ("failed", 3, None)
    assert services.deliver(delivery.id) is None and len(receiver.requests) == 3
    # "Retry now" gives a failed delivery one more attempt
    services.retry_delivery(principal=SYSTEM, delivery_id=delivery.id)
    receiver.default = (204, 0, b"")
    final = services.deliver(delivery.id)
    assert final is not None and (final.status, final.attempts) == ("delivered", 4)


def test_a_redirect_is_not_followed(receiver):
    receiver.script = [(302, 0, b"")]
    endpoint, _ = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    done = services.deliver(delivery.id)
    assert len(receiver.requests) == 1  # nothing went to the Location
    assert done is not None and done.status == "pending"
    assert (done.last_status_code, done.last_error) == (302, "redirects are not followed")


def test_a_refused_connection_is_a_failed_attempt(receiver):
    endpoint, _ = register("http://127.0.0.1:1/nothing-listens")
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    done = services.deliver(delivery.id)
    assert done is not None and done.last_error.startswith("could not connect")


def test_loopback_is_refused_at_delivery_when_the_setting_is_off(receiver, settings):
    endpoint, _ = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = False
    done = services.deliver(delivery.id)
    assert receiver.requests == []
    assert done is not None and done.last_error.startswith("refused:")


def test_a_disabled_endpoint_gets_no_event_deliveries(receiver):
    endpoint, _ = register(receiver.url)
    delivery = services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(event_type="memory.record_quarantined")
    endpoint.active = False
    endpoint.save()
    done = services.deliver(delivery.id)
    assert receiver.requests == []
    assert done is not None and (done.status, done.last_error) == (
        "failed",
        "the endpoint is disabled",
    )


def test_deliver_due_sends_what_is_due(receiver):
    endpoint, _ = register(receiver.url)
    for _ in range(2):
        services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    assert services.deliver_due() == 2
    assert len(receiver.requests) == 2
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}
    assert all(json.loads(r.body)["type"] == "webhook.test" for r in receiver.requests)


def test_the_deliver_due_command(receiver):
    from io import StringIO

    from django.core.management import call_command

    endpoint, _ = register(receiver.url)
    services.send_test_event(principal=SYSTEM, endpoint_id=endpoint.id)
    out = StringIO()
    call_command("webhooks", "deliver-due", stdout=out)
    assert out.getvalue().strip() == "1 deliveries attempted"
    assert len(receiver.requests) == 1
