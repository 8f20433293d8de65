"""Shared set-up for the audit benchmarks: a throwaway SQLite database, never the dev one."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def benchmark_environment(directory: Path) -> dict[str, str]:
    """Environment for a Django process on ``directory``'s own database and data dir."""
    return {
        "DATABASE_URL": f"sqlite:///{directory / 'bench.sqlite3'}",
        "AETNAWEB_DATA_DIR": str(directory),
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        "DJANGO_SETTINGS_MODULE": "aetnaweb.settings",
    }


def configure_django(directory: Path, *, migrate: bool = True) -> None:
    """Point this process at a database in ``directory``, set Django up, migrate."""
    os.environ.update(benchmark_environment(directory))
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


def cpu_seconds(*, children: bool = False) -> float:
    times = os.times()
    if children:
        return times.children_user + times.children_system
    return times.user + times.system
