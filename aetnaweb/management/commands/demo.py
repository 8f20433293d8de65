"""``manage.py demo``: seed the demo data and print a login. Safe to run any number of times.

Each app contributes one idempotent ``seed_*`` function; this command calls
them in dependency order (operators first, since the actions demo needs its
approvers) and prints what each did. Running it twice changes nothing the
second time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from access.demo import seed_users
from actions.demo import seed_demo as seed_actions
from audit.notes import ensure_demo_key
from memory.demo import seed_demo as seed_memory


class Command(BaseCommand):
    help = "Seed demo tenants, users, memory and actions (idempotent) and print a login."

    def handle(self, *args: Any, **options: Any) -> None:
        logins = seed_users()
        self.stdout.write(seed_memory().describe())
        self.stdout.write(seed_actions().describe())
        self.stdout.write(ensure_demo_key(Path(settings.DATA_DIR)))
        self.stdout.write(logins.describe())
