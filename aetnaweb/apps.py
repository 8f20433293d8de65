from __future__ import annotations

from django.apps import AppConfig


class AetnawebConfig(AppConfig):
    name = "aetnaweb"
    verbose_name = "aetnaweb"
