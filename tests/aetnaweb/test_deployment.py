"""The container files (Dockerfile, compose.yaml) and make serve agree with the app.

No container engine runs where these tests run, so the files are parsed and
checked for what would break a deployment: the right commands, the database
URL pointing at the compose database, a required SECRET_KEY that is never
baked into the image, every package copied in, the worker present.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from aetnaweb import gunicorn_conf

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = ["gunicorn", "--config", "python:aetnaweb.gunicorn_conf", "aetnaweb.wsgi"]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_compose_runs_web_worker_and_migrations_on_postgres(compose):
    services = compose["services"]
    assert set(services) == {"db", "migrate", "web", "worker"}
    assert services["db"]["image"].startswith("postgres:15")
    assert services["web"]["command"] == GUNICORN
    assert services["worker"]["command"][:3] == ["python", "manage.py", "db_worker"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    # Web and worker start only after migrations, which wait for a healthy database
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"


def test_compose_app_environment_is_production_on_the_compose_database(compose):
    for name in ("migrate", "web", "worker"):
        env = compose["services"][name]["environment"]
        assert env["AETNAWEB_ENV"] == "production"
        assert re.fullmatch(
            r"postgres://aetnaweb:\$\{POSTGRES_PASSWORD:-aetnaweb\}@db:5432/aetnaweb",
            env["DATABASE_URL"],
        )
        # No default secret: compose refuses to start without one
        assert env["SECRET_KEY"].startswith("${SECRET_KEY:?")
    db_env = compose["services"]["db"]["environment"]
    assert (db_env["POSTGRES_USER"], db_env["POSTGRES_DB"]) == ("aetnaweb", "aetnaweb")
    # Published on loopback only; the health check uses the app's own endpoint
    assert compose["services"]["web"]["ports"] == ["127.0.0.1:8000:8000"]
    assert "/healthz" in " ".join(compose["services"]["web"]["healthcheck"]["test"])


def test_dockerfile_matches_the_project(dockerfile):
    python = (ROOT / ".python-version").read_text().strip()
    assert re.search(rf"^FROM python:{re.escape(python)}-slim", dockerfile, re.M)
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M)
    assert cmd and yaml.safe_load(cmd.group(1)) == GUNICORN
    assert "AETNAWEB_ENV=production" in dockerfile and "HOST=0.0.0.0" in dockerfile
    # Every installed package and the folders settings read are copied in
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    installed = [name.rstrip("*") for name in packages["packages"]["find"]["include"]]
    assert {"aetnaweb", "access", "jobs", "audit", "memory", "actions"} <= set(installed)
    for folder in (*installed, "templates", "static"):
        assert re.search(rf"^COPY {folder} \./{folder}$", dockerfile, re.M), folder
    assert "collectstatic" in dockerfile and re.search(r"^USER aetnaweb$", dockerfile, re.M)
    # The build-time key is scoped to one RUN, never an ENV baked into the image
    assert not re.search(r"^ENV[^\n]*SECRET_KEY", dockerfile, re.M)


def test_make_serve_uses_the_same_server_and_a_worker():
    makefile = (ROOT / "Makefile").read_text()
    serve = makefile[makefile.index("\nserve:") : makefile.index("\nworker:")]
    assert "$(VENV)/bin/" + shlex.join(GUNICORN) in serve
    assert "manage.py db_worker" in serve and "collectstatic --noinput" in serve
    assert "migrate --noinput" in serve and 'AETNAWEB_ENV="$${AETNAWEB_ENV:-production}"' in serve


def test_gunicorn_settings_read_the_environment(monkeypatch):
    import importlib

    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    monkeypatch.setenv("PORT", "8155")
    monkeypatch.setenv("HOST", "127.0.0.1")
    conf = importlib.reload(gunicorn_conf)
    assert (conf.workers, conf.bind, conf.worker_class) == (
        3,
        "127.0.0.1:8155",
        "aetnaweb.gunicorn_worker.BalancedThreadWorker",
    )
    monkeypatch.setenv("WEB_CONCURRENCY", "zero")
    with pytest.raises(SystemExit, match="WEB_CONCURRENCY must be a whole number"):
        importlib.reload(gunicorn_conf)
    monkeypatch.delenv("WEB_CONCURRENCY")
    importlib.reload(gunicorn_conf)


def test_threads_default_to_one_on_sqlite_and_four_on_postgresql(monkeypatch):
    import importlib

    monkeypatch.delenv("GUNICORN_THREADS", raising=False)
    try:
        # Given no database URL (the embedded SQLite file) or a SQLite one: one thread
        monkeypatch.delenv("DATABASE_URL", raising=False)
        assert importlib.reload(gunicorn_conf).threads == 1
        monkeypatch.setenv("DATABASE_URL", "sqlite:////srv/aetnaweb.sqlite3")
        assert importlib.reload(gunicorn_conf).threads == 1
        # Given PostgreSQL, usually across a network: four
        monkeypatch.setenv("DATABASE_URL", "postgres://app@db:5432/aetnaweb")
        assert importlib.reload(gunicorn_conf).threads == 4
        # And the operator's value wins either way
        monkeypatch.setenv("GUNICORN_THREADS", "2")
        assert importlib.reload(gunicorn_conf).threads == 2
    finally:
        monkeypatch.undo()
        importlib.reload(gunicorn_conf)


def test_the_arbiter_imports_every_view_and_api_module_before_the_workers_fork():
    """Django would import the URL configuration at each worker's first request (~0.25 s)."""
    script = (
        "import sys, django; django.setup()\n"
        "assert 'memory.api' not in sys.modules, 'imported already'\n"
        "from aetnaweb import gunicorn_conf\n"
        "gunicorn_conf.when_ready(None)\n"
        "assert {'memory.api', 'actions.views', 'audit.api'} <= set(sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "aetnaweb.settings"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_startup_objects_are_frozen_out_of_the_collectors_walks():
    import gc

    # Given a process holding the app's long-lived objects
    gc.unfreeze()
    try:
        # When the arbiter freezes them before forking the workers
        frozen = gunicorn_conf.freeze_startup_objects()
        # Then they are all frozen, and a full collection no longer walks them
        # (a frozen object that another thread of this process frees, such as
        # the PostgreSQL pool's, leaves the count: it may only have gone down)
        assert frozen > 10_000
        assert frozen - 100 <= gc.get_freeze_count() <= frozen
        left = len(gc.get_objects())
        assert left < frozen // 10
        # And what is made afterwards is still collected
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()


def test_workers_hand_the_gil_over_every_millisecond_unless_told_otherwise(monkeypatch):
    import importlib
    import sys

    before = sys.getswitchinterval()
    try:
        # Given the default configuration, a forked worker switches threads every 1 ms
        conf = importlib.reload(gunicorn_conf)
        conf.post_fork(None, None)
        assert sys.getswitchinterval() == pytest.approx(0.001)
        # And the operator's value wins
        monkeypatch.setenv("GUNICORN_SWITCH_INTERVAL_MS", "5")
        importlib.reload(gunicorn_conf).post_fork(None, None)
        assert sys.getswitchinterval() == pytest.approx(0.005)
        # And a value that is not a whole number of milliseconds stops startup with one line
        monkeypatch.setenv("GUNICORN_SWITCH_INTERVAL_MS", "0.5")
        with pytest.raises(SystemExit, match="GUNICORN_SWITCH_INTERVAL_MS must be a whole number"):
            importlib.reload(gunicorn_conf)
    finally:
        monkeypatch.delenv("GUNICORN_SWITCH_INTERVAL_MS", raising=False)
        importlib.reload(gunicorn_conf)
        sys.setswitchinterval(before)
