"""``manage.py demo``: seed the demo data and print a login. Safe to run any number of times.

Each app contributes one idempotent ``seed_*`` function; this command calls
them in dependency order and prints what each did. Running it twice changes
nothing the second time.

To add a part, append ``(label, "module.path", "function")`` to ``PARTS``; a
module that does not exist yet is skipped with a note, so apps can land in
any order.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.core.management.base import BaseCommand

# (label, module, function): called in this order.
PARTS: tuple[tuple[str, str, str], ...] = (
    ("memory", "memory.demo", "seed_demo"),
    ("actions", "actions.demo", "seed_demo"),
)
USERS = ("operators", "aetnaweb.demo_users", "seed_users")


def _load(module: str, function: str) -> Any | None:
    try:
        return getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


class Command(BaseCommand):
    help = "Seed demo tenants, users, memory and actions (idempotent) and print a login."

    def handle(self, *args: Any, **options: Any) -> None:
        for label, module, function in PARTS:
            seed = _load(module, function)
            if seed is None:
                self.stdout.write(f"{label}: not installed yet, skipped")
                continue
            result = seed()
            self.stdout.write(
                result.describe() if hasattr(result, "describe") else f"{label}: done"
            )
        label, module, function = USERS
        seed_users = _load(module, function)
        if seed_users is None:
            self.stdout.write(f"{label}: not installed yet, no login created")
            return
        logins = seed_users()
        self.stdout.write(logins.describe())
