"""One HTTP POST to a checked address: short timeouts, no redirects, a short excerpt kept.

``http.client`` follows no redirects by itself; the connection is pinned to
the address :func:`webhooks.targets.checked_address` approved while TLS still
verifies the certificate for the URL's host name (SNI and hostname check).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from typing import Any

from webhooks.targets import Target

EXCERPT_CHARS = 200
MAX_READ_BYTES = 4096


@dataclass(frozen=True)
class Response:
    status: int
    excerpt: str


def _pinned(connection: http.client.HTTPConnection, address: str) -> None:
    # http.client connects via _create_connection((host, port), ...); send it to
    # the approved address instead of resolving the host name again.
    def create_connection(
        _where: tuple[str, int], timeout: Any = None, source_address: Any = None
    ) -> socket.socket:
        return socket.create_connection((address, connection.port), timeout, source_address)

    connection._create_connection = create_connection  # type: ignore[attr-defined]


def post(
    target: Target, address: str, body: bytes, headers: dict[str, str], *, timeout: float
) -> Response:
    """POST ``body`` to ``target`` at ``address``; raise ``OSError`` on network failure."""
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    _pinned(connection, address)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        answer = connection.getresponse()
        raw = answer.read(MAX_READ_BYTES)
        # Only a short, printable excerpt is kept: a receiver's error page is its business.
        text = raw.decode("utf-8", "replace")
        excerpt = "".join(ch if ch.isprintable() else " " for ch in text)[:EXCERPT_CHARS]
        return Response(answer.status, excerpt.strip())
    except (http.client.HTTPException, ssl.SSLError, ValueError) as exc:
        raise OSError(f"bad HTTP answer: {type(exc).__name__}") from exc
    finally:
        connection.close()
