"""Which URLs a webhook may be sent to, and connecting to exactly the address checked.

A webhook URL is chosen by an operator but fetched by the server, so it is an
SSRF door: it must not reach the database, a cloud metadata service or
anything else on a private network. The rules:

- ``https://`` only; ``http://`` only when ``AETNAWEB_WEBHOOKS_ALLOW_HTTP`` is on
  *and* the host is loopback (tests, local development);
- no user name or password in the URL, no control characters, ASCII host
  (an IDN is given in its ``xn--`` form);
- every address the host resolves to must be global unicast: loopback,
  private, link-local (169.254.169.254), shared (100.64/10), multicast,
  reserved and unspecified addresses are refused, IPv4-mapped IPv6 included.
  Loopback is allowed only with ``AETNAWEB_WEBHOOKS_ALLOW_HTTP``.

The check runs at registration and again at every delivery, and the delivery
connects to the very address it checked (no second DNS lookup that a
rebinding attacker could answer differently). Redirects are never followed.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

MAX_URL_LENGTH = 2000


class TargetRefused(ValueError):
    """A URL or address a webhook may not be sent to; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line


def _allow_loopback() -> bool:
    return bool(settings.AETNAWEB_WEBHOOKS_ALLOW_HTTP)


def parse_target(url: str) -> Target:
    """Split and check ``url`` (no DNS); raise :class:`TargetRefused` with the reason."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise TargetRefused(f"a webhook URL is 1 to {MAX_URL_LENGTH} characters")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url) or not url.isascii():
        raise TargetRefused(
            "the URL may not contain spaces, control characters or non-ASCII characters "
            "(give an international domain in its xn-- form and percent-encode the path)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"the URL does not parse: {exc}") from exc
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in {"https", "http"}:
        raise TargetRefused("a webhook URL starts with https://")
    if not host:
        raise TargetRefused("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("put no user name or password in the URL; the signature authenticates")
    if parts.fragment:
        raise TargetRefused("a webhook URL has no #fragment")
    if scheme == "http":
        if not _allow_loopback():
            raise TargetRefused(
                "a webhook URL must use https:// (http:// only for loopback in development, "
                "with AETNAWEB_WEBHOOKS_ALLOW_HTTP)"
            )
        if not _is_loopback_name(host):
            raise TargetRefused("http:// is allowed only for a loopback host (127.0.0.1, ::1)")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def _is_loopback_name(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address if a webhook may connect to it; :class:`TargetRefused` otherwise."""
    address = ipaddress.ip_address(raw.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        if _allow_loopback():
            return address
        raise TargetRefused(f"{address} is a loopback address")
    if not address.is_global or address.is_multicast or address.is_reserved:
        raise TargetRefused(f"{address} is not a public address (private, link-local or reserved)")
    return address


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (one DNS lookup)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise TargetRefused(f"{host} does not resolve") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def checked_address(target: Target) -> str:
    """Resolve ``target``'s host and return an address to connect to, all of them checked.

    Every address must pass: a name that answers with one public and one
    private address is refused, not tried in turn.
    """
    addresses = resolve(target.host, target.port)
    if not addresses:
        raise TargetRefused(f"{target.host} does not resolve")
    for address in addresses:
        check_address(address)
    return addresses[0]


def check_at_registration(url: str) -> Target:
    """Check ``url`` for registration: its form, and its addresses if the name resolves now.

    A name that does not resolve yet is accepted (DNS may come later); every
    delivery resolves and checks again before it connects.
    """
    target = parse_target(url)
    try:
        addresses = resolve(target.host, target.port)
    except TargetRefused:
        return target
    for address in addresses:
        check_address(address)
    return target
