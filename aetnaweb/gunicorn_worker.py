"""gunicorn's ``gthread`` worker, taking a new connection only while it has a thread free.

Every worker process listens on the same socket, and the stock ``gthread``
worker accepts every connection it is offered (up to ``worker_connections``,
1,000), whether or not its threads are all busy. Clients that keep their
connections alive (agents, a reverse proxy's upstream pool, the load
benchmark) then stay where they first landed, and they all tend to land on
one process: measured with 32 kept-alive clients and 2 workers, one worker
ran at 104-109% of a core (the GIL's ceiling) while the other idled at 0-32%,
so the server used about half of a 2-core machine.

:class:`BalancedThreadWorker` stops listening while all of its ``threads``
are busy (counting connections it has accepted whose first request has not
arrived yet) and listens again the moment one is free, like gunicorn's ``sync``
worker does with its one thread. A connection that arrives meanwhile waits
in the kernel's accept queue for whichever worker frees a thread first, so
kept-alive connections spread over the processes by how fast each serves
them. So that no connection starves while every worker stays busy, a busy
worker takes one connection each time the queue has stayed non-empty for
:data:`ACCEPT_WAIT_SECONDS` (the stock worker would have taken them all at
once); while not listening, a worker looks at the queue that often.
Connections already accepted are served as before: requests on them queue
for this worker's threads.

A new connection's first request is awaited on the worker's event loop, not
in one of its threads (see :meth:`BalancedThreadWorker.accept`).

Kept-alive connections are also kept balanced after they are accepted. A
client that connects while the workers are equally busy lands on whichever
takes it first, and stays there: measured with 8 kept-alive clients and 2
one-thread workers, the split was 5 to 3, so the five clients on one worker
waited behind four others (recall p50 40.5 ms) and the three on the other
behind two (23.7 ms). Each worker publishes how many connections it holds in
a small table of memory the arbiter shares with its workers
(:class:`ConnectionTable`; the arbiter gives each worker a slot in
:func:`claim_slot` and frees it in :func:`release_slot`, gunicorn's
``pre_fork`` and ``child_exit`` hooks, set in :mod:`aetnaweb.gunicorn_conf`).
A worker holding more than its fair share (the total over the workers,
rounded up) while another holds less answers the request it is serving with
``Connection: close``: the client, as HTTP clients do, opens a new
connection for its next request, which the accept queue gives to a worker
with a thread free. Nothing is refused or retried: the request is answered
in full, and only the connection ends. A connection whose client has already
sent its next requests (a pipeline) is never the one let go. Without the hooks (gunicorn run with
another configuration) a worker has no slot and never sheds a connection.

With one thread (``GUNICORN_THREADS=1``, the default on SQLite) the worker
serves each request on its own main thread, between turns of its event
loop, instead of handing it to a pool of one thread: the hand-over (a
future, a pipe to wake the loop, the two threads taking turns with the
GIL) cost about 0.14 ms of CPU a request, a fortieth of an API request.
A small thread keeps telling the arbiter the worker is alive meanwhile,
so a long request (a streamed export to a slow client) is never mistaken
for a hung worker, as with the pool.

It relies on gunicorn 27's ``ThreadWorker`` internals (``accept``,
``enqueue_req``, ``finish_request``, ``set_accept_enabled``,
``wait_for_and_dispatch_events``, its pending connections), which is why
pyproject.toml pins gunicorn 27; ``tests/aetnaweb/test_gunicorn_worker.py``
runs it in a real gunicorn.
"""

from __future__ import annotations

import errno
import mmap
import os
import select
import selectors
import threading
import time
from collections import deque
from concurrent.futures import Future
from functools import partial
from typing import Any

from gunicorn.workers.gthread import DEFAULT_WORKER_DATA_TIMEOUT, TConn, ThreadWorker

# How long a new connection waits in the accept queue while every worker is
# busy before a busy worker takes it anyway (to queue behind its requests).
# The same for every worker: a wait that grew with the connections a worker
# holds did favour the least-loaded one, but it halved how fast a burst of
# new connections is taken while every worker is busy (pages p99 760-780 ms
# instead of 390-410 in bench/load.py's pages phase, 32 new connections).
ACCEPT_WAIT_SECONDS = 0.05
# How often a worker that serves requests on its main thread tells the
# arbiter it is alive meanwhile (the stock event loop does it at least as often).
HEARTBEAT_SECONDS = 1.0


# After letting a connection go, a worker waits until its client has connected
# again (to any worker) before it lets another go, or this long if it never does.
SHED_SETTLE_SECONDS = 1.0
# Slots in the connection table: room for this many workers at once (gunicorn
# raised above it with TTIN, the workers without a slot are simply not balanced).
TABLE_SLOTS = 64


class ConnectionTable:
    """Each worker's process ID and open connections, in memory shared by the arbiter and its workers.

    An anonymous shared mapping created in the arbiter before the first
    fork: every worker forked afterwards sees the same memory. A slot is two
    32-bit integers, the worker's process ID (0: free, or claimed but not
    started yet) and how many connections it holds. Each worker writes only
    its own slot; a value read while another worker writes it is at worst
    one connection out of date, which delays a rebalance by one request.
    """

    def __init__(self, slots: int = TABLE_SLOTS) -> None:
        self.slots = slots
        self._memory = mmap.mmap(-1, slots * 2 * 4)  # zero-filled, MAP_SHARED
        self._cells = memoryview(self._memory).cast("i")

    def free_slot(self, taken: set[int]) -> int | None:
        """The lowest slot not in ``taken`` (the slots of the workers alive), emptied; None if full."""
        for slot in range(self.slots):
            if slot not in taken:
                self.release(slot)
                return slot
        return None

    def attach(self, slot: int, pid: int, connections: int = 0) -> None:
        self._cells[2 * slot + 1] = connections
        self._cells[2 * slot] = pid

    def release(self, slot: int) -> None:
        self._cells[2 * slot] = 0
        self._cells[2 * slot + 1] = 0

    def publish(self, slot: int, connections: int) -> None:
        self._cells[2 * slot + 1] = connections

    def others(self, slot: int) -> list[int]:
        """The connections held by every started worker but the one in ``slot``."""
        pids = self._cells[0::2].tolist()
        counts = self._cells[1::2].tolist()
        return [counts[i] for i, pid in enumerate(pids) if pid and i != slot]


def over_fair_share(mine: int, others: list[int]) -> bool:
    """Whether a worker holding ``mine`` connections should let one go, the others holding ``others``.

    Fair share: all connections over all workers, rounded up. A worker
    above it lets one go only while some other worker is below it, so a
    split that cannot be more even (5 connections: 3 and 2) stays as it is.
    """
    if not others:
        return False
    fair = -(-(mine + sum(others)) // (len(others) + 1))
    return mine > fair and min(others) < fair


def _pipelined(req: Any) -> bool:
    """Whether the client has sent more than this request already (a pipeline, or can't tell).

    Such a connection is never let go: the requests read ahead would go
    unanswered, and the client would have to send them again.
    """
    try:
        buffered = len(req.unreader.buf.getvalue())
    except AttributeError:
        return True
    remaining = getattr(getattr(req.body, "reader", None), "length", None)
    if not isinstance(remaining, int):  # a chunked body: where it ends is not known yet
        return buffered > 0
    return buffered > remaining


_table: ConnectionTable | None = None


def claim_slot(server: Any, worker: Any) -> None:
    """gunicorn's ``pre_fork`` hook, in the arbiter: give the worker about to fork a slot of its own."""
    global _table
    if _table is None:
        _table = ConnectionTable()
    slots = (getattr(alive, "balance_slot", None) for alive in server.WORKERS.values())
    worker.balance_slot = _table.free_slot({slot for slot in slots if slot is not None})


def release_slot(server: Any, worker: Any) -> None:
    """gunicorn's ``child_exit`` hook, in the arbiter: a worker has ended, its connections with it."""
    slot = getattr(worker, "balance_slot", None)
    if _table is not None and slot is not None:
        _table.release(slot)


class BalancedThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn is untyped
    """``gthread`` that accepts new connections while a thread is free, or once they wait too long."""

    # Set by claim_slot before the fork; None: this worker is not balanced.
    balance_slot: int | None = None
    _connections = 0
    # The last connection let go: when, and how many connections all workers held before.
    _shed_at = 0.0
    _shed_total = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Requests handed to the thread pool and not yet finished. Only the
        # worker's main thread (its event loop) reads or changes these.
        self.in_flight = 0
        self.waiting_since: float | None = None
        self._shed_lock = threading.Lock()
        # One thread: requests are served on the main thread, in this order.
        self.inline = self.cfg.threads == 1
        self.inline_queue: deque[Any] = deque()

    @property
    def nr_conns(self) -> int:
        """gunicorn's count of this worker's open connections, published in the connection table."""
        return self._connections

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        self._connections = value
        if self.balance_slot is not None and _table is not None:
            _table.publish(self.balance_slot, value)

    def init_process(self) -> None:
        if self.balance_slot is not None and _table is not None:
            _table.attach(self.balance_slot, os.getpid(), self.nr_conns)
        if self.inline:
            threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()
        super().init_process()  # runs the event loop until the worker stops

    def _heartbeat(self) -> None:
        # Without it a request longer than gunicorn's timeout (30 s) would get
        # the worker killed, as the main thread cannot notify while it serves.
        while True:
            self.notify()
            time.sleep(HEARTBEAT_SECONDS)

    def busy(self) -> int:
        """Requests in the pool, plus accepted connections whose first request has not come yet.

        The latter count as busy: each is about to be a request here, and
        without them a worker would take a whole burst of new connections
        before the first of them had sent a byte.
        """
        return self.in_flight + len(self.pending_conns)

    def may_accept(self) -> bool:
        return self.busy() < self.cfg.threads or self._overdue()

    def set_accept_enabled(self, enabled: bool) -> None:
        # gunicorn's loop asks to listen whenever it is under worker_connections;
        # listen only if a thread is also free, or if connections have waited
        # too long. While it may not, the loop asks again on every turn, and
        # each finished request is such a turn.
        super().set_accept_enabled(enabled and self.may_accept())

    def accept(self, listener: Any) -> None:
        # Each connection taken while busy waits its own ACCEPT_WAIT_SECONDS: a
        # burst is shared out among the workers instead of going to the first.
        if not self._accepting:
            # The listener was ready when the loop last polled, but the worker
            # stopped listening since (it took a request from the same batch
            # of events): another worker will take the connection.
            return
        self.waiting_since = None
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client, address, listener.getsockname())
        # Its first bytes are awaited here, on the event loop, not in a thread
        # as the stock worker does for up to 5 s: a client that connects and
        # sends nothing (a browser's speculative preconnect, a port check)
        # must not hold one of a few threads meanwhile. It gets as long in all.
        client.setblocking(False)
        conn.timeout = time.monotonic() + DEFAULT_WORKER_DATA_TIMEOUT + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(
            client, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn)
        )
        self._stop_listening_if_full()

    def handle_request(self, req: Any, conn: Any) -> Any:
        if not _pipelined(req) and self._holds_too_many():
            # Answered in full, then closed: the client's next request comes
            # on a new connection, which a less loaded worker takes.
            req.force_close()
        return super().handle_request(req, conn)

    def _holds_too_many(self) -> bool:
        """Whether to let the connection being served go (see the module notes).

        One at a time: the connection let go last is counted nowhere until
        its client connects again, so judging by the counts meanwhile would
        let several go for one too many. The next waits until the total is
        back where it was, or SHED_SETTLE_SECONDS if the client went away.
        """
        if self.balance_slot is None or _table is None:
            return False
        others = _table.others(self.balance_slot)
        if not over_fair_share(self.nr_conns, others):
            return False
        with self._shed_lock:  # the pool's threads decide one at a time
            now = time.monotonic()
            total = self.nr_conns + sum(others)
            if total < self._shed_total and now - self._shed_at < SHED_SETTLE_SECONDS:
                return False
            self._shed_at, self._shed_total = now, total
            return True

    def enqueue_req(self, conn: Any) -> None:
        self.in_flight += 1
        if self.inline:
            # Served by _serve_queued once this turn's events are dispatched,
            # as a pool's thread would: counted busy until then.
            self.inline_queue.append(conn)
        else:
            super().enqueue_req(conn)
        self._stop_listening_if_full()

    def finish_request(self, conn: Any, fs: Any) -> None:
        # Before gunicorn's own handling, which may hand the connection straight
        # back to the pool (a request already read ahead): enqueue_req counts it.
        self.in_flight -= 1
        super().finish_request(conn, fs)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # While not listening, look at the accept queue at least every
        # ACCEPT_WAIT_SECONDS (a turn of the loop), not only when something
        # else happens here: an idle worker holding a silent connection would
        # otherwise notice a waiting client only at gunicorn's 1 s tick.
        if not self._accepting and self.alive:
            timeout = min(timeout, ACCEPT_WAIT_SECONDS)
        if not self.inline:
            super().wait_for_and_dispatch_events(timeout)
            return
        self._dispatch(timeout)
        self._serve_queued()

    def _dispatch(self, timeout: float) -> None:
        """gunicorn's dispatch of ready events, with new connections last.

        Requests are queued first, so whether to take a new connection is
        decided knowing every request this turn brought (the pool's event loop
        decides as each arrives, having woken for each).
        """
        events = self.poller.select(timeout)  # retried by Python if a signal interrupts it
        for key, _ in sorted(events, key=lambda event: event[0].data == self.accept):
            key.data(key.fileobj)

    def _serve_queued(self) -> None:
        """Serve the queued requests in turn, taking in what arrives between two of them.

        finish_request may queue the same connection again (its client had
        already sent the next request): served by this loop, not by a
        recursive call, so a long pipeline cannot exhaust the stack.
        """
        while self.inline_queue:
            conn = self.inline_queue.popleft()
            done: Future[Any] = Future()
            try:
                done.set_result(self.handle(conn))
            except Exception as exc:  # handle() answers errors itself; close the connection
                done.set_exception(exc)
            self.finish_request(conn, done)
            if self.inline_queue:
                # What the pool's event loop would have done meanwhile: queue
                # requests that arrived and, if a thread's worth is free or a
                # connection has waited too long, take a new connection.
                if self.alive:
                    self.set_accept_enabled(self.nr_conns < self.worker_connections)
                self._dispatch(0)

    def _stop_listening_if_full(self) -> None:
        # gunicorn's loop only stops listening at worker_connections.
        if self._accepting and not self.may_accept():
            super().set_accept_enabled(False)

    def _overdue(self) -> bool:
        """Whether connections have been waiting to be accepted for ``ACCEPT_WAIT_SECONDS``.

        Every worker may be busy for long stretches under load; without this,
        a new connection would wait until one of them ran out of work.
        """
        try:
            ready, _, _ = select.select(self.sockets, [], [], 0)
        except (OSError, ValueError):  # a listener closed at shutdown
            return False
        if not ready:
            self.waiting_since = None
            return False
        now = time.monotonic()
        if self.waiting_since is None:
            self.waiting_since = now
        return now - self.waiting_since >= ACCEPT_WAIT_SECONDS
