"""Demo operator accounts for ``manage.py demo``.

:func:`seed_users` creates, once, an ``admin`` superuser with the admin role on
``platform:*:*`` and a few operators with one role each on the demo tenants
``acme`` and ``globex``, so every dashboard page can be tried with the role it
needs. All demo accounts share one password, generated the first time and
kept in ``data/demo_login.txt`` (mode 0600). Running it again changes
nothing; the password is regenerated only when that file is missing.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from access.grants import grant_role
from access.models import Role, ScopeGrant
from aetnaweb.access import SYSTEM

ADMIN_USERNAME = "admin"

# (username, [(scope, role), ...]): one person per role, so each page can be seen
# by exactly the role it is for.
DEMO_OPERATORS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("vera", (("acme:*:*", Role.VIEWER),)),
    ("rita", (("acme:*:*", Role.REVIEWER),)),
    ("april", (("acme:*:*", Role.APPROVER),)),
    ("otto", (("acme:*:*", Role.AUDITOR), ("globex:*:*", Role.AUDITOR))),
    ("gus", (("globex:*:*", Role.REVIEWER), ("globex:*:*", Role.APPROVER))),
)


@dataclass(frozen=True)
class DemoLogins:
    """What ``manage.py demo`` prints: who can sign in, with which password, and where it is kept."""

    usernames: tuple[str, ...]
    password: str
    login_file: Path
    created: tuple[str, ...]  # accounts created by this run (empty on a second run)

    def describe(self) -> str:
        others = ", ".join(name for name in self.usernames if name != ADMIN_USERNAME)
        return (
            f"Sign in as {ADMIN_USERNAME} (or {others}) with password: {self.password}\n"
            f"(kept in {self.login_file}; delete that file and run `manage.py demo` for a new one)"
        )


def login_file_path() -> Path:
    return Path(settings.DATA_DIR) / "demo_login.txt"


def _read_password(path: Path) -> str | None:
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        if line.startswith("password:"):
            value = line.split(":", 1)[1].strip()
            return value or None
    return None


def _write_password(path: Path, password: str, usernames: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(
            "# aetnaweb demo logins (development only). Delete this file and run\n"
            "# `manage.py demo` to set a new password on every demo account.\n"
            f"users: {' '.join(usernames)}\n"
            f"password: {password}\n"
        )
    os.chmod(path, 0o600)


@transaction.atomic
def seed_users(*, login_file: Path | None = None) -> DemoLogins:
    """Create the demo accounts and grants that are missing; idempotent.

    Grants go through :func:`access.grants.grant_role`, so they are audited
    like any other; an existing account keeps its password unless the login
    file is missing, in which case every demo account gets the new one.
    """
    path = login_file or login_file_path()
    usernames = (ADMIN_USERNAME, *(name for name, _ in DEMO_OPERATORS))
    password = _read_password(path)
    new_password = password is None
    if password is None:
        password = secrets.token_urlsafe(12)

    user_model = get_user_model()
    created: list[str] = []
    wanted: list[tuple[Any, str, str]] = []
    for username in usernames:
        user = user_model.objects.filter(username=username).first()
        if user is None:
            if username == ADMIN_USERNAME:
                user = user_model.objects.create_superuser(username=username, password=password)
            else:
                user = user_model.objects.create_user(username=username, password=password)
            created.append(username)
        elif new_password:
            user.set_password(password)
            user.save(update_fields=["password"])
        if username == ADMIN_USERNAME:
            wanted.append((user, "platform:*:*", Role.ADMIN))
        else:
            for scope, role in dict(DEMO_OPERATORS)[username]:
                wanted.append((user, scope, role))

    for user, scope, role in wanted:
        if not ScopeGrant.objects.filter(user=user, scope=scope, role=role).exists():
            grant_role(principal=SYSTEM, user=user, scope=scope, role=role)

    if new_password:
        # Written last: if anything above fails, the transaction rolls back and
        # the next run starts again from a missing file.
        _write_password(path, password, usernames)
    return DemoLogins(
        usernames=usernames, password=password, login_file=path, created=tuple(created)
    )
