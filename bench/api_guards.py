"""Benchmark: what the per-token rate limit and an Idempotency-Key cost per API request.

    .venv/bin/python bench/api_guards.py [--requests 2000]

On a temporary SQLite database (set DATABASE_URL for PostgreSQL), prints the
mean and p95 time of: ``ratelimits.consume`` alone (one upsert), and
``GET /api/v1/token`` through the test client with the limit off, with it
on, and a ``POST /api/v1/memory/recall`` with and without a fresh
Idempotency-Key (claim + answer stored: two more statements).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_common import configure_django

from aetnaweb.access import SYSTEM


def timed(label: str, count: int, call: Callable[[], object]) -> None:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p95 = samples[int(len(samples) * 0.95) - 1]
    print(f"{label:<48} mean {statistics.fmean(samples):7.3f} ms  p95 {p95:7.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        configure_django(Path(directory))
        from django.conf import settings
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.utils import timezone

        from access import ratelimits, tokens
        from access.models import ApiToken

        setup_test_environment()
        settings.ALLOWED_HOSTS = ["testserver"]
        issued = tokens.create_token(
            principal=SYSTEM,
            name="bench",
            scope="acme:alice:*",
            capabilities=["read", "write"],
            expires_at=timezone.now() + timedelta(days=1),
        )
        token = ApiToken.objects.get()
        client = Client()
        auth = {"Authorization": f"Bearer {issued.secret}"}
        n = args.requests
        settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 10**9
        timed("ratelimits.consume (one upsert)", n, lambda: ratelimits.consume(token))
        settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 0
        timed("GET /token, rate limit off", n, lambda: client.get("/api/v1/token", headers=auth))
        settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 10**9
        timed("GET /token, rate limit on", n, lambda: client.get("/api/v1/token", headers=auth))
        body = json.dumps({"scope": "acme:alice:proj", "query": "deploy window"})

        def recall(key: bool) -> object:
            headers = {**auth, "Idempotency-Key": str(uuid.uuid4())} if key else auth
            return client.post(
                "/api/v1/memory/recall", body, content_type="application/json", headers=headers
            )

        timed("POST /memory/recall, no Idempotency-Key", n // 4, lambda: recall(False))
        timed("POST /memory/recall, fresh Idempotency-Key", n // 4, lambda: recall(True))


if __name__ == "__main__":
    main()
