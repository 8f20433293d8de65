"""The production server's worker class, run in a real gunicorn (aetnaweb/gunicorn_worker.py).

A small WSGI app (written to a temporary folder) answers with the worker's
process ID after sleeping as long as the query string says, so a test can
keep a worker busy and see which worker takes a new connection. gunicorn
runs with the connection table's hooks, as aetnaweb/gunicorn_conf.py sets
them in production.
"""

from __future__ import annotations

import http.client
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gunicorn.config import Config
from gunicorn.http.parser import RequestParser

from aetnaweb import gunicorn_worker
from aetnaweb.gunicorn_worker import (
    BalancedThreadWorker,
    ConnectionTable,
    _pipelined,
    over_fair_share,
)
from tests.aetnaweb.test_serve import free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

# How long a balance test lets rounds go on: a connection closed elsewhere
# holds the next one back for up to SHED_SETTLE_SECONDS, so rounds are timed.
REBALANCE_SECONDS = 10 * gunicorn_worker.SHED_SETTLE_SECONDS

APP = """
import os, threading, time

def app(environ, start_response):
    delay = float(environ.get("QUERY_STRING") or 0)
    time.sleep(delay)
    if environ["PATH_INFO"] == "/thread":
        body = threading.current_thread().name.encode()
    else:
        body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"""

# The two hooks of aetnaweb/gunicorn_conf.py that keep kept-alive connections balanced.
HOOKS = """
from aetnaweb.gunicorn_worker import claim_slot as pre_fork, release_slot as child_exit
"""


def _connections_per_worker(pids: list[int]) -> list[int]:
    """How many of the connections each worker took, fewest first."""
    return sorted(pids.count(pid) for pid in set(pids))


def _ask(conn: http.client.HTTPConnection, delay: float = 0.0) -> int:
    conn.request("GET", f"/?{delay}")
    return int(conn.getresponse().read())


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    """Start gunicorn with BalancedThreadWorker: ``serve(workers, threads)`` gives its port."""
    (tmp_path / "pidapp.py").write_text(APP)
    (tmp_path / "hooks.py").write_text(HOOKS)
    started: list[subprocess.Popen[bytes]] = []

    def start(workers: int, threads: int, *options: str) -> int:
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--worker-class",
                "aetnaweb.gunicorn_worker.BalancedThreadWorker",
                f"--workers={workers}",
                f"--threads={threads}",
                f"--bind=127.0.0.1:{port}",
                f"--chdir={tmp_path}",
                f"--config={tmp_path / 'hooks.py'}",
                *options,
                "pidapp:app",
            ],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(server)
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        # Ready when every worker has answered once (each on a connection of its own).
        while len(seen) < workers:
            assert time.monotonic() < deadline, "gunicorn did not start its workers"
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                seen.add(_ask(conn))
                conn.close()
            except OSError:
                time.sleep(0.1)
        return port

    yield start
    for server in started:
        server.terminate()
        server.wait(timeout=30)


def test_a_new_connection_goes_to_the_worker_with_a_free_thread(serve) -> None:
    """While one worker's only thread is busy, the idle worker takes every new connection.

    The stock gthread worker would take it about half the time: the busy
    worker's event loop is free to accept while its thread sleeps.
    """
    port = serve(2, 1)
    for _ in range(6):
        busy = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        busy.request("GET", "/?0.4")
        time.sleep(0.1)  # the request is in the busy worker's thread
        fresh = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        answered_by = _ask(fresh)
        busy_pid = int(busy.getresponse().read())
        assert answered_by != busy_pid
        busy.close()
        fresh.close()


def _pipeline(client: socket.socket, count: int) -> bytes:
    """Send ``count`` requests back to back on ``client``; every answer, once all have come."""
    client.sendall(b"GET /?0 HTTP/1.1\r\nHost: x\r\n\r\n" * count)
    received = b""
    while received.count(b"HTTP/1.1 200 OK") < count:
        chunk = client.recv(65536)
        assert chunk, f"connection closed after {received.count(b'HTTP/1.1 200 OK')} answers"
        received += chunk
    return received


def _ask_keeping(conn: http.client.HTTPConnection) -> tuple[int, bool]:
    """The worker that answered, and whether it let the connection go ("Connection: close")."""
    conn.request("GET", "/?0")
    response = conn.getresponse()
    return int(response.read()), response.getheader("Connection", "").lower() == "close"


def test_kept_alive_connections_spread_over_the_workers(serve) -> None:
    """Eight clients that connect at once and keep their connections end up four and four."""
    port = serve(2, 1)
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(8)]
    pids: list[int] = [0] * len(conns)

    def first(index: int) -> None:
        pids[index] = _ask(conns[index], 0.05)

    threads = [threading.Thread(target=first, args=(i,)) for i in range(len(conns))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(_connections_per_worker(pids)) == 2
    # A connection let go reconnects to either idle worker.
    deadline = time.monotonic() + REBALANCE_SECONDS
    while time.monotonic() < deadline:
        pids = [_ask(conn) for conn in conns]
        if _connections_per_worker(pids) == [4, 4] and [_ask(conn) for conn in conns] == pids:
            break
    assert _connections_per_worker(pids) == [4, 4]
    for conn in conns:
        conn.close()


def test_an_uneven_split_of_kept_alive_connections_is_evened_out(serve) -> None:
    """Six connections taken by one worker while the other was busy end up three and three.

    The worker holding too many answers one request at a time with
    "Connection: close"; every request is answered, and once the split is
    even no connection is let go any more.
    """
    port = serve(2, 1)
    blocker = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    blocker.request("GET", "/?1.0")  # one worker's only thread sleeps for a second
    time.sleep(0.2)
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(6)]
    for conn in conns:
        conn.connect()  # silent connections: only the free worker's event loop takes them
    time.sleep(0.5)
    busy_worker = int(blocker.getresponse().read())
    blocker.close()
    rounds = [[_ask_keeping(conn) for conn in conns] for _ in range(2)]
    # The free worker took all six; it let at most one go at a time (each
    # waits for the previous one's client to connect again).
    assert {pid for pid, _ in rounds[0]} != {busy_worker} and len({p for p, _ in rounds[0]}) == 1
    assert sum(closed for _, closed in rounds[0]) == 1
    # (The blocker's connection, closed just before, may still have counted
    # when the first was let go: the next then waits SHED_SETTLE_SECONDS.)
    deadline = time.monotonic() + REBALANCE_SECONDS
    while time.monotonic() < deadline and not (
        _connections_per_worker([pid for pid, _ in rounds[-1]]) == [3, 3]
        and not any(closed for _, closed in rounds[-1])
    ):
        rounds.append([_ask_keeping(conn) for conn in conns])
    assert _connections_per_worker([pid for pid, _ in rounds[-1]]) == [3, 3], rounds
    # Even now, and it stays so: the same worker answers each connection again.
    assert [_ask_keeping(conn) for conn in conns] == rounds[-1]
    for conn in conns:
        conn.close()


def test_a_new_connection_is_not_starved_while_every_worker_stays_busy(serve) -> None:
    """Two clients keep the only worker's thread busy without a pause; a third still gets in.

    Its connection waits ACCEPT_WAIT_SECONDS in the accept queue, then the
    busy worker takes it and serves it between the others' requests; it
    does not wait for the others to stop (about 3 s here).
    """
    port = serve(1, 1)
    stop = time.monotonic() + 3.0

    def hammer() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop:
            _ask(conn, 0.02)
        conn.close()

    hammers = [threading.Thread(target=hammer) for _ in range(2)]
    for thread in hammers:
        thread.start()
    time.sleep(0.5)
    late = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.monotonic()
    _ask(late)
    waited = time.monotonic() - started
    hammer_left = stop - time.monotonic()
    for thread in hammers:
        thread.join()
    late.close()
    assert hammer_left > 1.0, "the machine was too slow for this test to mean anything"
    assert waited < 1.0, f"a new connection waited {waited:.2f} s"


def test_a_connection_that_sends_nothing_does_not_hold_a_thread(serve) -> None:
    """A client that connects and stays silent (a browser's preconnect) delays nobody.

    The stock worker waits for its first bytes in a thread, for up to 5 s:
    with one thread, every other client waited that long.
    """
    port = serve(1, 1)
    silent = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.2)  # accepted by now
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.monotonic()
    _ask(conn)
    waited = time.monotonic() - started
    # The silent connection can still send its request later and be answered.
    silent.sendall(b"GET /?0 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert silent.recv(1024).startswith(b"HTTP/1.1 200")
    silent.close()
    conn.close()
    assert waited < 0.5, f"a client waited {waited:.2f} s behind a silent connection"


def test_a_burst_of_new_connections_is_shared_out(serve) -> None:
    """Eight clients connect at once and only then send: neither worker takes them all.

    A worker counts a connection it has accepted as busy until its first
    request is served, so the burst does not all go to the first to wake.
    """
    port = serve(2, 1)
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(8)]
    for conn in conns:
        conn.connect()
    time.sleep(0.6)  # every connection accepted by one worker or the other by now
    pids = [_ask(conn) for conn in conns]
    for conn in conns:
        conn.close()
    counts = _connections_per_worker(pids)
    assert len(counts) == 2 and counts[0] >= 2, counts


def test_with_one_thread_the_worker_serves_requests_on_its_own_thread(serve) -> None:
    """No pool to hand a request to when there is one thread; with more, the pool serves."""
    for threads, inline in ((1, True), (2, False)):
        conn = http.client.HTTPConnection("127.0.0.1", serve(1, threads), timeout=10)
        conn.request("GET", "/thread")
        assert (conn.getresponse().read() == b"MainThread") is inline
        conn.close()


def test_a_long_pipeline_on_one_connection_is_answered_in_full(serve) -> None:
    """Requests a client sent back to back, read ahead in one go, are served by a loop.

    About 280 of them fit in one read: serving each from the previous one's
    completion, recursively, would exhaust the stack.
    """
    port = serve(1, 1)
    count = 2000
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        _pipeline(client, count)


def test_a_request_longer_than_the_timeout_does_not_get_its_worker_restarted(serve) -> None:
    """The worker keeps telling the arbiter it is alive while its one thread serves a long request.

    gunicorn restarts a worker that has not done so for ``--timeout``
    seconds; a pool's event loop does it while a thread serves, and so must
    a worker serving on its main thread (a streamed export to a slow client).
    """
    port = serve(1, 1, "--timeout=2")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    worker = _ask(conn)
    assert _ask(conn, 4.0) == worker
    assert _ask(conn) == worker
    conn.close()


def test_a_busy_worker_takes_a_waiting_connection_once_it_has_waited_long_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While every worker is busy, a connection is taken once it has waited ACCEPT_WAIT_SECONDS.

    However many connections the worker already holds; an empty queue is
    never overdue, and the wait starts over.
    """
    clock = [1000.0]
    monkeypatch.setattr(gunicorn_worker.time, "monotonic", lambda: clock[0])
    with socket.create_server(("127.0.0.1", 0)) as listener:
        waiting = socket.create_connection(listener.getsockname())  # in the accept queue
        worker = object.__new__(BalancedThreadWorker)  # only what _overdue reads
        worker.sockets = [listener]

        def overdue_after(held: int, seconds: float) -> bool:
            worker.nr_conns, worker.waiting_since = held, None
            assert worker._overdue() is False  # the wait starts when first seen
            clock[0] += seconds
            return worker._overdue()

        for held in (1, 3, 500):
            assert overdue_after(held, 0.045) is False
            assert overdue_after(held, 0.055) is True
        accepted, _ = listener.accept()
        assert worker._overdue() is False and worker.waiting_since is None
        accepted.close()
        waiting.close()


def test_a_pipelined_connection_is_never_the_one_let_go(serve) -> None:
    """Requests a client sent back to back are all answered, even by a worker holding too many.

    Letting that connection go after the first answer would leave the
    others unanswered (the client would have to send them again).
    """
    port = serve(2, 1)
    blocker = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    blocker.request("GET", "/?1.0")
    time.sleep(0.2)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(3)]
    time.sleep(0.4)  # the free worker holds three connections, the busy one one
    count = 5
    received = _pipeline(idle[0], count)
    # The last answer, with nothing read ahead any more, is the one that may close it.
    assert received.lower().count(b"connection: close") <= 1
    assert received.lower().rfind(b"connection: close") >= received.rfind(b"HTTP/1.1 200 OK")
    blocker.getresponse().read()
    blocker.close()
    for sock in idle:
        sock.close()


def _parsed(raw: bytes) -> object:
    """The first request gunicorn's own parser reads from ``raw``, as a worker gets it."""
    return next(RequestParser(Config(), iter([raw]), ("127.0.0.1", 1)))


def test_what_counts_as_a_pipeline_when_a_request_is_handled() -> None:
    body = b'{"scope": "acme:alice:proj", "query": "deploy"}'
    post = b"POST /api/v1/memory/recall HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(
        body
    )
    get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    # A request alone, its body read along with its head: it may be the one let go.
    assert _pipelined(_parsed(post + body)) is False
    assert _pipelined(_parsed(get)) is False
    # The next request already read: never.
    assert _pipelined(_parsed(post + body + get)) is True
    assert _pipelined(_parsed(get + get)) is True
    # A chunked body with anything buffered: where it ends is not known, so never.
    chunked = (
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    assert _pipelined(_parsed(chunked)) is True


def test_a_worker_lets_a_connection_go_only_above_its_fair_share_while_another_is_below() -> None:
    assert over_fair_share(5, [3]) is True  # 8 over 2: four each
    assert over_fair_share(4, [4]) is False
    assert over_fair_share(3, [2]) is False  # 5 over 2 cannot be more even
    assert over_fair_share(6, [0]) is True
    assert over_fair_share(4, [3, 3, 2]) is True  # 12 over 4: three each
    assert over_fair_share(4, [4, 4, 0]) is True
    assert over_fair_share(4, [4, 4, 4]) is False
    assert over_fair_share(9, []) is False  # a worker alone has nowhere to send it


def _fill_slot(table: ConnectionTable, slot: int, pid: int, connections: int) -> None:
    table.attach(slot, pid)
    table.publish(slot, connections)


def test_the_connection_table_is_shared_with_the_workers_forked_after_it() -> None:
    """A worker's count, written in the child, is what every other process reads."""
    table = ConnectionTable(slots=4)
    table.attach(0, os.getpid(), 2)
    child = multiprocessing.get_context("fork").Process(target=_fill_slot, args=(table, 1, 4242, 7))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0
    assert table.others(0) == [7]
    assert table.others(1) == [2]


def test_a_slot_is_counted_from_its_worker_start_until_the_arbiter_frees_it() -> None:
    table = ConnectionTable(slots=3)
    assert table.free_slot(set()) == 0
    assert table.others(2) == []  # claimed, not started: counted nowhere
    table.attach(0, 100, 5)
    table.attach(1, 101, 1)
    assert table.free_slot({0, 1}) == 2
    assert table.free_slot({0, 1, 2}) is None  # full: the next worker is not balanced
    assert sorted(table.others(2)) == [1, 5]
    table.release(0)  # child_exit: its connections ended with it
    assert table.others(2) == [1]
    table.attach(0, 102, 9)  # a stale count is never read by the slot's next worker
    assert table.free_slot({1, 2}) == 0 and table.others(1) == []


def test_without_a_slot_a_worker_never_lets_a_connection_go() -> None:
    """gunicorn run with another configuration (no pre_fork hook): no table, nothing shed."""
    worker = object.__new__(BalancedThreadWorker)
    worker.nr_conns = 50
    assert worker.balance_slot is None
    assert worker._holds_too_many() is False
