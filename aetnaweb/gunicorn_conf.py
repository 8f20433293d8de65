"""Gunicorn settings for ``make serve`` and the container: every knob comes from the environment.

- ``HOST`` / ``PORT``: where to listen (default ``127.0.0.1:8000``; the
  container sets ``HOST=0.0.0.0``).
- ``WEB_CONCURRENCY``: worker processes (default 2 x CPU cores, at most 8).
- ``GUNICORN_THREADS``: threads per worker (default 4, the ``gthread`` worker).
- ``GUNICORN_TIMEOUT``: seconds before a silent worker is restarted (default 30).

Why gthread: the app is WSGI Django whose requests wait mostly on the database;
a few threads per process overlap those waits without async code, and
processes give CPU parallelism. Long work runs on the task worker, not here,
so a 30 s timeout only ever cuts a stuck request.
"""

from __future__ import annotations

import os


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise SystemExit(f"{name} must be at least 1, got {value}")
    return value


bind = f"{os.environ.get('HOST', '127.0.0.1')}:{_int('PORT', 8000)}"
workers = _int("WEB_CONCURRENCY", min(2 * (os.cpu_count() or 1), 8))
worker_class = "gthread"
threads = _int("GUNICORN_THREADS", 4)
timeout = _int("GUNICORN_TIMEOUT", 30)
graceful_timeout = 20
# Recycle workers now and then so a slow leak cannot grow without bound.
max_requests = 5000
max_requests_jitter = 500
accesslog = "-" if os.environ.get("GUNICORN_ACCESS_LOG", "1") == "1" else None
errorlog = "-"
# Import the app once in the arbiter: a settings error stops startup with one
# clear message instead of every worker crashing in a loop.
preload_app = True
# No control socket: its default path is per user, so two instances on one
# host (or one container user) would fight over it.
control_socket_disable = True
