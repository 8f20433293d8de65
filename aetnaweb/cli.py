"""The ``aetnaweb`` console script: the project's management commands from any directory.

Settings and the database come from the environment (``DATABASE_URL`` and
friends, see ``aetnaweb.settings``), so an agent host can launch
``aetnaweb mcp --scope acme:alice:*`` without a checkout on its path.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["aetnaweb", *(sys.argv[1:] if argv is None else argv)])
