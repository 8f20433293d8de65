"""The ``aetnaweb`` console script: the project's management commands from any directory.

Settings and the database come from the environment (``DATABASE_URL`` and
friends, see ``aetnaweb.settings``), so an agent host can launch
``aetnaweb mcp --scope acme:alice:*`` without a checkout on its path.
"""

from __future__ import annotations

import os
import sys


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
