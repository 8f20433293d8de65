"""Per-endpoint secrets and the ``Webhook-Signature`` header.

The secret is *derived*, never stored: ``HMAC-SHA256(server key,
"aetnaweb-webhook-secret-v1|" + endpoint id + "|" + salt)``, where the salt is
random per endpoint and the server key is Django's ``SECRET_KEY``. Why not
store it encrypted: the database alone (a backup, a replica, a leaked dump)
then yields no secret and there is no ciphertext key to manage; the salt is
useless without the server key. Rotating the salt rotates the secret;
rotating ``SECRET_KEY`` rotates every endpoint's secret at once (receivers
need the new ones, shown again only by "rotate secret").

Signature: ``Webhook-Signature: t=<unix seconds>,v1=<hex>`` with
``v1 = HMAC-SHA256(secret, "<t>." + body)``, the scheme Stripe uses; the
receiver recomputes it over the raw body and refuses old timestamps
(docs/webhooks.md has the verification code).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from django.conf import settings

SECRET_PREFIX = "whsec_"  # noqa: S105  (a public marker, not a secret)
SIGNATURE_HEADER = "Webhook-Signature"
_DERIVATION_LABEL = b"aetnaweb-webhook-secret-v1|"


def new_salt() -> str:
    return secrets.token_hex(16)


def endpoint_secret(endpoint_id: str, salt: str) -> str:
    """The endpoint's signing secret, recomputed from the server key and its salt."""
    key = settings.SECRET_KEY.encode("utf-8")
    message = _DERIVATION_LABEL + endpoint_id.encode("ascii") + b"|" + salt.encode("ascii")
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return SECRET_PREFIX + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>." + body`` under ``secret``."""
    signed = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Webhook-Signature`` value: ``t=<timestamp>,v1=<signature>``."""
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"
