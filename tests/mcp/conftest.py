"""Helpers for tests that run the project's commands as subprocesses against the test database."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """A DATABASE_URL naming the database this test process is using (SQLite file or PostgreSQL)."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(settings['NAME']).resolve()}"
    user = quote(settings.get("USER") or "", safe="")
    password = quote(settings.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{settings['NAME']}"


def subprocess_env() -> dict[str, str]:
    """The environment a child Django process needs to use this test's database."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key in {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SECRET_KEY", "AETNAWEB_DATA_DIR"}
    }
    env["DATABASE_URL"] = test_database_url()
    env["DJANGO_SETTINGS_MODULE"] = "aetnaweb.settings"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def python() -> str:
    return sys.executable
