"""Forget's reach into copies: stored messages matched by words, and kept API answers (SQLite).

Usage::

    .venv/bin/python bench/forget_copies.py [--sizes 1000,10000,50000] [--samples 5]

Since issue 29 a forget by words also reads the scope's stored messages
(episodes) and every purge rewrites the API answers kept for Idempotency-Key
replays that name what it purged. For each size, one scope holds that many
records *each with its own message* (bulk-inserted), and the table of kept
answers holds that many answers of about 1.2 KB (the size of a remember's
answer with metadata); the script prints the wall-clock median of
``forget_preview`` and of ``forget`` by words (each forgets 3 fresh records),
and of the kept-answer scan alone (``access.idempotency.forget_kept_answers``
for 3 IDs, none kept). Kept answers are indexed by the IDs they name, as the
middleware indexes them (``access.models.KeptAnswerName``), so the scan is an
index lookup. The database is a temporary file, deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from audit_common import configure_django
from forget_match import plant

SCOPE = "bench:copies:p0"
WORDS = ["amber", "basil", "cedar", "delta", "ember", "fjord", "grove", "heron"]


def seed(start: int, count: int) -> None:
    """``count`` active records at SCOPE, each with its message, and ``count`` kept answers."""
    from django.db import transaction

    from access import tokens
    from access.models import IdempotencyKey, KeptAnswerName
    from aetnaweb import purges
    from aetnaweb.access import SYSTEM
    from memory.models import Episode, Record

    now = datetime.now(UTC)
    token = tokens.create_token(
        principal=SYSTEM,
        name=f"bench-{start}",
        scope="bench:*:*",
        capabilities=["read", "write"],
        expires_at=now + timedelta(days=1),
    ).token
    episodes, records, answers = [], [], []
    for n in range(start, start + count):
        text = f"My note {n} is {WORDS[n % len(WORDS)]} {WORDS[(n * 7) % len(WORDS)]}."
        columns = {"scope": SCOPE, "tenant": "bench", "user": "copies", "project": "p0"}
        episodes.append(
            Episode(
                episode_id=f"ep_{n:032x}",
                source_type="user_message",
                text=text,
                created_at=now,
                **columns,
            )
        )
        records.append(
            Record(
                record_id=f"mem_{n:032x}",
                episode_id=f"ep_{n:032x}",
                source_type="user_message",
                trust_tier="trusted_user",
                confidence=0.9,
                status="active",
                content=f"User's note {n} is {WORDS[n % len(WORDS)]}.",
                content_digest=f"{n:064d}",
                created_at=now,
                updated_at=now,
                **columns,
            )
        )
        body = (
            f'{{"scope": "{SCOPE}", "episode_id": "ep_{n:032x}", "records": [{{"record_id": '
            f'"mem_{n:032x}", "status": "active", "content": "{text}", "metadata": '
            f'{{"note": "{"x" * 900}"}}}}]}}'
        ).encode()
        answers.append(
            IdempotencyKey(
                token=token,
                key=f"k-{n}",
                request_digest="0" * 64,
                created_at=now,
                expires_at=now + timedelta(days=1),
                response_status=201,
                response_content_type="application/json",
                response_body=body,
            )
        )
    with transaction.atomic():
        Episode.objects.bulk_create(episodes, batch_size=5000)
        Record.objects.bulk_create(records, batch_size=5000)
        IdempotencyKey.objects.bulk_create(answers, batch_size=2000)
        # Indexed by the IDs each names, as the middleware does when it keeps one.
        kept = IdempotencyKey.objects.filter(token=token).values_list("pk", "response_body")
        KeptAnswerName.objects.bulk_create(
            [
                KeptAnswerName(answer_id=pk, name=name)
                for pk, body in kept
                for name in purges.names_in(bytes(body))
            ],
            batch_size=5000,
        )


def main() -> None:
    from aetnaweb.access import SYSTEM

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    directory = Path(tempfile.mkdtemp(prefix="aetnaweb-bench-copies-"))
    try:
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        configure_django(directory)
        from django.db import transaction

        from access.idempotency import forget_kept_answers
        from aetnaweb.purges import PurgedContent
        from memory import services

        print(
            f"{'records+messages':>16} {'kept answers':>12} {'preview p50 ms':>15} "
            f"{'forget p50 ms':>14} {'answer scan p50 ms':>19}"
        )
        seeded = 0
        for size in sizes:
            seed(seeded, size - seeded)
            seeded = size
            previews, applies, scans = [], [], []
            for sample in range(args.samples):
                tag = f"zircon{size}x{sample}"
                plant(tag, SCOPE)
                wall = time.perf_counter()
                preview = services.forget_preview(
                    principal=SYSTEM, scope=SCOPE, selector=f"{tag} code"
                )
                previews.append(time.perf_counter() - wall)
                assert len(preview.record_ids) == 3
                wall = time.perf_counter()
                services.forget(
                    principal=SYSTEM,
                    scope=SCOPE,
                    selector=f"{tag} code",
                    expected_record_ids=list(preview.record_ids),
                    expected_episode_ids=list(preview.episode_ids),
                )
                applies.append(time.perf_counter() - wall)
                ids = tuple(f"mem_{sample:031x}z" for _ in range(3))
                wall = time.perf_counter()
                with transaction.atomic():
                    forget_kept_answers(PurgedContent(SCOPE, ids, ()))
                scans.append(time.perf_counter() - wall)
            print(
                f"{size:>16,} {size:>12,} {statistics.median(previews) * 1000:>15.1f} "
                f"{statistics.median(applies) * 1000:>14.1f} "
                f"{statistics.median(scans) * 1000:>19.1f}"
            )
        print(f"load average: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
