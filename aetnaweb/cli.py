"""The ``aetnaweb`` console script: the project's management commands from any directory.

Settings and the database come from the environment (``DATABASE_URL`` and
friends, see ``aetnaweb.settings``), so an agent host can launch
``aetnaweb mcp --scope acme:alice:*`` without a checkout on its path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError

from aetnaweb.errors import DomainError

REFUSED = 2
"""Every management command's exit status for a refusal (bad input, or a change that cannot be made)."""


def refuse(message: object) -> CommandError:
    """One line on stderr (whitespace folded, so a multi-line message stays one line), exit 2."""
    return CommandError(" ".join(str(message).split()), returncode=REFUSED)


@contextmanager
def refusals_exit() -> Iterator[None]:
    """In a command: any domain refusal becomes :func:`refuse` (one line, exit 2), never a traceback."""
    try:
        yield
    except DomainError as exc:
        raise refuse(exc) from exc


def run_command(argv: list[str]) -> None:
    """Run a management command; a bad setting exits 1 with one line naming it, no traceback."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except ImproperlyConfigured as exc:
        sys.exit(f"aetnaweb: configuration error: {exc}")


def main(argv: list[str] | None = None) -> None:
    run_command(["aetnaweb", *(sys.argv[1:] if argv is None else argv)])
