"""Django's SQLite backend, with writers queued in the kernel instead of SQLite's busy loop.

SQLite lets one writer in at a time. A connection that finds the write lock
taken does not wait on it: its busy handler sleeps and tries again, for 1,
2, 5, 10, ... up to 100 ms a sleep, so a writer that arrives while the lock
is briefly held may sleep 100 ms past its release while later arrivals slip
in ahead of it. Under concurrent load that is most of the tail latency of
every request that writes (and every recall writes its audit event).

Here every write transaction first takes an exclusive ``flock`` on a file
beside the database (``<name>-writers``), then sends ``BEGIN IMMEDIATE``,
and releases the lock after COMMIT or ROLLBACK. A waiting writer sleeps in
the kernel and is woken the moment the lock is released: no polling, no
oversleeping. SQLite's own lock and busy timeout stay as they were
underneath, so a process that does not use this backend (the standalone
verifiers, a ``sqlite3`` shell) is still safe, only not queued.

A write outside any transaction (an autocommit ``INSERT``/``UPDATE``/
``DELETE``, such as the rate limit's counter) takes its turn in the same
queue for that one statement.

Checkpoints run outside the queue and outside the request. SQLite's own
automatic checkpoint runs inside the COMMIT that crosses its threshold, and
copying the WAL back into the database ends in an fsync that can take
hundreds of milliseconds while the disk is busy; inside the queue, every
other writer waited for it, and the request that committed waited too. Here
every :data:`CHECKPOINT_EVERY` commits a process wakes its checkpoint thread
(one per database file, :class:`_Checkpointer`), which runs ``PRAGMA
wal_checkpoint(PASSIVE)`` (never waits for readers or writers) on a
connection of its own while the committing thread goes on. SQLite's
automatic checkpoint stays on as a backstop at a higher threshold
(``wal_autocheckpoint`` in settings.py), for writers that do not commit
through this backend.

Threads of one process queue first on a process lock (with the same timeout
as the busy handler, so a stuck writer still ends in "database is locked"
rather than a hang), then one of them on the file lock. A thread that
already holds the queue through another connection (two connections in one
thread) does not wait on it again, which would wait on itself: it falls back
to SQLite's busy handler, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from django.db import OperationalError
from django.db.backends.sqlite3 import base
from django.db.backends.sqlite3.creation import DatabaseCreation as SQLiteDatabaseCreation

logger = logging.getLogger(__name__)
_NO_FILE = -1
_QUEUE_SUFFIX = "-writers"  # the queue file sits beside the database: <name>-writers
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
# Commits between two checkpoints in one process: ~30 WAL pages a remember,
# so a checkpoint copies about SQLite's own default of 1,000 pages.
CHECKPOINT_EVERY = 32
_commits = 0
# A checkpoint thread with nothing to do for this long ends (a new one starts when needed).
IDLE_SECONDS = 60.0
_locks_guard = threading.Lock()
_process_locks: dict[str, threading.Lock] = {}  # queue file path -> this process's queue
_holding = threading.local()  # .paths: the queue files this thread holds
_opened: weakref.WeakSet[DatabaseWrapper] = weakref.WeakSet()


class _Checkpointer:
    """A daemon thread that checkpoints one database file's WAL whenever it is asked to.

    Requests made while a checkpoint runs fold into one more run. Each run
    opens a connection of its own and closes it (no file stays open between
    runs, and nothing is shared with the request threads' connections); a
    failure is logged and waits for the next request. The thread ends after
    :data:`IDLE_SECONDS` without a request.
    """

    def __init__(self, database: str) -> None:
        self.database = database
        self.runs = 0  # checkpoints tried, failed ones included (read by the tests)
        self._due = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def request(self) -> None:
        with self._guard:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"sqlite checkpoint {self.database}", daemon=True
                )
                self._thread.start()
            self._due.set()

    def checkpoint(self) -> None:
        import sqlite3  # the current build that aetnaweb.sqlite.install() routed, as Django's

        conn = sqlite3.connect(self.database, timeout=0, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()

    def _run(self) -> None:
        while True:
            if not self._due.wait(IDLE_SECONDS):
                with self._guard:
                    if not self._due.is_set():  # idle: the next request starts a new thread
                        self._thread = None
                        return
            self._due.clear()
            try:
                self.checkpoint()
            except Exception:
                logger.warning("WAL checkpoint of %s failed", self.database, exc_info=True)
            self.runs += 1


_checkpointers: dict[str, _Checkpointer] = {}  # database file -> its checkpoint thread


def _checkpointer(database: str) -> _Checkpointer:
    with _locks_guard:
        return _checkpointers.setdefault(database, _Checkpointer(database))


def _process_lock(path: str) -> threading.Lock:
    with _locks_guard:
        return _process_locks.setdefault(path, threading.Lock())


def _held_here() -> set[str]:
    paths: set[str] | None = getattr(_holding, "paths", None)
    if paths is None:
        paths = _holding.paths = set()
    return paths


def _reset_after_fork() -> None:
    """A forked child starts with the queue free and no queue file of its parent's.

    The child shares each inherited file with its parent (one open file, one
    lock), so it closes them without unlocking: unlocking would release the
    parent's place in the queue. Its connections open their own on next use.
    """
    global _locks_guard, _holding
    _locks_guard = threading.Lock()
    _process_locks.clear()
    _checkpointers.clear()  # their threads were not forked
    _holding = threading.local()
    for wrapper in list(_opened):
        wrapper._close_queue_file()
    _opened.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


# Distinct statements whose converted text is kept (a few hundred in practice:
# the hot paths' raw SQL and the ORM's, each IN-list length its own entry).
CONVERTED_STATEMENTS = 2048


@functools.lru_cache(maxsize=CONVERTED_STATEMENTS)
def _qmark_style(query: str) -> str:
    """Django's ``%s`` placeholders as sqlite3's ``?`` (``%%`` as ``%``), as Django converts them.

    Django runs its regular expression over the whole statement on every
    execute: 3-10 microseconds a statement, 0.23 ms for the 28 statements of
    an API remember and recall.
    The same statements come back on every request, so each is converted once.
    Statements carry placeholders, never values, so nothing a caller sent is
    kept here.
    """
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class QueuedCursor(base.SQLiteCursorWrapper):
    """Django's SQLite cursor; a write outside any transaction waits its turn in the queue."""

    queue: DatabaseWrapper | None = None

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return _qmark_style(query)
        return super().convert_query(query, param_names=param_names)  # type: ignore[no-any-return]

    def _turn(self, query: str) -> contextlib.AbstractContextManager[None]:
        """The queue for one write run outside a transaction; nothing for the rest."""
        if (
            self.queue is None
            or self.connection.in_transaction
            or not query.lstrip()[:7].upper().startswith(_WRITES)
        ):
            return contextlib.nullcontext()
        return self.queue.statement_in_queue()

    def execute(self, query: str, params: Any = None) -> Any:
        with self._turn(query):
            return super().execute(query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        with self._turn(query):
            return super().executemany(query, param_list)


class DatabaseCreation(SQLiteDatabaseCreation):
    """Test databases: destroying one also removes the write queue file beside it.

    The queue file outlives every connection by design (it is only a lock
    to queue on), so without this each test run left an empty
    ``test_aetnaweb_<pid>.sqlite3-writers`` behind in the data folder.
    """

    def _destroy_test_db(self, test_database_name: str, verbosity: int) -> None:
        super()._destroy_test_db(test_database_name, verbosity)  # type: ignore[misc]  # private in django-stubs
        if test_database_name and not self.is_in_memory_db(test_database_name):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.abspath(test_database_name) + _QUEUE_SUFFIX)


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation
    # The open queue file; None: not opened yet; _NO_FILE where there is none
    # to open (an in-memory or URI database, a folder we may not write to).
    _queue_fd: int | None = None
    # Closes the queue file when the connection is closed, or when it is
    # dropped unclosed (a thread that ends keeps no connection: runserver's
    # thread per request), so no file descriptor is left behind.
    _queue_closer: weakref.finalize | None = None
    _queue_path = ""
    # The process lock taken with the queue file's, while this connection holds both.
    _queued_under: threading.Lock | None = None

    def _queue_file(self) -> int | None:
        if self._queue_fd is None:
            name = os.fspath(self.settings_dict["NAME"] or "")
            self._queue_fd = _NO_FILE
            if name and not name.startswith("file:") and not self.is_in_memory_db():
                path = self._queue_path = os.path.abspath(name) + _QUEUE_SUFFIX
                for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
                    try:
                        self._queue_fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
                        self._queue_closer = weakref.finalize(self, os.close, self._queue_fd)
                        _opened.add(self)
                        break
                    except OSError:
                        continue  # read-only: SQLite will refuse the write itself
        return None if self._queue_fd == _NO_FILE else self._queue_fd

    @property
    def _queued(self) -> bool:
        return self._queued_under is not None

    def _enter_queue(self) -> None:
        if self._queued:
            return
        fd = self._queue_file()
        if fd is None or self._queue_path in _held_here():
            return  # no queue file, or this thread's other connection holds it
        process_lock = _process_lock(self._queue_path)
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        if not process_lock.acquire(timeout=timeout):
            raise OperationalError("database is locked (waited for the write queue)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            process_lock.release()
            raise
        self._queued_under = process_lock
        _held_here().add(self._queue_path)

    def _leave_queue(self) -> None:
        process_lock = self._queued_under
        if process_lock is None:
            return
        self._queued_under = None
        _held_here().discard(self._queue_path)
        assert self._queue_fd is not None
        try:
            fcntl.flock(self._queue_fd, fcntl.LOCK_UN)
        finally:
            process_lock.release()

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = self.connection.cursor(factory=QueuedCursor)
        cursor.queue = self
        return cursor

    @contextlib.contextmanager
    def statement_in_queue(self) -> Iterator[None]:
        """Hold the queue for one statement run outside a transaction."""
        self._enter_queue()
        try:
            yield
        finally:
            self._leave_queue()

    def _checkpoint_if_due(self) -> None:
        global _commits
        _commits += 1
        if _commits % CHECKPOINT_EVERY or self.connection is None or self._queue_file() is None:
            return
        # PASSIVE never waits, never fails for being busy: what another
        # checkpoint or a reader keeps from this one waits for the next.
        _checkpointer(self._queue_path.removesuffix(_QUEUE_SUFFIX)).request()

    def _start_transaction_under_autocommit(self) -> None:
        self._enter_queue()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private in django-stubs
        except BaseException:
            self._leave_queue()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # private in django-stubs
        finally:
            # A failed COMMIT leaves the transaction open: the rollback that
            # follows releases the queue.
            if self.connection is None or not self.connection.in_transaction:
                self._leave_queue()
        self._checkpoint_if_due()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # private in django-stubs
        finally:
            self._leave_queue()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # private in django-stubs
        finally:
            self._leave_queue()
            self._close_queue_file()

    def _close_queue_file(self) -> None:
        if self._queue_closer is not None:
            self._queue_closer()  # once only, whoever calls it first
            self._queue_closer = None
        self._queue_fd = None
        self._queued_under = None
