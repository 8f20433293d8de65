from __future__ import annotations

from django.apps import AppConfig


class AccessConfig(AppConfig):
    """Grants, API tokens and sign-in lockouts: the data and pages behind :mod:`aetnaweb.access`."""

    name = "access"
    verbose_name = "Access"

    def ready(self) -> None:
        # The engine never imports this app: it announces each purge through the
        # kernel, and the answers kept for Idempotency-Key replays are rewritten here.
        from access.idempotency import forget_kept_answers
        from aetnaweb import purges

        purges.listen(forget_kept_answers)
