"""Issue 10 item 7: database faults are 503s that say what is wrong, reads survive a
read-only SQLite file, PostgreSQL connections are pooled, and every error under
/api/v1/ is JSON (unknown paths, wrong methods, CSRF failures, faults)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import OperationalError
from django.db.backends.sqlite3.base import DatabaseWrapper
from django.http import HttpResponse, HttpResponseForbidden
from django.test import Client, RequestFactory

from aetnaweb.api import JsonErrorsMiddleware
from aetnaweb.faults import database_fault
from aetnaweb.sqlite import create_private_file
from memory import services as memory_services
from memory.models import Record
from tests.api.conftest import issue_token
from tests.factories import login_as, make_operator

ROOT = Path(__file__).resolve().parents[2]
SCOPE = "acme:alice:proj"

DISK_FULL = OperationalError("database or disk is full")
READ_ONLY = OperationalError("attempt to write a readonly database")


def too_many_clients() -> OperationalError:
    """What Django raises when PostgreSQL has no slot left: psycopg's error, wrapped."""
    try:
        raise psycopg.OperationalError("connection failed: FATAL:  sorry, too many clients already")
    except psycopg.OperationalError as exc:
        wrapped = OperationalError(*exc.args)
        wrapped.__cause__ = exc
        return wrapped


def api_client() -> tuple[Client, dict[str, str]]:
    secret = issue_token("acme:alice:*")
    return Client(raise_request_exception=False), {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


# -- the API: 503 JSON -----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (DISK_FULL, "disk is full"),
        (READ_ONLY, "read-only"),
        (too_many_clients(), "no free connections"),
    ],
)
def test_api_answers_a_database_fault_with_a_503(monkeypatch, fault, words):
    # Given a database that fails the write
    def failing(**kwargs):
        raise fault

    monkeypatch.setattr(memory_services, "remember", failing)
    client, auth = api_client()
    # When an agent remembers something
    response = client.post(
        "/api/v1/memory/remember",
        json.dumps({"scope": SCOPE, "text": "My pet is Rex"}),
        content_type="application/json",
        **auth,
    )
    # Then it gets a 503 in the API's JSON shape saying what is wrong, and nothing was stored
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "service_unavailable" and words in body["detail"]
    assert response["Retry-After"].isdigit()
    assert Record.objects.count() == 0


@pytest.mark.django_db
def test_api_keeps_a_500_for_errors_that_are_bugs(monkeypatch):
    def failing(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(memory_services, "remember", failing)
    client, auth = api_client()
    response = client.post(
        "/api/v1/memory/remember",
        json.dumps({"scope": SCOPE, "text": "My pet is Rex"}),
        content_type="application/json",
        **auth,
    )
    assert response.status_code == 500 and response.json()["error"] == "internal_error"


# -- the dashboard: a 503 page ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fault", "words"), [(DISK_FULL, "disk is full"), (READ_ONLY, "read-only")]
)
def test_dashboard_answers_a_database_fault_with_a_503_page(monkeypatch, fault, words):
    # Given a signed-in operator and a database that fails
    client = Client(raise_request_exception=False)
    login_as(client, make_operator("vera", [("acme:*:*", "viewer")]))

    def failing(*args, **kwargs):
        raise fault

    monkeypatch.setattr("aetnaweb.views.build_overview", failing)
    # When the overview is opened
    response = client.get("/")
    # Then a 503 page says what is wrong
    assert response.status_code == 503
    body = response.content.decode()
    assert "<h1" in body and words in body and response["Retry-After"].isdigit()


@pytest.mark.django_db
def test_health_check_is_a_503_when_postgresql_has_no_free_slots(monkeypatch):
    from django.db import connection

    def failing(*args, **kwargs):
        raise too_many_clients()

    monkeypatch.setattr(connection, "cursor", failing)
    response = Client(raise_request_exception=False).get("/healthz")
    assert response.status_code == 503 and b"no free connections" in response.content


def test_only_operational_faults_are_faults():
    assert database_fault(RuntimeError("database or disk is full")) is None
    assert database_fault(OperationalError("server closed the connection")) is not None


# -- a read-only SQLite file still serves reads ------------------------------------------------


def read_only_connection(path: Path) -> DatabaseWrapper:
    """A connection opened the way the project opens SQLite, on a file it may only read."""
    config = dict(django_settings.DATABASES["default"])
    if config["ENGINE"] != "django.db.backends.sqlite3":
        config = {
            "ENGINE": "django.db.backends.sqlite3",
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "init_command": django_settings.SQLITE_INIT_COMMAND,
            },
        }
    config |= {"NAME": f"file:{path}?mode=ro", "TEST": {}}
    config.setdefault("TIME_ZONE", None)
    config.setdefault("CONN_MAX_AGE", 0)
    config.setdefault("CONN_HEALTH_CHECKS", False)
    config.setdefault("AUTOCOMMIT", True)
    config.setdefault("ATOMIC_REQUESTS", False)
    return DatabaseWrapper(config, alias="read_only")


def test_a_read_only_sqlite_file_serves_reads_and_refuses_writes_as_a_fault(
    tmp_path, django_db_blocker
):
    # Given a database file in rollback-journal mode (a restored backup, say) opened read-only
    import sqlite3

    path = tmp_path / "restored.sqlite3"
    writer = sqlite3.connect(str(path))
    writer.execute("CREATE TABLE note (text TEXT)")
    writer.execute("INSERT INTO note VALUES ('kept')")
    writer.commit()
    writer.close()
    connection = read_only_connection(path)
    # (a connection of its own, outside the test database pytest-django guards)
    with django_db_blocker.unblock():
        reads_and_refuses_writes(connection)


def reads_and_refuses_writes(connection: DatabaseWrapper) -> None:
    try:
        # When a page reads from it (the project's connection set-up runs first)
        with connection.cursor() as cursor:
            cursor.execute("SELECT text FROM note")
            rows = cursor.fetchall()
        # Then the read works
        assert rows == [("kept",)]
        # And a write is a fault the 503 handler names, not a bug
        with pytest.raises(OperationalError) as caught, connection.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES ('new')")
        assert database_fault(caught.value) is not None
        assert "read-only" in database_fault(caught.value)
    finally:
        connection.close()


# -- every error under /api/v1/ is JSON --------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("get", "/api/v1/memory/remember", 405, "method_not_allowed"),
        ("delete", "/api/v1/token", 405, "method_not_allowed"),
        ("post", "/api/v1/nope", 404, "not_found"),
        ("post", "/api/v1/", 404, "not_found"),
        ("get", "/api/v1/nope/deeper", 404, "not_found"),
    ],
)
def test_api_errors_outside_the_endpoints_are_json(method, path, status, error):
    # Given a client that enforces CSRF like a browser would
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {issue_token('acme:alice:*')}"}
    # When it calls a wrong method or an unknown path
    response = getattr(client, method)(path, **auth)
    # Then the answer is the API's JSON error shape
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["error"] == error and body["field"] is None and body["detail"]
    if status == 405:
        assert "POST" in response["Allow"] or "GET" in response["Allow"]
        assert method.upper() in body["detail"]


def test_a_csrf_failure_under_the_api_is_json():
    # Given Django's HTML CSRF refusal for a request under /api/v1/
    request = RequestFactory().post("/api/v1/memory/remember")
    middleware = JsonErrorsMiddleware(lambda request: HttpResponseForbidden("<h1>CSRF</h1>"))
    # When it passes the middleware
    response = middleware(request)
    # Then the agent reads JSON naming the cause
    assert response.status_code == 403 and response["Content-Type"] == "application/json"
    assert json.loads(response.content)["error"] == "forbidden"
    assert "CSRF" in json.loads(response.content)["detail"]


def test_dashboard_errors_stay_html():
    request = RequestFactory().get("/memory/x")
    middleware = JsonErrorsMiddleware(lambda request: HttpResponse("<h1>no</h1>", status=404))
    assert middleware(request).content == b"<h1>no</h1>"


# -- connections: pooled and checked (PostgreSQL), kept per thread (SQLite) -------------------


def database_settings(tmp_path: Path, **env: str) -> dict:
    code = "from django.conf import settings; import json; print(json.dumps(settings.DATABASES['default'], default=str))"
    base = {k: v for k, v in os.environ.items() if not k.startswith("AETNAWEB_DB_")}
    base |= {
        "AETNAWEB_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "aetnaweb.settings",
        "DATABASE_URL": "postgres://u:p@127.0.0.1:5432/aetnaweb",
        # An empty data directory has no development key (make setup makes one).
        "SECRET_KEY": "k" * 60,
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout)


def test_postgresql_uses_a_checked_pool_by_default(tmp_path):
    config = database_settings(tmp_path)
    pool = config["OPTIONS"]["pool"]
    assert pool["max_size"] == 10 and pool["timeout"] == 10 and "check_connection" in pool["check"]
    assert config["CONN_HEALTH_CHECKS"] is True and config["CONN_MAX_AGE"] == 0


def test_postgresql_without_a_pool_keeps_connections(tmp_path):
    config = database_settings(tmp_path, AETNAWEB_DB_POOL_SIZE="0")
    assert "pool" not in config["OPTIONS"] and config["CONN_MAX_AGE"] == 60


def test_sqlite_server_threads_keep_their_connection_for_a_minute_in_production(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    production = database_settings(tmp_path, DATABASE_URL=url, AETNAWEB_ENV="production")
    assert production["ENGINE"] == "aetnaweb.sqlite_backend"
    assert production["CONN_MAX_AGE"] == 60 and production["CONN_HEALTH_CHECKS"] is True
    # The development server's thread per request could never reuse one
    development = database_settings(tmp_path, DATABASE_URL=url, AETNAWEB_ENV="development")
    assert development["CONN_MAX_AGE"] == 0
    # And the operator's value wins in both
    for env in ("production", "development"):
        chosen = database_settings(
            tmp_path, DATABASE_URL=url, AETNAWEB_ENV=env, AETNAWEB_DB_CONN_MAX_AGE_SECONDS="5"
        )
        assert chosen["CONN_MAX_AGE"] == 5


# -- the database file is private ------------------------------------------------------------------


def test_a_new_database_file_is_created_0600(tmp_path):
    # When the project creates its SQLite file (through `manage.py check`, a first connection)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env |= {"AETNAWEB_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "aetnaweb.settings"}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    env["SECRET_KEY"] = "k" * 60  # an empty data directory has no development key
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300
    )
    # Then only its owner may read it, like the secret key
    assert (tmp_path / "fresh.sqlite3").stat().st_mode & 0o777 == 0o600


def test_an_existing_database_file_keeps_its_mode(tmp_path):
    path = tmp_path / "shared.sqlite3"
    path.write_bytes(b"")
    path.chmod(0o640)
    create_private_file(str(path))
    assert path.stat().st_mode & 0o777 == 0o640
