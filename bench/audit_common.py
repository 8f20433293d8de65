"""Shared set-up for the benchmarks: a throwaway database, never the dev one."""

from __future__ import annotations

import os
import secrets
import sys
import time
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


def drop_database(admin_url: str, name: str, *, patience_seconds: float = 60.0) -> None:
    """Drop the throwaway PostgreSQL database ``name``, waiting out the server's own work on it.

    A plain ``DROP DATABASE`` stops an autovacuum worker busy on the freshly
    loaded tables by itself, but refuses while a client is still connected;
    ``WITH (FORCE)`` ends the clients (this role's own, e.g. a connection pool
    left open) but is refused outright while an autovacuum worker is there,
    since a role that is not a superuser may not end the server's processes.
    So the plain drop is tried first, the forced one when a client remains,
    and both again until ``patience_seconds`` have passed.
    """
    import psycopg
    from psycopg import errors

    deadline = time.monotonic() + patience_seconds
    with psycopg.connect(admin_url, autocommit=True) as conn:
        while True:
            try:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                return
            except errors.ObjectInUse:
                pass
            try:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                return
            except errors.InsufficientPrivilege:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.5)
