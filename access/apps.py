from __future__ import annotations

from django.apps import AppConfig


class AccessConfig(AppConfig):
    """Grants, API tokens and sign-in lockouts: the data and pages behind :mod:`aetnaweb.access`."""

    name = "access"
    verbose_name = "Access"
