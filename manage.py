#!/usr/bin/env python
"""Django's command-line utility for aetnaweb."""

from __future__ import annotations

import sys


def main() -> None:
    from aetnaweb.cli import run_command

    run_command(sys.argv)


if __name__ == "__main__":
    main()
