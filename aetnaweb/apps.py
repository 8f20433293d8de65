from __future__ import annotations

from django.apps import AppConfig


class AetnawebConfig(AppConfig):
    name = "aetnaweb"
    verbose_name = "aetnaweb"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from aetnaweb.sqlite import use_wal

        connection_created.connect(use_wal, dispatch_uid="aetnaweb.sqlite.use_wal")
