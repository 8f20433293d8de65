"""Benchmark: remember and recall latency through MCP over streamable HTTP.

    .venv/bin/python bench/mcp_http.py [--calls 100] [--concurrency 8] [--port 8195]

Starts ``manage.py mcp --http`` (uvicorn, one process) on a throwaway SQLite
database, creates an API token, and times ``tools/call`` round trips with the
official SDK client: one session calling sequentially, then ``--concurrency``
sessions at once. Each call is one HTTP POST, authenticated against the
database, answered as JSON. Prints p50/p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import ROOT, benchmark_environment, configure_django

from aetnaweb.access import SYSTEM


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def session_calls(url: str, secret: str, calls: int, worker: int) -> dict[str, list[float]]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    timings: dict[str, list[float]] = {"remember": [], "recall": []}
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for n in range(calls):
            for tool, arguments in (
                ("remember", {"text": f"My locker number {worker}-{n} is {n * 7}."}),
                ("recall", {"query": f"locker number {worker}-{n}"}),
            ):
                started = time.perf_counter()
                result = await session.call_tool(tool, arguments)
                timings[tool].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise RuntimeError(f"{tool} failed: {result.content}")
    return timings


async def run_sessions(url: str, secret: str, calls: int, sessions: int) -> dict[str, list[float]]:
    merged: dict[str, list[float]] = {"remember": [], "recall": []}

    async def one(worker: int) -> None:
        timings = await session_calls(url, secret, calls, worker)
        for tool, samples in timings.items():
            merged[tool].extend(samples)

    async with anyio.create_task_group() as group:
        for worker in range(sessions):
            group.start_soon(one, worker)
    return merged


def report(label: str, timings: dict[str, list[float]]) -> None:
    for tool, samples in timings.items():
        print(
            f"{label:<24} {tool:<9} n={len(samples):<5} p50={statistics.median(samples):7.1f} ms"
            f"  p95={percentile(samples, 0.95):7.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per tool per session")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--port", type=int, default=8195, help="a free port (8190-8199 here)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        configure_django(directory)
        # Django's logging config prints every client request at INFO; keep the figures readable.
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        from django.utils import timezone

        from access import tokens

        secret = tokens.create_token(
            principal=SYSTEM,
            name="bench",
            scope="acme:alice:proj",
            capabilities=["read", "write"],
            expires_at=timezone.now() + timedelta(hours=1),
        ).secret
        env = {**os.environ, **benchmark_environment(directory)}
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "mcp", "--http", "--port", str(args.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            import httpx2

            base = f"http://127.0.0.1:{args.port}"
            for _ in range(100):
                try:
                    httpx2.get(f"{base}/healthz", timeout=1)
                    break
                except httpx2.TransportError:
                    time.sleep(0.2)
            url = f"{base}/mcp/"
            print(f"MCP over streamable HTTP, SQLite, one uvicorn process, {args.calls} calls/tool")
            report("sequential (1 session)", anyio.run(run_sessions, url, secret, args.calls, 1))
            report(
                f"{args.concurrency} concurrent sessions",
                anyio.run(run_sessions, url, secret, args.calls, args.concurrency),
            )
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
