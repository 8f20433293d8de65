"""The files an instance needs before it starts, and the one explicit step that makes them.

Settings only *read* these files: importing ``aetnaweb.settings`` never writes
anything, so a read-only container image, a second app instance or a test
process can import it safely. ``python -m aetnaweb.instance`` (run by
``make setup``, ``make run`` and ``make serve``) creates what is missing:

- ``<data>/secret_key``: Django's ``SECRET_KEY`` for development (production
  passes ``SECRET_KEY`` or ``SECRET_KEY_FILE`` instead; never generated there);
- ``<data>/approval_key``: the development HMAC key that signs action
  approvals (``make run`` points ``AETNAWEB_APPROVAL_KEY_FILE`` at it);
- ``<data>/staticfiles``: the folder WhiteNoise serves collected files from;
- ``<data>/exports`` (mode 0700): audit export files, downloaded only through
  a login- and grant-checked view.

This module imports nothing from Django, so it runs before settings can load.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SETUP_HINT = "run `make setup` (or `python -m aetnaweb.instance`) to create it"


class MissingInstanceFile(RuntimeError):
    """A file the settings need is missing; the message says how to create it."""


def data_dir() -> Path:
    return Path(os.environ.get("AETNAWEB_DATA_DIR", BASE_DIR / "data"))


def static_root() -> Path:
    return Path(os.environ.get("STATIC_ROOT", data_dir() / "staticfiles"))


def exports_dir() -> Path:
    return Path(os.environ.get("AETNAWEB_EXPORT_DIR", data_dir() / "exports"))


def secret_key_path() -> Path:
    return data_dir() / "secret_key"


def approval_key_path() -> Path:
    return data_dir() / "approval_key"


def read_key_file(path: Path, *, what: str) -> str:
    """The stripped content of ``path``; a missing or empty file is a clear startup error."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise MissingInstanceFile(f"{what}: {path} is missing; {SETUP_HINT}") from None
    if not value:
        raise MissingInstanceFile(f"{what}: {path} is empty; delete it and {SETUP_HINT}")
    return value


def _create_secret_file(path: Path, value: str) -> bool:
    """Write ``value`` to a new 0600 file; ``False`` if it already exists (never overwritten)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value)
    return True


def ensure_development_files() -> list[Path]:
    """Create the development keys and the static folder if missing; return what was created."""
    created: list[Path] = []
    folder = data_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if _create_secret_file(secret_key_path(), secrets.token_urlsafe(64)):
        created.append(secret_key_path())
    # 32 random bytes as hex: the approval authority needs at least 32 bytes.
    if _create_secret_file(approval_key_path(), secrets.token_hex(32)):
        created.append(approval_key_path())
    exports = exports_dir()
    if not exports.is_dir():
        exports.mkdir(parents=True, exist_ok=True, mode=0o700)
        created.append(exports)
    root = static_root()
    if not root.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        created.append(root)
    return created


def main() -> int:
    if os.environ.get("AETNAWEB_ENV", "").strip().lower() == "production":
        # Production keys come from the environment or a secrets manager, never from here.
        print("production: no development keys created (set SECRET_KEY or SECRET_KEY_FILE)")
        return 0
    for path in ensure_development_files():
        print(f"created {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
