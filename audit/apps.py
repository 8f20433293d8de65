from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit chain"

    def ready(self) -> None:
        # Every refusal the app can answer must be in the error catalogue from the start,
        # so the served OpenAPI document (and the clients generated from it) do not depend on
        # which modules a process happened to import: the witness check is imported lazily.
        from audit import witness  # noqa: F401
