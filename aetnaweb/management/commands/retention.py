"""``manage.py retention``: remove operational rows and files past their keep-by (never evidence).

    manage.py retention run [--dry-run] [--async]   remove (or, dry, count) what retention covers
    manage.py retention policy                      print the configured keep-by periods

``run`` executes in this process by default (what cron or a systemd timer
calls; see docs/operators.md) and prints the counts; ``--async`` queues it for
the task worker instead. Both record a job the dashboard's Maintenance page
shows, and a real run appends one ``retention.run`` audit event (counts only).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from aetnaweb import retention
from aetnaweb.access import system_principal
from jobs.services import JobError


class Command(BaseCommand):
    help = "Retention: remove expired operational rows and old export files (never evidence)."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        run = verbs.add_parser("run", help="remove what is past its keep-by and print the counts")
        run.add_argument("--dry-run", action="store_true", help="count only; remove nothing")
        run.add_argument(
            "--async", dest="queued", action="store_true", help="queue it for a worker"
        )
        run.add_argument("--actor", default="retention", help="the audit actor (default retention)")
        verbs.add_parser("policy", help="print the keep-by periods in days")

    def handle(self, *args: Any, verb: str, **options: Any) -> None:
        if verb == "policy":
            self.stdout.write(json.dumps(retention.policy(), sort_keys=True))
            return
        principal = system_principal()
        arguments = {
            "principal": principal,
            "dry_run": options["dry_run"],
            "started_by": options["actor"],
        }
        try:
            if options["queued"]:
                job = retention.start_retention(**arguments)
                job.refresh_from_db()
                if job.is_running:
                    self.stdout.write(f"queued retention job {job.pk} for the task worker")
                    return
            else:
                job = retention.run_retention_now(**arguments)
        except (JobError, ValueError, OSError) as exc:
            raise CommandError(" ".join(str(exc).split())) from exc
        if job.status != job.Status.DONE:
            raise CommandError(f"retention job {job.pk} failed: {job.error}")
        removed = job.result.get("removed", {})
        verb_done = "would remove" if job.result.get("dry_run") else "removed"
        # In the documented order (a jsonb column does not keep key order).
        summary = ", ".join(f"{removed.get(name, 0)} {name}" for name in retention.CATEGORIES)
        self.stdout.write(f"retention job {job.pk}: {verb_done} {summary}")
        memory = job.result.get("memory") or {}
        self.stdout.write(
            f"memory: {verb_done} {memory.get('records', 0)} lapsed records and "
            f"{memory.get('episodes', 0)} stored messages"
            + (f" with {len(memory['receipts'])} deletion receipts" if "receipts" in memory else "")
        )
        for held in memory.get("held", []):
            self.stdout.write(
                f"memory: kept under legal hold {held['hold_id']} at {held['scope']}: "
                f"{held['records']} records and {held['episodes']} stored messages not purged"
            )
