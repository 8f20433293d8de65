"""Webhook deliveries as django.tasks tasks (run by ``manage.py db_worker``).

The task carries only the delivery's ID: the row holds the body, the attempt
count and when the next attempt is due, and a task for a delivery that is not
due (already sent, retried early by "retry now") does nothing.
"""

from __future__ import annotations

from django.tasks import task

from webhooks import services


@task()
def deliver_webhook(delivery_id: str) -> str:
    """Attempt delivery ``delivery_id`` if it is due; return its status afterwards."""
    delivery = services.deliver(delivery_id)
    return delivery.status if delivery is not None else "not due"
