"""Client latency benchmark: remember and recall through aetnaweb-client, p50/p95.

Usage::

    .venv/bin/python bench/client_latency.py [--requests 200] [--port 8181]
    .venv/bin/python bench/client_latency.py --url http://127.0.0.1:8000 --token aetna_...

Without ``--url`` it starts its own server (``manage.py runserver`` on
127.0.0.1:PORT, threaded, no autoreload) on a fresh SQLite database in a
temporary directory, with ``DATABASE_URL`` passed through if set, issues a
token for ``bench:*:*`` and stops the server afterwards. It measures, each
over ``--requests`` calls at one project scope (``bench:u:p``):

- remember (a new fact each call) and recall (a query over what was stored),
  sequential, through ``Client``;
- the same with 8 concurrent callers, through ``AsyncClient`` and
  ``asyncio.gather`` (8 in flight at a time).

It prints the median and 95th percentile wall-clock latency per call and the
throughput. These are development-server figures (runserver, one process):
they show the client's and the API's cost, not a tuned deployment's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))

from aetnaweb_client import ApiError, AsyncClient, Client, TransportError  # noqa: E402

SCOPE = "bench:u:p"
CONCURRENCY = 8


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(label: str, latencies: list[float], elapsed: float) -> None:
    p50 = statistics.median(latencies) * 1000
    p95 = percentile(latencies, 0.95) * 1000
    rate = len(latencies) / elapsed
    print(f"{label:<28} n={len(latencies):<5} p50={p50:7.1f} ms  p95={p95:7.1f} ms  {rate:6.1f}/s")


def sequential(url: str, token: str, count: int, offset: int) -> None:
    with Client(url, token=token) as client:
        for name, call in (
            (
                "remember (sequential)",
                lambda i: client.remember(SCOPE, f"My note {i} is kept {i}", force=True),
            ),
            ("recall (sequential)", lambda i: client.recall(SCOPE, f"note {i} kept")),
        ):
            latencies = []
            began = time.perf_counter()
            for index in range(offset, offset + count):
                start = time.perf_counter()
                call(index)
                latencies.append(time.perf_counter() - start)
            report(name, latencies, time.perf_counter() - began)


async def concurrent(url: str, token: str, count: int, offset: int) -> None:
    async with AsyncClient(url, token=token, timeout=120) as client:
        limit = asyncio.Semaphore(CONCURRENCY)

        async def timed(coro_factory, index: int) -> float:
            async with limit:
                start = time.perf_counter()
                await coro_factory(index)
                return time.perf_counter() - start

        for name, factory in (
            (
                f"remember ({CONCURRENCY} concurrent)",
                lambda i: client.remember(SCOPE, f"My item {i} is stored {i}", force=True),
            ),
            (
                f"recall ({CONCURRENCY} concurrent)",
                lambda i: client.recall(SCOPE, f"item {i} stored"),
            ),
        ):
            began = time.perf_counter()
            latencies = await asyncio.gather(
                *(timed(factory, index) for index in range(offset, offset + count))
            )
            report(name, list(latencies), time.perf_counter() - began)


def free_port(preferred: int) -> int:
    for port in range(preferred, 8190):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise SystemExit("no free port in 8180-8189")


def start_server(port: int, data_dir: str) -> tuple[subprocess.Popen[bytes], str, str]:
    env = {**os.environ, "AETNAWEB_DATA_DIR": data_dir}
    python = sys.executable
    manage = str(ROOT / "manage.py")
    subprocess.run([python, manage, "migrate", "--noinput", "-v", "0"], env=env, check=True)
    made = subprocess.run(
        [
            python,
            manage,
            "access",
            "token",
            "create",
            "--name",
            "bench",
            "--scope",
            "bench:*:*",
            "--capabilities",
            "read,write",
            "--expires-days",
            "1",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    token = made.stdout.strip().splitlines()[-1]
    server = subprocess.Popen(
        [python, manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            with Client(url, token=token, retries=0) as probe:
                probe.whoami()
            return server, url, token
        except (TransportError, ApiError):  # not up yet
            time.sleep(0.1)
    server.terminate()
    raise SystemExit("the server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--port", type=int, default=8181)
    parser.add_argument("--url")
    parser.add_argument("--token")
    args = parser.parse_args()
    server = None
    with tempfile.TemporaryDirectory(prefix="aetnaweb-bench-") as data_dir:
        if args.url:
            url, token = args.url, args.token or os.environ["AETNAWEB_TOKEN"]
        else:
            server, url, token = start_server(free_port(args.port), data_dir)
        try:
            print(f"server {url}, scope {SCOPE}, {args.requests} calls per line")
            sequential(url, token, args.requests, 0)
            asyncio.run(concurrent(url, token, args.requests, args.requests))
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)


if __name__ == "__main__":
    main()
