from __future__ import annotations

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        # The engine never imports this app: it announces committed evidence
        # through audit.subscribers, and this is where webhooks listen.
        from aetnaweb import purges
        from audit import subscribers
        from webhooks import events, services

        subscribers.subscribe_events(services.on_audit_event, event_types=events.FROM_AUDIT)
        subscribers.subscribe_failed_runs(services.on_failed_run)
        # A subject erasure reaches the delivery bodies kept about that subtree.
        purges.listen_erasure(services.erase_deliveries)
