"""Load benchmark: concurrent clients against the production server (gunicorn, make serve's config).

Usage::

    .venv/bin/python bench/load.py [--db sqlite|postgres] [--instances 1|2]
        [--clients 32] [--api-requests 6000] [--page-requests 600]
        [--workers N] [--threads N] [--port 8150] [--rate R]
        [--postgres-url postgres://aetnaweb:aetnaweb@127.0.0.1:5432/postgres]
    .venv/bin/python bench/load.py --recall-p99     # issue 12's measurement
    .venv/bin/python bench/load.py --recall-p99 --rate 60

``--recall-p99`` is issue 12's "reads don't queue behind writes" measurement:
8 concurrent clients, the same remember/recall mix, no pages phase; the
figure to read is the recall line's p99 (target <= 50 ms on SQLite).
By default the clients run a closed loop (each sends again the moment it is
answered), which saturates the machine: on 2 cores the mean latency is then
``clients / throughput`` (Little's law), about 50 ms at 8 clients whatever
the database does, so that run's p99 mostly measures queueing for a core.
``--rate R`` offers R API requests per second in all instead, at random
(Poisson) times planned in advance, and counts each latency from its planned
time: below saturation, what remains of the tail is what requests wait for
each other (the write lock, the GIL), which is what the target is about.
``--workers``/``--threads`` default to make serve's (aetnaweb/gunicorn_conf.py).

What it does, all on loopback:

1. makes a fresh database (a SQLite file in a temporary folder, or a new
   PostgreSQL database ``aetnaweb_load_<pid>``, dropped at the end), migrates
   it and seeds an admin account and an API token (``read``, ``write`` on
   ``load:*:*``) through the project's own services;
2. starts ``--instances`` gunicorn servers with production settings (each
   ``--workers`` processes x ``--threads`` threads), on ports from ``--port``;
3. API phase: ``--clients`` concurrent clients (keep-alive HTTP/1.1
   connections on asyncio, one client process per 32, spread over the
   instances) send ``--api-requests``
   requests in total, half ``POST /api/v1/memory/remember`` (a fact, in one of
   24 scopes, so 24 audit chains take concurrent appends) and half
   ``POST /api/v1/memory/recall``; the token's rate limit is high enough never
   to refuse, but it is counted as in production;
4. pages phase: signed-in clients fetch the overview, memory, review queue,
   audit explorer and actions pages, ``--page-requests`` in total;
5. stops the servers, greps their logs for ``database is locked``, and verifies
   every audit chain (``verify_all``) plus a direct SQL check that no two events
   of a chain share a ``prev_hash`` (a fork).

Prints req/s, p50/p95/p99 latency and the error count per phase and, for the
API phase, per endpoint (remember, recall), plus the servers' CPU time per
request (user + system of the gunicorn processes, reaped workers included,
over the phase): on a shared machine that figure is not inflated by load the
way latency is. The clients run on the same machine as the servers, so they
take CPU from them: the figures are a floor for what the server alone could do.
Their own CPU a request is printed too (``clients``, 0.2-0.3 ms).
Per phase it also prints the fastest and the slowest client's median latency
(in a closed loop every client should wait about as long: a wide range means
the connections are split unevenly over the workers) and how many kept-alive
connections the server closed to rebalance them.
Before the clients start, it prints how long the sentence encoder alone takes
for one of the texts the API phase remembers (CPU, warm): a gauge of the
machine's speed at the time, which on a shared machine swings by a third
within minutes (about 1.1 ms in a fast hour, 1.8 ms in a slow one), so runs
taken at different times can be read side by side.
Target on 2 cores: >= 300 API req/s, 0 errors, no "database is locked".
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import random
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

from audit_common import drop_database

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
SCOPES = [f"load:u{n:02d}:proj" for n in range(24)]
PAGES = ["/", "/memory/", "/memory/review/", "/audit/", "/actions/"]
ADMIN = ("load-admin", "load-Admin-pw-2718!")

SEED = """
import json, sys
from datetime import timedelta
import django
django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from access import grants, tokens
from aetnaweb.access import SYSTEM
from memory import services
username, password = sys.argv[1], sys.argv[2]
user = get_user_model().objects.create_user(username=username, password=password)
grants.grant_role(principal=SYSTEM, user=user, scope="platform:*:*", role="admin")
issued = tokens.create_token(
    principal=SYSTEM, name="load", scope="load:*:*", capabilities=["read", "write"],
    expires_at=timezone.now() + timedelta(days=1), rate_limit_per_minute=1_000_000,
)
for n, scope in enumerate(%(scopes)r):
    services.remember_fact(
        principal=SYSTEM, scope=scope, key=f"seed {n}", value=f"deploy window {n}", actor="bench"
    )
print(json.dumps({"token": issued.secret}))
"""

# The machine's speed at the time of the run, for reading its figures: this
# shared machine's speed swings by a third within minutes. The encoder, warm,
# on the texts the API phase remembers (it is 30-45 % of a request's CPU).
ENCODER_SPEED = """
import json, time
import django
django.setup()
from memory import embeddings
texts = [f"fact {n}: value {n} of the load run" for n in range(400)]
for text in texts[:100]:
    embeddings.embed(text)
started = time.process_time()
for text in texts[100:]:
    embeddings.embed(text)
print(json.dumps({"ms": round((time.process_time() - started) / 300 * 1000, 3)}))
"""

VERIFY = """
import json
import django
django.setup()
from django.db import connection
from aetnaweb.access import SYSTEM
from audit.verification import verify_all
report = verify_all(principal=SYSTEM)
with connection.cursor() as cursor:
    cursor.execute(
        "SELECT COUNT(*) FROM (SELECT subject_id, prev_hash FROM audit_log"
        " GROUP BY subject_id, prev_hash HAVING COUNT(*) > 1) AS forks"
    )
    forks = cursor.fetchone()[0]
print(json.dumps({"ok": report.ok, "chains": len(report.subjects),
                  "events": report.events_checked, "failed": len(report.failed), "forks": forks,
                  "failed_subjects": [r.subject_id for r in report.failed]}))
"""


# -- servers ---------------------------------------------------------------------------


def server_env(database_url: str, data_dir: Path) -> dict[str, str]:
    keep = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"}
    env = {key: value for key, value in os.environ.items() if key in keep}
    return env | {
        "AETNAWEB_ENV": "production",
        "AETNAWEB_DATA_DIR": str(data_dir),
        "STATIC_ROOT": str(data_dir / "staticfiles"),
        "DATABASE_URL": database_url,
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "GUNICORN_ACCESS_LOG": "0",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "aetnaweb.settings",
    }


def manage(env: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [PYTHON, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def wait_healthy(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"server on port {port} did not become healthy")


# -- clients ---------------------------------------------------------------------------


class Client:
    """One keep-alive connection; session cookies kept by hand (they are Secure in
    production, which http.cookiejar would not send over plain HTTP)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A worker recycled (max_requests) between two keep-alive requests.
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                cookie = value.split(";", 1)[0]
                key, _, val = cookie.partition("=")
                self.cookies[key.strip()] = val.strip()
        return response.status, data

    def sign_in(self) -> None:
        status, body = self.request("GET", "/login/")
        match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
        if status != 200 or match is None:
            raise RuntimeError(f"login page answered {status}")
        form = urlencode(
            {
                "csrfmiddlewaretoken": match.group(1).decode(),
                "username": ADMIN[0],
                "password": ADMIN[1],
            }
        ).encode()
        status, _ = self.request(
            "POST",
            "/login/",
            form,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Referer": f"http://127.0.0.1:{self.port}/login/",
            },
        )
        if status != 302:
            raise RuntimeError(f"sign-in answered {status}")


class RawConnection:
    """One keep-alive HTTP/1.1 connection on asyncio streams: the load generator's client.

    It writes each request as one prepared byte string and reads the answer by
    its Content-Length (or chunks), nothing more: 0.2-0.3 ms of CPU a request,
    which matters because the clients share the machine's cores with the
    server they measure (their CPU a request is printed beside the server's).
    Cookies (the pages phase's session) are sent as given; the sign-in itself
    goes through :class:`Client`.
    """

    def __init__(self, port: int, cookie: str = "") -> None:
        self.port = port
        self.prefix = f"Host: 127.0.0.1:{port}\r\n" + (f"Cookie: {cookie}\r\n" if cookie else "")
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.closed_by_server = 0  # answers that came with "Connection: close"

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self.reader, self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes, headers: str) -> tuple[int, bytes]:
        raw = (
            f"{method} {path} HTTP/1.1\r\n{self.prefix}{headers}Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for attempt in range(2):
            reader, writer = (
                (self.reader, self.writer) if self.writer is not None else await self._open()
            )
            assert reader is not None
            try:
                writer.write(raw)
                head = await reader.readuntil(b"\r\n\r\n")
                break
            except (asyncio.IncompleteReadError, ConnectionError):
                # A worker recycled (max_requests) between two keep-alive requests:
                # nothing of this request was read, so it is sent once more.
                self.close()
                if attempt:
                    raise
        status = int(head[9:12])
        fields = head.lower()
        match = re.search(rb"\r\ncontent-length: *(\d+)", fields)
        if match is not None:
            data = await reader.readexactly(int(match.group(1)))
        elif b"\r\ntransfer-encoding: chunked" in fields:
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append((await reader.readexactly(size + 2))[:-2])
            await reader.readuntil(b"\r\n")
            data = b"".join(parts)
        else:
            data = await reader.read()
            self.close()
        if b"\r\nconnection: close" in fields:
            self.closed_by_server += 1
            self.close()
        return status, data


# --dense N: this many records in one scope, seeded before the servers start
# (bench/memory_scale.py's dense scope, its template and bulk seeding). The
# count reaches the client processes through the environment.
DENSE_SCOPE = "load:dense:p0"
DENSE_ENV = "AETNAWEB_LOAD_DENSE"

SEED_DENSE = """
import sys
import django
django.setup()
sys.path.insert(0, %(bench)r)
import memory_scale
memory_scale.DENSE_SCOPE = %(scope)r
memory_scale.seed_dense(0, %(count)d)
print("seeded")
"""


def api_job(n: int) -> tuple[str, str, bytes]:
    scope = SCOPES[n % len(SCOPES)]
    if n % 2 == 0:
        body = {"scope": scope, "key": f"fact {n}", "value": f"value {n} of the load run"}
        return "POST", "/api/v1/memory/remember", json.dumps(body).encode()
    dense = int(os.environ.get(DENSE_ENV, "0"))
    if dense:
        # A project of the dense scope; a prime stride spreads the questions over it.
        question = f"What codename does project {(n * 7919) % dense} use?"
        body = {"scope": DENSE_SCOPE, "query": question, "limit": 5}
        return "POST", "/api/v1/memory/recall", json.dumps(body).encode()
    body = {"scope": scope, "query": "deploy window", "limit": 5}
    return "POST", "/api/v1/memory/recall", json.dumps(body).encode()


def client_process(
    phase: str,
    ports: list[int],
    token: str,
    jobs: list[int],
    connections: int,
    queue: object,
    ready: object,
    rate_per_client: float = 0.0,
) -> None:
    """Run ``jobs`` (request numbers) over ``connections`` keep-alive clients; report timings.

    ``rate_per_client`` 0: each client sends its next request as soon as the
    last one is answered (closed loop: the server is saturated, and latency is
    mostly waiting for a core). Above 0: each client sends at that mean rate,
    at Poisson-distributed times fixed in advance (open loop), and a request's
    latency counts from its planned send time, so a server that falls behind
    is charged for the requests that queued at the client too.
    """
    errors: list[str] = []

    def sign_in(index: int) -> str | None:
        """The session cookie of a signed-in client (pages phase), or None after an error."""
        client = Client(ports[index % len(ports)])
        try:
            client.sign_in()
        except Exception as exc:
            errors.append(f"sign-in: {exc}")
            return None
        return "; ".join(f"{k}={v}" for k, v in client.cookies.items())

    cookies: list[str | None] = [""] * connections
    if phase == "pages":
        # Sign-ins (a deliberately slow password hash) happen before the clock starts.
        with ThreadPoolExecutor(max_workers=connections) as pool:
            cookies = list(pool.map(sign_in, range(connections)))
    # The clients take their next request from one shared list, so all of
    # them keep sending until the last request: a client whose connection a
    # quicker worker serves sends more of them, as with a timed run (wrk's
    # --duration) instead of one that ends with only the slowest clients left.
    pending = iter(jobs)
    latencies: list[tuple[str, float]] = []
    per_client: list[list[float]] = [[] for _ in range(connections)]
    api_headers = f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"

    async def run(index: int) -> int:
        """One client's requests; how many of its answers closed the connection."""
        cookie = cookies[index]
        if cookie is None:
            return 0
        client = RawConnection(ports[index % len(ports)], cookie)
        pacing = random.Random(index)
        planned = time.perf_counter()
        for n in pending:
            if phase == "api":
                method, path, body = api_job(n)
                headers = api_headers
            else:
                method, path, body, headers = "GET", PAGES[n % len(PAGES)], b"", ""
            if rate_per_client:
                planned += pacing.expovariate(rate_per_client)
                await asyncio.sleep(max(0.0, planned - time.perf_counter()))
                start = planned
            else:
                start = time.perf_counter()
            try:
                status, data = await client.request(method, path, body, headers)
            except Exception as exc:
                errors.append(f"{path}: {type(exc).__name__}")
                client.close()
                continue
            elapsed = time.perf_counter() - start
            latencies.append((path, elapsed))
            per_client[index].append(elapsed)
            if status not in (200, 201):
                errors.append(f"{path}: HTTP {status} {data[:120]!r}")
        client.close()
        return client.closed_by_server

    async def run_all() -> int:
        return sum(await asyncio.gather(*(run(i) for i in range(connections))))

    ready.wait()  # type: ignore[attr-defined]
    cpu_start, start = time.process_time(), time.perf_counter()
    closed_by_server = asyncio.run(run_all())
    end, cpu = time.perf_counter(), time.process_time() - cpu_start
    client_p50s = [statistics.median(times) for times in per_client if times]
    queue.put((latencies, errors, start, end, cpu, client_p50s, closed_by_server))  # type: ignore[attr-defined]


def drive(
    phase: str,
    ports: list[int],
    token: str,
    total: int,
    clients: int,
    server_pids: list[int],
    rate: float = 0.0,
) -> dict[str, object]:
    # One asyncio process drives up to 32 connections with a few % of a core.
    processes = max(1, -(-clients // 32))
    per_process = max(1, clients // processes)
    queue: multiprocessing.Queue = multiprocessing.Queue()
    ready = multiprocessing.Barrier(processes + 1)
    jobs = list(range(total))
    procs = [
        multiprocessing.Process(
            target=client_process,
            args=(
                phase,
                ports[i % len(ports) :] + ports[: i % len(ports)],
                token,
                jobs[i::processes],
                per_process,
                queue,
                ready,
                rate / (processes * per_process) if rate else 0.0,
            ),
        )
        for i in range(processes)
    ]
    for proc in procs:
        proc.start()
    timed: list[tuple[str, float]] = []
    errors: list[str] = []
    starts: list[float] = []
    ends: list[float] = []
    client_cpu = 0.0
    client_p50s: list[float] = []
    closed_by_server = 0
    ready.wait()  # every client signed in (pages phase): the clock starts
    cpu_before = server_cpu_seconds(server_pids)
    for _ in procs:
        got_latencies, got_errors, start, end, cpu_used, got_p50s, got_closed = queue.get()
        client_p50s += got_p50s
        closed_by_server += got_closed
        timed += got_latencies
        errors += got_errors
        starts.append(start)
        ends.append(end)
        client_cpu += cpu_used
    for proc in procs:
        proc.join()
    cpu = server_cpu_seconds(server_pids) - cpu_before
    # perf_counter is system-wide (CLOCK_MONOTONIC) on Linux, so spans from
    # different client processes compare.
    wall = max(ends) - min(starts)
    result = summary(phase, [elapsed for _, elapsed in timed], wall)
    result |= {
        "server_cpu_ms_per_request": round(1000 * cpu / len(timed), 2) if timed else None,
        "client_cpu_ms_per_request": round(1000 * client_cpu / len(timed), 2) if timed else None,
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:5],
        # Fairness: the fastest and the slowest client's median latency, and
        # how often the server closed a kept-alive connection (to rebalance it).
        "client_p50_ms": [round(1000 * min(client_p50s), 1), round(1000 * max(client_p50s), 1)]
        if client_p50s
        else None,
        "connections_closed_by_server": closed_by_server,
    }
    if phase == "api":
        result["endpoints"] = [
            summary(path.rsplit("/", 1)[-1], [e for p, e in timed if p == path], wall)
            for path in sorted({p for p, _ in timed})
        ]
    return result


def summary(label: str, latencies: list[float], wall: float) -> dict[str, object]:
    latencies = sorted(latencies)

    def pct(p: float) -> float:
        if not latencies:
            return float("nan")
        return 1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {
        "phase": label,
        "requests": len(latencies),
        "seconds": round(wall, 2),
        "req_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(pct(0.50), 1),
        "p95_ms": round(pct(0.95), 1),
        "p99_ms": round(pct(0.99), 1),
        "mean_ms": round(1000 * statistics.fmean(latencies), 1) if latencies else None,
    }


def server_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of gunicorn arbiters ``pids`` and their workers, reaped ones included."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total = 0
    for pid in pids:
        fields = stats.get(pid)
        if fields is None:
            continue
        # utime, stime, cutime, cstime (fields 14-17 of proc(5)); the arbiter
        # reaps recycled workers, so their CPU shows in cutime/cstime.
        total += sum(int(value) for value in fields[11:15])
        for child in children.get(pid, []):
            total += sum(int(value) for value in stats[child][11:13])
    return total / tick


# -- main ------------------------------------------------------------------------------


def postgres_database(admin_url: str, name: str, *, create: bool) -> str:
    import psycopg

    if create:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    else:
        drop_database(admin_url, name)
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--instances", type=int, choices=[1, 2], default=1)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--api-requests", type=int, default=6000)
    parser.add_argument("--page-requests", type=int, default=600)
    parser.add_argument("--workers", type=int, help="gunicorn workers per instance")
    parser.add_argument("--threads", type=int, help="threads per gunicorn worker")
    parser.add_argument("--port", type=int, default=8150)
    parser.add_argument(
        "--recall-p99",
        action="store_true",
        help="issue 12's measurement: 8 clients, API phase only (read the recall p99)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="API requests per second offered by all clients together, at Poisson times"
        " (open loop); 0 (default): every client sends again as soon as it is answered",
    )
    parser.add_argument(
        "--dense",
        type=int,
        default=0,
        help="seed this many records in one scope first; recalls then ask that scope"
        " (issue 31: recall p99 at 100k records under 8 clients)",
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "AETNAWEB_BENCH_POSTGRES", "postgres://aetnaweb:aetnaweb@127.0.0.1:5432/postgres"
        ),
    )
    args = parser.parse_args()
    if args.recall_p99:
        args.clients, args.page_requests = 8, 0
    if not 8150 <= args.port <= 8189 - args.instances + 1:
        sys.exit("--port must keep every instance within 8150-8189")

    work = Path(tempfile.mkdtemp(prefix="aetnaweb-load-"))
    db_name = f"aetnaweb_load_{os.getpid()}"
    if args.db == "sqlite":
        database_url = f"sqlite:///{work / 'load.sqlite3'}"
    else:
        database_url = postgres_database(args.postgres_url, db_name, create=True)
    env = server_env(database_url, work)
    servers: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    try:
        manage(env, "manage.py", "migrate", "--noinput")
        manage(env, "manage.py", "collectstatic", "--noinput", "--verbosity", "0")
        seeded = json.loads(
            manage(env, "-c", SEED % {"scopes": SCOPES}, *ADMIN).strip().splitlines()[-1]
        )
        if args.dense:
            started = time.monotonic()
            manage(
                env,
                "-c",
                SEED_DENSE
                % {"bench": str(ROOT / "bench"), "scope": DENSE_SCOPE, "count": args.dense},
            )
            os.environ[DENSE_ENV] = str(args.dense)
            print(
                f"  seeded {args.dense} records in {DENSE_SCOPE} "
                f"in {time.monotonic() - started:.0f} s"
            )
        encoder_ms = json.loads(manage(env, "-c", ENCODER_SPEED).strip().splitlines()[-1])["ms"]
        ports = [args.port + i for i in range(args.instances)]
        for port in ports:
            log = work / f"gunicorn-{port}.log"
            logs.append(log)
            servers.append(
                subprocess.Popen(
                    [GUNICORN, "--config", "python:aetnaweb.gunicorn_conf", "aetnaweb.wsgi"],
                    cwd=ROOT,
                    env=env
                    | {"HOST": "127.0.0.1", "PORT": str(port)}
                    | ({"WEB_CONCURRENCY": str(args.workers)} if args.workers else {})
                    | ({"GUNICORN_THREADS": str(args.threads)} if args.threads else {}),
                    stdout=log.open("wb"),
                    stderr=subprocess.STDOUT,
                )
            )
        deadline = time.monotonic() + 60
        for port in ports:
            wait_healthy(port, deadline)
        print(
            f"load: {args.db}, {args.instances} instance(s) x {args.workers or 'default'} "
            f"workers x {args.threads or 'default'} threads, {args.clients} clients"
            + (f" offering {args.rate:g} API req/s" if args.rate else " (closed loop)")
            + f", cpus={os.cpu_count()}"
        )
        print(f"  machine: the encoder alone takes {encoder_ms} ms of CPU a text (warm)")
        pids = [server.pid for server in servers]
        results = [
            drive("api", ports, seeded["token"], args.api_requests, args.clients, pids, args.rate)
        ]
        if args.page_requests:
            results.append(
                drive(
                    "pages", ports, seeded["token"], args.page_requests, min(args.clients, 16), pids
                )
            )
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
        for server in servers:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    locked = sum(log.read_text(errors="replace").count("database is locked") for log in logs)
    verified = json.loads(manage(env, "-c", VERIFY).strip().splitlines()[-1])
    for result in results:
        print(
            f"  {result['phase']:<6} {result['requests']:>6} req in {result['seconds']:>7.2f} s:"
            f" {result['req_per_s']:>7.1f} req/s  p50 {result['p50_ms']} ms  p95 {result['p95_ms']} ms"
            f"  p99 {result['p99_ms']} ms  errors {result['errors']}"
            f"  server CPU {result['server_cpu_ms_per_request']} ms/req"
            f" (clients {result['client_cpu_ms_per_request']})"
        )
        if result["client_p50_ms"]:
            low, high = result["client_p50_ms"]  # type: ignore[misc]
            print(
                f"    clients' p50 from {low} to {high} ms;"
                f" connections closed by the server: {result['connections_closed_by_server']}"
            )
        for endpoint in result.get("endpoints", []):  # type: ignore[attr-defined]
            print(
                f"    {endpoint['phase']:<9} {endpoint['requests']:>6} req  p50 {endpoint['p50_ms']} ms"
                f"  p95 {endpoint['p95_ms']} ms  p99 {endpoint['p99_ms']} ms"
            )
        for sample in result["error_samples"]:  # type: ignore[union-attr]
            print(f"         e.g. {sample}")
    print(f"  'database is locked' in server logs: {locked}")
    print(
        f"  chains verified: ok={verified['ok']} chains={verified['chains']} "
        f"events={verified['events']} failed={verified['failed']} forks={verified['forks']}"
    )
    if args.dense:
        # The dense records are bulk-inserted in SQL without their audit events
        # (memory_scale.seed_dense), so that scope's chain cannot verify; any
        # other failed chain is a real failure of the run.
        others = [s for s in verified["failed_subjects"] if DENSE_SCOPE not in s]
        print(
            f"  (--dense: failed chains {verified['failed_subjects']}; "
            f"outside the bulk-seeded scope: {len(others)})"
        )
    print(
        json.dumps(
            {
                "db": args.db,
                "instances": args.instances,
                "encoder_ms_per_text": encoder_ms,
                "results": results,
                "database_is_locked": locked,
                "verify": verified,
            }
        )
    )
    if args.db == "postgres":
        postgres_database(args.postgres_url, db_name, create=False)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
