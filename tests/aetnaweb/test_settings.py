"""Production settings: ``check --deploy`` is clean, secrets are required, DEBUG is opt-in.

Each case starts a fresh interpreter, because settings are read once at import.
The data directory and database point into a temporary directory so nothing
here touches the development files.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRINT_DEBUG = "from django.conf import settings; print(settings.DEBUG)"


def run(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in {"SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "AETNAWEB_ENV", "DATABASE_URL"}
    }
    base |= {
        "AETNAWEB_DATA_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "aetnaweb.settings",
    }
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def production(**env: str) -> dict[str, str]:
    return {
        "AETNAWEB_ENV": "production",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "example.org",
    } | env


def test_check_deploy_passes_with_production_settings(tmp_path):
    # Given production settings with a strong key and a host
    done = run(tmp_path, "manage.py", "check", "--deploy", **production())
    # Then Django's deployment checklist has nothing to say
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "System check identified no issues (0 silenced)."
    assert "WARNING" not in done.stderr and "WARNINGS" not in done.stdout


def test_check_deploy_is_not_vacuous(tmp_path):
    # A weak key is reported: the clean result above is Django's real checklist.
    done = run(tmp_path, "manage.py", "check", "--deploy", **production(SECRET_KEY="short"))
    assert "security.W009" in done.stderr + done.stdout


def test_production_without_a_secret_key_refuses_to_start(tmp_path):
    env = production()
    del env["SECRET_KEY"]
    done = run(tmp_path, "manage.py", "check", **env)
    assert done.returncode != 0
    assert "SECRET_KEY must be set in production" in done.stderr
    assert not (tmp_path / "secret_key").exists()  # never generated in production


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "False"),
        ({"DEBUG": "true"}, "True"),
        (production(), "False"),
    ],
)
def test_debug_is_off_unless_asked(tmp_path, env, expected):
    done = run(tmp_path, "-c", f"import django; django.setup(); {PRINT_DEBUG}", **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AETNAWEB_APPROVAL_TTL_SECONDS", "abc"),
        ("AETNAWEB_APPROVAL_TTL_SECONDS", "0"),
        ("AETNAWEB_DB_POOL_SIZE", "ten"),
        ("SECURE_HSTS_SECONDS", "1y"),
    ],
)
def test_a_bad_number_stops_start_up_with_one_line_naming_the_variable(tmp_path, name, value):
    # Given a setting that is not a whole number (HSTS is read in production only)
    env = production(**{name: value}) if name == "SECURE_HSTS_SECONDS" else {name: value}
    if name == "AETNAWEB_DB_POOL_SIZE":
        env["DATABASE_URL"] = "postgres://u:p@127.0.0.1:5432/aetnaweb"
    # When a command starts
    done = run(tmp_path, "manage.py", "check", **env)
    # Then it exits non-zero with one line naming the variable and the bad value, no traceback
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("aetnaweb: configuration error:")
    assert name in lines[0] and repr(value) in lines[0]
