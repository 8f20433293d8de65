"""A real HTTP receiver on loopback, and settings that let webhooks reach it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aetnaweb.access import SYSTEM
from webhooks import services
from webhooks.events import NEEDS_A_PERSON


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Records each POST; answers from ``script`` ((status, delay seconds, body) per request)."""

    port: int = 0
    requests: list[Received] = field(default_factory=list)
    script: list[tuple[int, float, bytes]] = field(default_factory=list)
    default: tuple[int, float, bytes] = (200, 0.0, b"ok")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/aetnaweb"


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            receiver.requests.append(Received(self.path, dict(self.headers.items()), body))
            status, delay, answer = receiver.script.pop(0) if receiver.script else receiver.default
            if delay:
                time.sleep(delay)
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up (timeout test)
                self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _webhook_settings(settings):
    """Loopback allowed (tests only), fast retries, short timeouts."""
    settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP = True
    settings.AETNAWEB_WEBHOOKS_BACKOFF_SECONDS = 0
    settings.AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS = 1
    settings.AETNAWEB_WEBHOOKS_MAX_ATTEMPTS = 3
    settings.AETNAWEB_PUBLIC_URL = "https://aetnaweb.example"


def register(url: str, scope: str = "acme:*:*", events=None, principal=SYSTEM):
    """An endpoint for ``scope``'s subtree; returns (endpoint, secret).

    By default it hears every event that needs a person; memory changes are opt-in.
    """
    issued = services.create_endpoint(
        principal=principal, url=url, scope=scope, events=list(events or NEEDS_A_PERSON)
    )
    return issued.endpoint, issued.secret
