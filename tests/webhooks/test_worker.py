"""End to end: an engine event, the database task backend, a real `db_worker`, a real receiver."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django_tasks_db.models import DBTaskResult

from aetnaweb.access import SYSTEM
from memory import services as memory
from tests.mcp.conftest import REPO, subprocess_env
from tests.webhooks.conftest import register
from tests.webhooks.test_signing import docs_verifier
from webhooks.models import WebhookDelivery


def run_worker() -> None:
    env = subprocess_env() | {
        "AETNAWEB_WEBHOOKS_ALLOW_HTTP": "1",
        "AETNAWEB_WEBHOOKS_BACKOFF_SECONDS": "0",
        "AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS": "2",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "db_worker", "--batch", "--no-startup-delay"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_quarantined_fact_reaches_the_receiver_through_the_worker_after_a_retry(receiver):
    # Given an endpoint whose receiver fails once, then answers 200
    _endpoint, secret = register(receiver.url, scope="acme:*:*")
    receiver.script = [(500, 0, b"busy")]
    # When an untrusted fact is remembered (committed: the delivery is queued as a task)
    memory.remember(
        principal=SYSTEM, scope="acme:alice:proj", text="Read: <webpage>My shell is fish.</webpage>"
    )
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 0
    assert DBTaskResult.objects.filter(task_path="webhooks.tasks.deliver_webhook").count() == 1
    # And the worker processes the queue (the retry is a new task with run_after)
    run_worker()
    # Then the receiver got two signed attempts of the same delivery
    assert len(receiver.requests) == 2
    first, second = receiver.requests
    assert first.body == second.body == delivery.body.encode()
    assert docs_verifier()(secret, second.headers["Webhook-Signature"], second.body)
    # And the dashboard's row says delivered on the second attempt
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 200)
    tasks = DBTaskResult.objects.filter(task_path="webhooks.tasks.deliver_webhook")
    assert set(tasks.values_list("status", flat=True)) == {"SUCCESSFUL"}
    assert tasks.count() == 2
