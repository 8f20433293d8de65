"""The SQLite library the project runs on: a current build, not the interpreter's.

Python's bundled SQLite is whatever the interpreter was built against (3.40 on
the machines we run on), and often it cannot load extensions. aetnaweb needs
two things an old build lacks:

- FTS5 ``secure-delete`` (SQLite 3.44+), so that forgetting a record also
  removes its words from the full-text index's segment rows (memory-engine
  forget: purge content, no residue);
- loadable extensions, for the vector index (sqlite-vec).

``pysqlite3`` (a registry wheel with SQLite 3.5x compiled in) provides the
DB-API module. Its module API is older than Python 3.12's ``sqlite3``: it has
no ``Connection.getlimit`` and no ``SQLITE_LIMIT_*`` constants, which Django's
backend asks for. ``install()`` therefore registers, under the name
``sqlite3``, a module that is pysqlite3's ``dbapi2`` plus exactly those two
things, before Django's SQLite backend is imported (the top of
``settings.py``). Every connection the project opens then uses the current
build. The standalone verifiers under ``tools/`` keep the standard library's
module: they read only plain tables, which any SQLite 3 can read.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
from types import ModuleType
from typing import Any

# FTS5 secure-delete arrived in 3.44.0.
MINIMUM_VERSION = (3, 44, 0)

# sqlite3.h: SQLITE_LIMIT_COLUMN 2, SQLITE_LIMIT_VARIABLE_NUMBER 9, with the
# compile-time defaults used when the build does not override them.
SQLITE_LIMIT_COLUMN = 2
SQLITE_LIMIT_VARIABLE_NUMBER = 9
_COMPILED_DEFAULTS = {
    SQLITE_LIMIT_COLUMN: ("MAX_COLUMN", 2000),
    SQLITE_LIMIT_VARIABLE_NUMBER: ("MAX_VARIABLE_NUMBER", 32766),
}


def _shim(dbapi2: ModuleType) -> ModuleType:
    base_connection: Any = dbapi2.Connection

    class Connection(base_connection):  # type: ignore[misc, valid-type]
        """pysqlite3's connection with the one method Django needs that it lacks."""

        _limits: dict[int, int] | None = None

        def getlimit(self, category: int) -> int:
            if category not in _COMPILED_DEFAULTS:
                raise dbapi2.ProgrammingError(f"unsupported limit category {category}")
            if self._limits is None:
                options = [row[0] for row in self.execute("PRAGMA compile_options")]
                limits = {}
                for key, (option, default) in _COMPILED_DEFAULTS.items():
                    found = [o for o in options if o.startswith(option + "=")]
                    match = re.fullmatch(r"\w+=(\d+)", found[0]) if found else None
                    limits[key] = int(match.group(1)) if match else default
                self._limits = limits
            return self._limits[category]

    def connect(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("factory", Connection)
        create_private_file(args[0] if args else kwargs.get("database"))
        return dbapi2.connect(*args, **kwargs)

    module = ModuleType("sqlite3", dbapi2.__doc__)
    module.__dict__.update(
        {name: value for name, value in vars(dbapi2).items() if not name.startswith("__")}
    )
    module.__dict__.update(
        {
            "connect": connect,
            "Connection": Connection,
            "SQLITE_LIMIT_COLUMN": SQLITE_LIMIT_COLUMN,
            "SQLITE_LIMIT_VARIABLE_NUMBER": SQLITE_LIMIT_VARIABLE_NUMBER,
            "dbapi2": module,
            "__aetnaweb_shim__": True,
        }
    )
    return module


def create_private_file(database: Any) -> None:
    """Create a database file that does not exist yet readable by its owner only (0600).

    SQLite would create it with the process umask (often 0644), handing
    memories and audit rows to every local user; like ``data/secret_key`` it
    is created 0600 in one step. SQLite copies the file's mode to its -wal and
    -shm files. ``:memory:`` and ``file:`` URIs are left to SQLite.
    """
    if not isinstance(database, (str, os.PathLike)):
        return
    path = os.fspath(database)
    if not path or path == ":memory:" or path.startswith("file:") or os.path.exists(path):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process created it first; its mode is its creator's
    except OSError:
        return  # no such folder, no permission: let SQLite report it in its own words
    os.close(fd)


def use_wal(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created``: switch a SQLite database to WAL once (the mode is stored in the file).

    Not an ``init_command``: ``PRAGMA journal_mode=WAL`` is a write, so on a
    read-only file it failed every connection and with it every page, reads
    included. Here a read-only file keeps its journal mode and serves reads;
    writes answer 503 (aetnaweb/faults.py).
    """
    if connection.vendor != "sqlite":
        return
    import sqlite3  # the module install() routed: its errors are the connection's

    raw = connection.connection
    mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() in {"wal", "memory"}:
        return
    with contextlib.suppress(sqlite3.OperationalError):  # read-only: readers need no WAL
        raw.execute("PRAGMA journal_mode=WAL")


def install() -> ModuleType:
    """Route ``import sqlite3`` to the current SQLite build and return the module in use."""
    current = sys.modules.get("sqlite3")
    if current is not None and getattr(current, "__aetnaweb_shim__", False):
        return current
    try:
        dbapi2 = importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        import sqlite3

        return sqlite3
    module = _shim(dbapi2)
    sys.modules["sqlite3"] = module
    sys.modules["sqlite3.dbapi2"] = module
    return module


def version_info() -> tuple[int, ...]:
    """The SQLite library version the project's connections use."""
    import sqlite3

    return tuple(sqlite3.sqlite_version_info)


def supports_secure_delete() -> bool:
    return version_info() >= MINIMUM_VERSION
