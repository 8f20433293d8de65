"""Gunicorn settings for ``make serve`` and the container: every knob comes from the environment.

- ``HOST`` / ``PORT``: where to listen (default ``127.0.0.1:8000``; the
  container sets ``HOST=0.0.0.0``).
- ``WEB_CONCURRENCY``: worker processes (default one per CPU core, at most 8).
- ``GUNICORN_THREADS``: threads per worker (default 1 on SQLite, 4 on
  PostgreSQL; see below).
- ``GUNICORN_TIMEOUT``: seconds before a silent worker is restarted (default 30).
- ``GUNICORN_SWITCH_INTERVAL_MS``: how often a worker's busy thread hands the
  GIL to a waiting one (default 1; Python's own default is 5).

Why gthread: the app is WSGI Django whose requests wait partly on the database;
threads in a process overlap those waits without async code, processes give
CPU parallelism, and kept-alive connections wait on the event loop, not in a
thread. The worker class is gthread with a balanced accept
(:mod:`aetnaweb.gunicorn_worker`): a worker takes a new connection only while
it has a thread free, so kept-alive clients spread over the processes
instead of piling onto one. Long work runs on the task worker, not here, so
a 30 s timeout only ever cuts a stuck request.

Why one thread on SQLite: the database is a local file, so a request waits
on nothing but the write lock (queued in the kernel, a few ms at most);
more threads only add GIL hand-overs. With one thread the worker serves
each request on its own main thread, with no pool to hand it to (see
:mod:`aetnaweb.gunicorn_worker`). With 2 workers on 2 cores
(bench/load.py, 32 clients, back to back), 1 thread gave 282-329 API req/s
at 5.2-6.1 ms of server CPU a request, and a recall p99 of 43-62 ms with 8
clients; 2 threads 228-308 req/s (5.7-7.6 ms) and 54-72 ms; 4 threads
234-240 req/s (6.9-7.3 ms) and 52-68 ms. PostgreSQL is usually across a
network, where each of a request's ~11 statements waits a round trip:
4 threads keep a core busy meanwhile. (On one shared machine, with the
database's own processes on the same 2 cores, 1, 2 and 4 threads gave the
same 116-131 req/s.)

Why a 1 ms GIL switch interval: in a gthread worker the thread that reads
the next request off a kept-alive connection, and every thread whose
database call has returned, waits for the GIL while a request thread runs
Python (the encoder, the ORM); with Python's 5 ms interval each such
hand-over can cost up to 5 ms, several times per request. At 60 req/s
offered (bench/load.py --recall-p99 --rate 60, two runs each, back to back)
1 ms gave p95 66 and 60 ms against 87 and 74, p99 106 and 91 against 140
and 111, for the same CPU per request; the closed loop's throughput did not
drop (123-125 against 111-115 req/s).

Why one process per core: recall and remember spend most of their CPU in
Python and NumPy (the sentence encoder), which the GIL serialises within a
process; more processes than cores only add context switches and memory
(3 and 4 workers on 2 cores cost more CPU a request than 2 in
bench/load.py). NumPy's BLAS is pinned to one thread per process for the
same reason: its own thread pool would compete with the other workers for
the same cores.

Why the ``pre_fork`` and ``child_exit`` hooks: they give each worker a slot in
the table where it publishes how many connections it holds, and free it when
the worker ends, so that a worker holding more than its share of kept-alive
connections can let one go to a less loaded one (see
:mod:`aetnaweb.gunicorn_worker`). With 8 kept-alive clients on 2 workers, a
5:3 split had put the recall p99 at 55-68 ms, a 4:4 one at 45-57 ms.

The embedding model and the URL configuration (every view and API module)
are loaded once in the arbiter before the workers fork (``when_ready``), so
workers share their pages and the first request of each worker does not pay
for them. Everything loaded by then is frozen out of the
garbage collector's full walks (:func:`freeze_startup_objects`).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import Any

# Before anything imports NumPy (the app is preloaded below): one BLAS/OpenMP
# thread per process, and the Rust tokenizer without its own thread pool,
# which is not safe to use across fork.
for _name in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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
workers = _int("WEB_CONCURRENCY", min(os.cpu_count() or 1, 8))
worker_class = "aetnaweb.gunicorn_worker.BalancedThreadWorker"
_DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
threads = _int(
    "GUNICORN_THREADS", 1 if _DATABASE_URL.startswith("sqlite") or not _DATABASE_URL else 4
)
timeout = _int("GUNICORN_TIMEOUT", 30)
switch_interval_ms = _int("GUNICORN_SWITCH_INTERVAL_MS", 1)
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


def when_ready(server: Any) -> None:
    """Load the embedding model in the arbiter, then freeze what is loaded, before the workers fork."""
    from django.conf import settings

    log = logging.getLogger("gunicorn.error")
    if settings.AETNAWEB_SEMANTIC_RECALL:
        from memory import embeddings

        model = embeddings.status()  # never raises: a failure means lexical recall
        log.info("embedding model %s: %s", model.model, model.detail)
    log.info("URL configuration: %d modules imported", import_url_modules())
    log.info("garbage collector: %d startup objects frozen", freeze_startup_objects())


def import_url_modules() -> int:
    """Import the URL configuration, hence every view and API module; how many modules that took.

    Django imports it at the first request a process serves: about 0.25 s
    of building the API's schemas, paid by every worker after it forks
    (and again after each ``max_requests`` recycle), with its first
    connections waiting meanwhile. Done once here, the workers inherit it.
    """
    from django.urls import get_resolver

    before = len(sys.modules)
    get_resolver().url_patterns  # noqa: B018  (the property imports the URLconf)
    return len(sys.modules) - before


def freeze_startup_objects() -> int:
    """Move every object alive now out of the garbage collector's sight; how many there are now.

    The app, Django, the model's runtime and their modules are about 110,000
    objects that live as long as the process. A full collection walks them
    all, about 55 ms with the GIL held, so every request of that worker
    stalls (it was most of the API's latency tail under load). Frozen, they
    are never walked again, and the workers forked afterwards do not write
    to their pages, which stay shared with the arbiter. Objects made later,
    per request, are collected as usual.
    """
    gc.collect()  # what is already garbage is freed, not frozen
    gc.freeze()
    return gc.get_freeze_count()


def pre_fork(server: Any, worker: Any) -> None:
    """In the arbiter: a slot in the table that keeps kept-alive connections balanced."""
    from aetnaweb.gunicorn_worker import claim_slot

    claim_slot(server, worker)


def child_exit(server: Any, worker: Any) -> None:
    """In the arbiter, after a worker has ended: its slot is free again."""
    from aetnaweb.gunicorn_worker import release_slot

    release_slot(server, worker)


def post_fork(server: Any, worker: Any) -> None:
    """In each worker: hand the GIL over every ``switch_interval_ms`` (see the module notes)."""
    sys.setswitchinterval(switch_interval_ms / 1000)
