"""``manage.py webhooks deliver-due``: send every webhook delivery whose time has come.

The database task backend schedules retries itself (``run_after``); with the
``immediate`` backend (``make run``) or after a worker outage, run this from
cron (every minute) to send what is due.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from webhooks import services


class Command(BaseCommand):
    help = "Webhook deliveries: deliver-due sends every pending delivery that is due."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True)
        due = verbs.add_parser("deliver-due", help="Attempt every due delivery once.")
        due.add_argument("--limit", type=int, default=100, help="At most this many (100).")

    def handle(self, *args: Any, **options: Any) -> None:
        sent = services.deliver_due(limit=max(1, options["limit"]))
        self.stdout.write(f"{sent} deliveries attempted")
