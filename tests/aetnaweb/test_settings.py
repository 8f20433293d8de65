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
        if key
        not in {
            "SECRET_KEY",
            "SECRET_KEY_FILE",
            "DEBUG",
            "ALLOWED_HOSTS",
            "AETNAWEB_ENV",
            "DATABASE_URL",
            "STATIC_ROOT",
            "AETNAWEB_TASKS_BACKEND",
        }
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
        ({"SECRET_KEY": "dev-key-for-this-test"}, "False"),
        ({"SECRET_KEY": "dev-key-for-this-test", "DEBUG": "true"}, "True"),
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
        ("AETNAWEB_EMBED_THREADS", "two"),
        ("AETNAWEB_EMBED_THREADS", "0"),
        ("SECURE_HSTS_SECONDS", "1y"),
    ],
)
def test_a_bad_number_stops_start_up_with_one_line_naming_the_variable(tmp_path, name, value):
    # Given a setting that is not a whole number (HSTS is read in production only)
    env = (
        production(**{name: value})
        if name == "SECURE_HSTS_SECONDS"
        else {name: value, "SECRET_KEY": "k" * 60}
    )
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


def test_importing_settings_writes_no_file(tmp_path):
    # Given an empty data directory and a key from the environment
    # When the settings are loaded and Django set up
    done = run(tmp_path, "-c", f"import django; django.setup(); {PRINT_DEBUG}", SECRET_KEY="k" * 60)
    # Then nothing was created: no key, no static folder, no database file
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_development_without_a_key_file_names_the_setup_step(tmp_path):
    # Given development settings and no data/secret_key
    done = run(tmp_path, "manage.py", "check")
    # Then startup stops with one clear error saying how to create it, and writes nothing
    assert done.returncode != 0
    assert f"{tmp_path / 'secret_key'} is missing" in done.stderr
    assert "make setup" in done.stderr and "python -m aetnaweb.instance" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_setup_step_creates_private_keys_once(tmp_path):
    # When the explicit setup step runs twice
    first = run(tmp_path, "-m", "aetnaweb.instance")
    key = (tmp_path / "secret_key").read_text()
    approval = (tmp_path / "approval_key").read_text()
    second = run(tmp_path, "-m", "aetnaweb.instance")
    # Then the first created both keys (owner-only), the exports and static folders, the
    # second nothing
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.count("created") == 4 and second.stdout == ""
    assert (tmp_path / "exports").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "approval_key").stat().st_mode & 0o777 == 0o600
    assert len(key) >= 64 and len(bytes.fromhex(approval)) == 32
    assert (tmp_path / "secret_key").read_text() == key  # never overwritten
    assert (tmp_path / "staticfiles").is_dir()
    # And the settings now start
    assert run(tmp_path, "manage.py", "check").returncode == 0


def test_the_setup_step_creates_no_keys_in_production(tmp_path):
    done = run(tmp_path, "-m", "aetnaweb.instance", AETNAWEB_ENV="production")
    assert done.returncode == 0 and "no development keys" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_production_reads_the_key_from_secret_key_file(tmp_path):
    # Given a key in a file (a container secret), not in the environment
    key_file = tmp_path / "key"
    key_file.write_text(secrets.token_urlsafe(60) + "\n")
    env = production(SECRET_KEY_FILE=str(key_file))
    del env["SECRET_KEY"]
    # Then the deployment checklist passes with it
    done = run(tmp_path, "manage.py", "check", "--deploy", **env)
    assert done.returncode == 0, done.stderr
    # And a missing file is one clear error
    env["SECRET_KEY_FILE"] = str(tmp_path / "absent")
    done = run(tmp_path, "manage.py", "check", **env)
    assert (
        done.returncode != 0 and f"SECRET_KEY_FILE: {tmp_path / 'absent'} is missing" in done.stderr
    )


def test_production_wsgi_refuses_to_start_without_collected_static_files(tmp_path):
    # Given production settings and no collectstatic
    env = production(STATIC_ROOT=str(tmp_path / "static"))
    done = run(tmp_path, "-c", "import aetnaweb.wsgi", **env)
    # Then the app does not load, and says which command to run
    assert done.returncode != 0 and "collectstatic" in done.stderr
    # And after collectstatic it loads
    collected = run(tmp_path, "manage.py", "collectstatic", "--noinput", **env)
    assert collected.returncode == 0, collected.stderr
    assert run(tmp_path, "-c", "import aetnaweb.wsgi", **env).returncode == 0


def test_an_unknown_task_backend_is_refused(tmp_path):
    done = run(tmp_path, "manage.py", "check", SECRET_KEY="k" * 60, AETNAWEB_TASKS_BACKEND="celery")
    assert done.returncode != 0 and "AETNAWEB_TASKS_BACKEND must be one of" in done.stderr


def test_a_malformed_login_threshold_is_one_clear_error(tmp_path):
    done = run(
        tmp_path, "manage.py", "check", SECRET_KEY="k" * 60, AETNAWEB_LOGIN_SLOW_AFTER="three"
    )
    assert done.returncode != 0
    assert (
        "AETNAWEB_LOGIN_SLOW_AFTER must be a whole number of at least 1, got 'three'" in done.stderr
    )


def test_an_unknown_embedding_precision_is_refused(tmp_path):
    done = run(
        tmp_path, "manage.py", "check", SECRET_KEY="k" * 60, AETNAWEB_EMBEDDING_PRECISION="fp16"
    )
    assert done.returncode != 0
    assert "AETNAWEB_EMBEDDING_PRECISION must be 'int8' or 'float32'" in done.stderr


def test_a_malformed_webhook_port_list_is_one_clear_error(tmp_path):
    done = run(
        tmp_path,
        "manage.py",
        "check",
        SECRET_KEY="k" * 60,
        AETNAWEB_WEBHOOKS_ALLOWED_PORTS="8443,ssh",
    )
    assert done.returncode != 0
    assert "AETNAWEB_WEBHOOKS_ALLOWED_PORTS must be port numbers" in done.stderr
