"""Signed approvals: ``aetna-action-approval-v1`` (F-2, AP-6) and where the key comes from.

The key lives only on the reviewer side (decision 6): it is read from the
``AETNAWEB_APPROVAL_KEY`` setting or the file named by
``AETNAWEB_APPROVAL_KEY_FILE``, never from a request, and it is never logged,
audited or echoed in an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings

from actions import formats
from actions.errors import ApprovalKeyError, ApprovalUnavailable
from audit.canonical import canonical_bytes

MIN_KEY_BYTES = 32

NO_KEY_MESSAGE = (
    "approval is disabled: no approval key is configured (an ApprovalAuthority is required). "
    "Set AETNAWEB_APPROVAL_KEY or AETNAWEB_APPROVAL_KEY_FILE (at least 32 bytes) on the "
    "reviewer side."
)


class ApprovalAuthority:
    """Issues and checks approvals with an HMAC-SHA256 key.

    Only possession of the key is proven by a signature (AP-6); who the
    approver is comes from the authenticated principal the service passes in.
    """

    def __init__(self, secret: bytes, *, ttl_seconds: int = 900) -> None:
        if not isinstance(secret, bytes) or len(secret) < MIN_KEY_BYTES:
            raise ApprovalKeyError(
                f"the approval key must be at least {MIN_KEY_BYTES} bytes; approval stays "
                "disabled until a longer key is configured"
            )
        if not isinstance(ttl_seconds, int) or ttl_seconds <= 0:
            raise ApprovalKeyError("approval ttl_seconds must be positive")
        self._secret = secret
        self.ttl_seconds = ttl_seconds

    def __repr__(self) -> str:  # never show the key
        return f"ApprovalAuthority(ttl_seconds={self.ttl_seconds})"

    def sign(self, approval: Mapping[str, Any]) -> str:
        body = canonical_bytes(formats.approval_signing_body(approval))
        return hmac.new(self._secret, body, hashlib.sha256).hexdigest()

    def issue(
        self,
        *,
        transaction_id: str,
        plan_hash: str,
        approver: str,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        issued = now or datetime.now(UTC)
        approval: dict[str, Any] = {
            "transaction_id": transaction_id,
            "plan_hash": plan_hash,
            "approver": approver,
            "issued_at": issued.isoformat(),
            "expires_at": (issued + timedelta(seconds=self.ttl_seconds)).isoformat(),
            "nonce": secrets.token_hex(16),
            "format": formats.APPROVAL_FORMAT,
        }
        approval["signature"] = self.sign(approval)
        return approval

    def signature_valid(self, approval: Mapping[str, Any]) -> bool:
        signature = approval.get("signature")
        if not isinstance(signature, str):
            return False
        return hmac.compare_digest(self.sign(approval), signature)

    def verify(
        self,
        approval: Mapping[str, Any],
        *,
        transaction_id: str,
        plan_hash: str,
        at: datetime | None = None,
    ) -> bool:
        """AP-4: binding, signature and time window; ``at`` defaults to now."""
        if approval.get("format") != formats.APPROVAL_FORMAT:
            return False
        if (
            approval.get("transaction_id") != transaction_id
            or approval.get("plan_hash") != plan_hash
        ):
            return False
        if not self.signature_valid(approval):
            return False
        window = approval_window(approval)
        if window is None:
            return False
        issued_at, expires_at = window
        moment = at or datetime.now(UTC)
        return issued_at <= moment <= expires_at


def approval_window(approval: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    """Parse ``issued_at``/``expires_at`` back (C-2); ``None`` if either is unusable."""
    try:
        issued_at = datetime.fromisoformat(approval["issued_at"])
        expires_at = datetime.fromisoformat(approval["expires_at"])
    except (KeyError, TypeError, ValueError):
        return None
    if issued_at.tzinfo is None or expires_at.tzinfo is None:
        return None
    return issued_at, expires_at


def read_key_file(path: str | Path) -> bytes:
    """A key file's bytes with surrounding whitespace stripped."""
    try:
        return Path(path).read_bytes().strip()
    except OSError as exc:
        raise ApprovalUnavailable(
            f"cannot read the approval key file {str(path)!r}: {exc.strerror or exc}"
        ) from exc


def configured_authority(*, required: bool = True) -> ApprovalAuthority | None:
    """The authority built from settings, read at call time (so tests can override them).

    Without a key: raise :class:`ApprovalUnavailable` with a clear message when
    ``required``, else return ``None``. A key that is set but too short is
    always an error: it is a misconfiguration, not an absence.
    """
    raw_key = getattr(settings, "AETNAWEB_APPROVAL_KEY", "") or ""
    key_file = getattr(settings, "AETNAWEB_APPROVAL_KEY_FILE", "") or ""
    ttl = int(getattr(settings, "AETNAWEB_APPROVAL_TTL_SECONDS", 900))
    secret: bytes | None = None
    if raw_key:
        secret = raw_key.encode("utf-8") if isinstance(raw_key, str) else bytes(raw_key)
    elif key_file:
        secret = read_key_file(key_file)
    if not secret:
        if required:
            raise ApprovalUnavailable(NO_KEY_MESSAGE)
        return None
    return ApprovalAuthority(secret, ttl_seconds=ttl)
