"""SQLite writers queue on a file lock, not in SQLite's sleeping busy loop (aetnaweb/sqlite_backend)."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import OperationalError, connection, connections, transaction

from aetnaweb.sqlite_backend.base import DatabaseWrapper

pytestmark = pytest.mark.skipif(
    settings.DATABASE_VENDOR != "sqlite", reason="the write queue is SQLite's"
)


def wrapper(path: Path, *, timeout: float = 5, alias: str = "queue-test") -> DatabaseWrapper:
    """A connection opened the way the project opens SQLite, on ``path``."""
    config = dict(settings.DATABASES["default"])
    config |= {
        "NAME": str(path),
        "TEST": {},
        "OPTIONS": {
            **config["OPTIONS"],
            "timeout": timeout,
            "init_command": config["OPTIONS"]["init_command"].replace(
                "busy_timeout=30000", f"busy_timeout={int(timeout * 1000)}"
            ),
        },
    }
    return DatabaseWrapper(config, alias=alias)


@pytest.fixture(autouse=True)
def _own_databases(django_db_blocker):
    # These tests open their own database files, never the test database.
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "queue.sqlite3"
    setup = wrapper(path)
    with setup.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("CREATE TABLE note (n INTEGER, at REAL)")
    setup.close()
    return path


def rows(path: Path) -> list[tuple[int, float]]:
    reader = wrapper(path)
    try:
        with reader.cursor() as cursor:
            cursor.execute("SELECT n, at FROM note ORDER BY at")
            return cursor.fetchall()
    finally:
        reader.close()


@contextlib.contextmanager
def queue_held_elsewhere(database: Path, seconds: float = 0.4) -> Iterator[None]:
    """Another process holds ``database``'s write queue for ``seconds`` from entry."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n",
            f"{database}-writers",
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.wait(timeout=10)
        if holder.stdout is not None:
            holder.stdout.close()


def test_the_project_connects_through_the_queueing_backend(db):
    assert isinstance(connections["default"], DatabaseWrapper)
    assert connection.vendor == "sqlite"
    assert settings.DATABASES["default"]["ENGINE"] == "aetnaweb.sqlite_backend"


def test_a_transaction_holds_the_queue_file_and_releases_it_at_commit(database):
    # Given a connection inside a write transaction
    conn = wrapper(database)
    queue_file = f"{database}-writers"
    with conn_atomic(conn):
        with conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (1, 0)")
        # Then another open file of the queue cannot take the lock
        probe = os.open(queue_file, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(probe)
            raise
    try:
        # And after COMMIT it can
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(probe, fcntl.LOCK_UN)
    finally:
        os.close(probe)
        conn.close()
    # The queue file is private to its owner, like the database
    assert os.stat(queue_file).st_mode & 0o777 == 0o600
    assert rows(database) == [(1, 0.0)]


@contextlib.contextmanager
def conn_atomic(conn: DatabaseWrapper) -> Iterator[None]:
    """``transaction.atomic`` (the path every service takes) on a connection of our own."""
    connections[conn.alias] = conn  # per thread, like every Django connection
    try:
        with transaction.atomic(using=conn.alias):
            yield
    finally:
        del connections[conn.alias]


def test_a_rolled_back_transaction_releases_the_queue(database):
    conn = wrapper(database)
    with pytest.raises(ZeroDivisionError), conn_atomic(conn):
        with conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (1, 0)")
        1 / 0  # noqa: B018
    probe = os.open(f"{database}-writers", os.O_RDONLY)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        os.close(probe)
        conn.close()
    assert rows(database) == []


def test_a_writer_in_another_process_waits_in_the_queue_then_goes_in(database):
    # Given another process holding the queue file's lock for 0.4 s
    with queue_held_elsewhere(database):
        # When this process writes, with a busy timeout shorter than that wait
        conn = wrapper(database, timeout=0.05)
        started = time.monotonic()
        with conn_atomic(conn), conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (1, 0)")
        waited = time.monotonic() - started
        conn.close()
    # Then it waited for the other writer (in the queue, not in SQLite's
    # busy handler, which would have given up after 0.05 s) and then wrote
    assert waited >= 0.2
    assert rows(database) == [(1, 0.0)]


def test_threads_of_one_process_take_turns_in_arrival_order_and_nobody_is_refused(database):
    # Given one thread inside a write transaction
    first = wrapper(database, alias="first")
    order: list[int] = []
    errors: list[BaseException] = []
    inside = threading.Event()

    def later_writer(n: int) -> None:
        conn = wrapper(database, alias=f"writer-{n}")
        try:
            with conn_atomic(conn), conn.cursor() as cursor:
                order.append(n)
                cursor.execute("INSERT INTO note VALUES (%s, %s)", [n, time.monotonic()])
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=later_writer, args=(n,)) for n in range(2, 6)]
    with conn_atomic(first):
        with first.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (1, %s)", [time.monotonic()])
        inside.set()
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        # While it holds the transaction, none of the others has begun
        assert order == []
    first.close()
    for thread in threads:
        thread.join(timeout=10)
    # Then every writer got in, one after the other, none refused as "locked"
    assert errors == []
    assert sorted(n for n, _ in rows(database)) == [1, 2, 3, 4, 5]


def test_a_writer_stuck_behind_its_own_process_gets_database_is_locked_not_a_hang(database):
    # Given a thread holding a write transaction past the other's timeout
    holder = wrapper(database, alias="holder")
    waiter_result: list[BaseException | None] = []

    def waiter() -> None:
        conn = wrapper(database, timeout=0.2, alias="waiter")
        try:
            with conn_atomic(conn):
                pass
            waiter_result.append(None)
        except OperationalError as exc:
            waiter_result.append(exc)
        finally:
            conn.close()

    with conn_atomic(holder):
        thread = threading.Thread(target=waiter)
        thread.start()
        thread.join(timeout=10)
    holder.close()
    # Then the waiter gave up after its timeout with SQLite's own words
    assert len(waiter_result) == 1 and isinstance(waiter_result[0], OperationalError)
    assert "database is locked" in str(waiter_result[0])


def test_a_second_connection_in_the_same_thread_does_not_wait_on_its_own_queue(database):
    # Given this thread already inside a write transaction on one connection
    outer = wrapper(database, alias="outer")
    inner = wrapper(database, timeout=0.1, alias="inner")
    try:
        with conn_atomic(outer):
            started = time.monotonic()
            # When a second connection of the same thread asks to write
            with pytest.raises(OperationalError, match="database is locked"), conn_atomic(inner):
                pass
            # Then it is refused by SQLite's busy timeout, not hung on the queue
            assert time.monotonic() - started < 5
    finally:
        outer.close()
        inner.close()


def test_a_folder_the_process_may_not_write_leaves_writes_to_sqlite(tmp_path):
    # Given a database whose queue file cannot be created
    database = tmp_path / "plain.sqlite3"
    conn = wrapper(database)
    with conn.cursor() as cursor:
        cursor.execute("CREATE TABLE note (n INTEGER, at REAL)")
    conn.close()
    Path(f"{database}-writers").mkdir()  # a folder where the file would be: open() fails
    conn = wrapper(database)
    # When it writes, it writes (unqueued) instead of failing
    with conn_atomic(conn), conn.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES (1, 0)")
    conn.close()
    assert rows(database) == [(1, 0.0)]


def test_a_forked_child_does_not_inherit_the_queue_held(database):
    from aetnaweb.sqlite_backend import base as backend

    # Given a parent inside a write transaction, with a checkpoint thread's record
    backend._checkpointer(str(database))
    conn = wrapper(database)
    with conn_atomic(conn):
        with conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (1, 0)")
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its copy of the connection's queue state is reset
            try:
                # (and of the checkpoint threads, which were not forked)
                ok = not conn._queued and conn._queue_fd is None and not backend._checkpointers
                os.write(write, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(write)
        answer = os.read(read, 1)
        os.close(read)
        os.waitpid(pid, 0)
        # And the parent still holds its place: the child closing its copy released nothing
        probe = os.open(f"{database}-writers", os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    conn.close()
    assert answer == b"1"


def test_a_write_outside_any_transaction_also_waits_its_turn(database):
    # Given another process holding the queue for 0.4 s
    conn = wrapper(database)
    try:
        with queue_held_elsewhere(database):
            # When a connection in autocommit mode runs a lone INSERT
            started = time.monotonic()
            with conn.cursor() as cursor:
                cursor.execute("INSERT INTO note VALUES (1, 0)")
            waited = time.monotonic() - started
    finally:
        conn.close()
    # Then the INSERT waited in the queue, and is written
    assert waited >= 0.2
    assert rows(database) == [(1, 0.0)]


def test_reads_outside_a_transaction_never_touch_the_queue(database):
    conn = wrapper(database)
    probe = os.open(f"{database}-writers", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX)  # the queue is taken...
        started = time.monotonic()
        with conn.cursor() as cursor:  # ...and reading goes on regardless
            cursor.execute("SELECT count(*) FROM note")
            assert cursor.fetchone() == (0,)
        assert time.monotonic() - started < 1
    finally:
        os.close(probe)
        conn.close()


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_checkpoints_run_every_so_many_commits_on_their_own_thread_outside_the_queue(
    database, monkeypatch
):
    from aetnaweb.sqlite_backend import base as backend

    monkeypatch.setattr(backend, "CHECKPOINT_EVERY", 4)
    monkeypatch.setattr(backend, "_commits", 0)
    monkeypatch.setattr(backend, "_checkpointers", {})
    seen: list[tuple[str, bool]] = []
    original = backend._Checkpointer.checkpoint

    def traced(self) -> None:
        probe = os.open(f"{database}-writers", os.O_RDONLY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(probe, fcntl.LOCK_UN)
            queue_free = True
        except BlockingIOError:
            queue_free = False
        finally:
            os.close(probe)
        seen.append((threading.current_thread().name, queue_free))
        original(self)

    monkeypatch.setattr(backend._Checkpointer, "checkpoint", traced)
    conn = wrapper(database)
    try:
        # When 4 transactions commit
        for n in range(4):
            with conn_atomic(conn), conn.cursor() as cursor:
                cursor.execute("INSERT INTO note VALUES (%s, 0)", [n])
        # Then one checkpoint runs, on the database's checkpoint thread, with the queue free
        checkpointer = backend._checkpointers[str(database)]
        wait_for(lambda: checkpointer.runs == 1)
        assert seen == [(f"sqlite checkpoint {database}", True)]
        # And it copied the whole WAL back into the database
        with conn.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            busy, frames, copied = cursor.fetchone()
        assert busy == 0 and frames == copied > 0
        # And 3 more commits ask for none, the 4th for one more
        for n in range(3):
            with conn_atomic(conn), conn.cursor() as cursor:
                cursor.execute("INSERT INTO note VALUES (%s, 0)", [n])
        time.sleep(0.1)
        assert checkpointer.runs == 1
        with conn_atomic(conn), conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (9, 0)")
        wait_for(lambda: checkpointer.runs == 2)
    finally:
        conn.close()


def test_a_slow_checkpoint_delays_no_commit_and_a_failed_one_is_logged(
    database, monkeypatch, caplog
):
    from aetnaweb.sqlite_backend import base as backend

    monkeypatch.setattr(backend, "CHECKPOINT_EVERY", 1)
    monkeypatch.setattr(backend, "_commits", 0)
    monkeypatch.setattr(backend, "_checkpointers", {})
    release = threading.Event()
    calls: list[int] = []

    def stuck(self) -> None:
        calls.append(1)
        if len(calls) == 1:
            release.wait(10)  # a checkpoint stuck on a busy disk
            return
        raise OSError("disk gone")

    monkeypatch.setattr(backend._Checkpointer, "checkpoint", stuck)
    conn = wrapper(database)
    try:
        # Given a checkpoint that hangs
        with conn_atomic(conn), conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (0, 0)")
        wait_for(lambda: calls == [1])
        # When 20 more transactions commit, each asking for a checkpoint
        started = time.monotonic()
        for n in range(20):
            with conn_atomic(conn), conn.cursor() as cursor:
                cursor.execute("INSERT INTO note VALUES (%s, 0)", [n])
        # Then none of them waited for it, and their asks fold into one more run
        assert time.monotonic() - started < 5
        assert calls == [1]
        release.set()
        checkpointer = backend._checkpointers[str(database)]
        wait_for(lambda: checkpointer.runs == 2)
        assert calls == [1, 1]
        # And the failed run is logged, not raised
        assert "WAL checkpoint of" in caplog.text and "disk gone" in caplog.text
    finally:
        release.set()
        conn.close()


def queue_files_open(database: Path) -> int:
    target = f"{database}-writers"
    return sum(
        1 for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == target
    )


def test_a_connection_dropped_without_closing_leaves_no_queue_file_open(database):
    # Given a connection that wrote (so it opened its queue file) and was
    # never closed, as when the thread that owned it ends
    conn = wrapper(database)
    with conn_atomic(conn), conn.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES (1, 0)")
    assert queue_files_open(database) == 1
    # When it is dropped (its last cursor too)
    del conn, cursor
    gc.collect()
    # Then its queue file is closed with it
    assert queue_files_open(database) == 0


def test_closing_a_connection_closes_its_queue_file(database):
    conn = wrapper(database)
    with conn_atomic(conn), conn.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES (1, 0)")
    conn.close()
    assert queue_files_open(database) == 0
    # and it opens again on the next write
    with conn_atomic(conn), conn.cursor() as cursor:
        cursor.execute("INSERT INTO note VALUES (2, 0)")
    assert queue_files_open(database) == 1
    conn.close()


def test_an_idle_checkpoint_thread_ends_and_a_new_one_starts_when_needed(database, monkeypatch):
    from aetnaweb.sqlite_backend import base as backend

    monkeypatch.setattr(backend, "CHECKPOINT_EVERY", 1)
    monkeypatch.setattr(backend, "_commits", 0)
    monkeypatch.setattr(backend, "_checkpointers", {})
    monkeypatch.setattr(backend, "IDLE_SECONDS", 0.05)
    conn = wrapper(database)
    try:
        with conn_atomic(conn), conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (1, 0)")
        checkpointer = backend._checkpointers[str(database)]
        wait_for(lambda: checkpointer.runs == 1)
        # When it has nothing to do for longer than IDLE_SECONDS, its thread ends
        wait_for(lambda: checkpointer._thread is None)
        assert not any(t.name == f"sqlite checkpoint {database}" for t in threading.enumerate())
        # And the next commit starts a new one, which checkpoints
        with conn_atomic(conn), conn.cursor() as cursor:
            cursor.execute("INSERT INTO note VALUES (2, 0)")
        wait_for(lambda: checkpointer.runs == 2)
    finally:
        conn.close()


def test_destroying_a_test_database_removes_its_queue_file(tmp_path):
    # Given a test database that has written (so its queue file exists)
    database = tmp_path / "test_run.sqlite3"
    conn = wrapper(database)
    with conn_atomic(conn), conn.cursor() as cursor:
        cursor.execute("CREATE TABLE note (n INTEGER, at REAL)")
    conn.close()
    assert Path(f"{database}-writers").exists()
    # When the test run destroys it, as Django does at the end of a run
    conn.creation._destroy_test_db(str(database), verbosity=0)
    # Then neither the database nor its queue file is left behind
    assert not database.exists()
    assert not Path(f"{database}-writers").exists()
    # and a database destroyed before it ever wrote (no queue file) is no error
    other = tmp_path / "never_written.sqlite3"
    other.touch()
    conn.creation._destroy_test_db(str(other), verbosity=0)
    assert not other.exists()
