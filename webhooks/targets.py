"""Which URLs a webhook may be sent to, and connecting to exactly the address checked.

A webhook URL is chosen by an operator but fetched by the server, so it is an
SSRF door: it must not reach the database, a cloud metadata service or
anything else on a private network. The rules:

- ``https://`` only; ``http://`` only when ``AETNAWEB_WEBHOOKS_ALLOW_HTTP`` is on
  *and* the host is loopback (tests, local development);
- no user name or password in the URL, no control characters, ASCII host
  (an IDN is given in its ``xn--`` form);
- port 443 (80 for loopback ``http://``), or one listed in
  ``AETNAWEB_WEBHOOKS_ALLOWED_PORTS``: an arbitrary port would let a URL probe
  services that listen on a public address but were never meant for it. A
  loopback target in development (``AETNAWEB_WEBHOOKS_ALLOW_HTTP``) may use
  any port, as local receivers do;
- every address the host resolves to must be global unicast: loopback,
  private, link-local (169.254.169.254), shared (100.64/10), multicast,
  reserved and unspecified addresses are refused. Loopback is allowed only
  with ``AETNAWEB_WEBHOOKS_ALLOW_HTTP``;
- IPv6 forms that carry an IPv4 address are judged by it, whatever Python's
  tables say about the IPv6 prefix: 6to4 (``2002::/16``, e.g.
  ``2002:a9fe:a9fe::`` is 169.254.169.254) and NAT64 (``64:ff9b::/96``) are
  accepted only if the IPv4 address inside is public; IPv4-mapped
  (``::ffff:0:0/96``) and IPv4-compatible (``::/96``) addresses, Teredo
  (``2001::/32``, a tunnel whose endpoint is hidden) and the local-use NAT64
  prefix (``64:ff9b:1::/48``) are refused outright.

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
    standard = 443 if scheme == "https" else 80
    port = port or standard
    allowed = {standard, *settings.AETNAWEB_WEBHOOKS_ALLOWED_PORTS}
    if port not in allowed and not (_allow_loopback() and _is_loopback_name(host)):
        raise TargetRefused(
            f"port {port} is not allowed for webhooks: use {standard}, or ask the operator to "
            "list it in AETNAWEB_WEBHOOKS_ALLOWED_PORTS"
        )
    return Target(scheme, host, port, path)


def _is_loopback_name(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


TEREDO = ipaddress.IPv6Network("2001::/32")
SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _refuse_non_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address, shown: str) -> None:
    if address.is_loopback:
        raise TargetRefused(f"{shown} is a loopback address")
    if not address.is_global or address.is_multicast or address.is_reserved:
        raise TargetRefused(f"{shown} is not a public address (private, link-local or reserved)")


def _check_embedded(address: ipaddress.IPv6Address) -> bool:
    """Judge an IPv6 address that carries an IPv4 one by that IPv4 address.

    True when ``address`` is such a form and passed; False when it is not one.
    The IPv4 address inside is where the packets end up, so it must be public
    (loopback too is refused here: the development exception is for plain
    loopback only).
    """
    if address in TEREDO:
        raise TargetRefused(f"{address} is a Teredo tunnel address; its endpoint is hidden")
    if address in NAT64_LOCAL_USE:
        raise TargetRefused(f"{address} is in the local-use NAT64 prefix, not a public address")
    embedded: ipaddress.IPv4Address | None = None
    if address.ipv4_mapped is not None:
        shown = f"{address} (IPv4-mapped {address.ipv4_mapped})"
        _refuse_non_public(address.ipv4_mapped, shown)
        raise TargetRefused(f"{shown} is refused: give the IPv4 address itself")
    if address in IPV4_COMPATIBLE and int(address) > 1:  # ::1 and :: are judged as themselves
        raise TargetRefused(f"{address} is an IPv4-compatible address, not a public address")
    if address in SIX_TO_FOUR:
        embedded = address.sixtofour
    elif address in NAT64:
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if embedded is None:
        return False
    _refuse_non_public(embedded, f"{address} (which embeds {embedded})")
    return True


def check_address(raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address if a webhook may connect to it; :class:`TargetRefused` otherwise."""
    address = ipaddress.ip_address(raw.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(address, ipaddress.IPv6Address) and _check_embedded(address):
        return address
    if address.is_loopback:
        if _allow_loopback():
            return address
        raise TargetRefused(f"{address} is a loopback address")
    _refuse_non_public(address, str(address))
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
