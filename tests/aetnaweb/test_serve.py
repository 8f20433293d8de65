"""The production entry point really serves: gunicorn with production settings, static files
from WhiteNoise, the login page, a health check, and one clear line when misconfigured."""

from __future__ import annotations

import http.client
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))

pytestmark = pytest.mark.slow


def free_port() -> int:
    # The ports this project's local servers may use; the highest first.
    for port in range(8159, 8149, -1):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in 8150-8159")


def production_env(tmp_path: Path, port: int) -> dict[str, str]:
    keep = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"}
    return {key: value for key, value in os.environ.items() if key in keep} | {
        "AETNAWEB_ENV": "production",
        "AETNAWEB_DATA_DIR": str(tmp_path),
        "STATIC_ROOT": str(tmp_path / "static"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "GUNICORN_ACCESS_LOG": "0",
    }


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def test_gunicorn_serves_the_app_with_production_settings(tmp_path):
    # Given a migrated database and collected static files (what make serve does first)
    port = free_port()
    env = production_env(tmp_path, port)
    for argv in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    # When gunicorn starts with the project's config
    server = subprocess.Popen(
        [GUNICORN, "--config", "python:aetnaweb.gunicorn_conf", "aetnaweb.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                status, _ = get(port, "/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)
        # Then the health check, the login page and a static file answer
        assert status == 200
        status, body = get(port, "/login/")
        assert status == 200 and b"Sign in" in body
        css = next((ROOT / "static" / "css").glob("*.css")).name
        status, body = get(port, f"/static/css/{css}")
        assert status == 200 and body == (ROOT / "static" / "css" / css).read_bytes()
        # And pages still require a sign-in
        status, _ = get(port, "/")
        assert status == 302
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert "Booting worker" in output and "Traceback" not in output
    # And the embedding model was loaded once, in the arbiter, before any worker forked
    assert output.count("embedding model") == 1
    assert output.index("embedding model") < output.index("Booting worker")
    # And what the arbiter loaded was frozen out of the garbage collector's walks before the fork
    frozen = re.search(r"garbage collector: (\d+) startup objects frozen", output)
    assert frozen and int(frozen.group(1)) > 10_000
    assert output.index("startup objects frozen") < output.index("Booting worker")


def test_the_config_pins_numeric_threads_before_numpy_and_sizes_workers_to_the_cores():
    # Given an environment that sets none of the knobs
    env = {key: value for key, value in os.environ.items() if key in {"PATH", "HOME", "LANG"}}
    probe = (
        "import os, sys; import aetnaweb.gunicorn_conf as conf; "
        "print(conf.workers, conf.threads, 'numpy' in sys.modules, "
        "os.environ['OMP_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'], "
        "os.environ['MKL_NUM_THREADS'], os.environ['TOKENIZERS_PARALLELISM'])"
    )
    # When gunicorn's config module is imported
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    # Then one worker per core (at most 8), one thread (the embedded SQLite database),
    # and one BLAS thread per process, set before NumPy is loaded
    assert done.returncode == 0, done.stderr
    cores = min(os.cpu_count() or 1, 8)
    assert done.stdout.split() == [str(cores), "1", "False", "1", "1", "1", "false"]


def test_gunicorn_refuses_to_start_without_a_secret_key(tmp_path):
    env = production_env(tmp_path, free_port())
    del env["SECRET_KEY"]
    done = subprocess.run(
        [GUNICORN, "--config", "python:aetnaweb.gunicorn_conf", "aetnaweb.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "SECRET_KEY must be set in production" in done.stdout + done.stderr
