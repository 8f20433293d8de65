"""Signing: a known answer, the docs' verification code run as written, derived secrets."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from webhooks import signing

ROOT = Path(__file__).resolve().parents[2]


def test_signature_known_answer():
    # Given a fixed secret, timestamp and body (expected value from
    # `printf '%s' '1767225600.{...}' | openssl dgst -sha256 -hmac <secret>`)
    secret = "whsec_known-answer-test-secret"
    body = b'{"id":"whd_test","type":"webhook.test"}'
    # When it is signed, then the header carries exactly that HMAC
    assert signing.signature_header(secret, 1767225600, body) == (
        "t=1767225600,v1=5ab05670ae4163b5d6c9e5c037c21d4e0817764362806aa2f157a3bc45ff023d"
    )


def docs_verifier():
    """The verification function from docs/webhooks.md, executed as a reader would paste it."""
    text = (ROOT / "docs" / "webhooks.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- verify-snippet[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert block, "docs/webhooks.md lost its verification snippet"
    namespace: dict = {}
    exec(compile(block.group(1), "docs/webhooks.md", "exec"), namespace)  # noqa: S102
    return namespace["verify_webhook"]


def test_the_documented_verifier_accepts_our_signature_and_refuses_forgeries():
    verify = docs_verifier()
    secret = "whsec_" + "s" * 43
    body = b'{"id":"whd_1","type":"memory.record_quarantined"}'
    header = signing.signature_header(secret, int(time.time()), body)
    # Then a genuine delivery passes
    assert verify(secret, header, body)
    # And a changed body, another secret, an old timestamp or junk fail
    assert not verify(secret, header, body + b" ")
    assert not verify("whsec_other", header, body)
    old = signing.signature_header(secret, int(time.time()) - 3600, body)
    assert not verify(secret, old, body)
    assert not verify(secret, "v1=abc", body)
    assert not verify(secret, "", body)


@pytest.mark.django_db
def test_a_secret_is_derived_from_the_server_key_the_endpoint_and_its_salt(settings):
    first = signing.endpoint_secret("whe_1", "a" * 32)
    assert first.startswith("whsec_") and len(first) > 40
    assert signing.endpoint_secret("whe_1", "a" * 32) == first  # recomputable, so not stored
    assert signing.endpoint_secret("whe_2", "a" * 32) != first
    assert signing.endpoint_secret("whe_1", "b" * 32) != first
    settings.SECRET_KEY = "another-server-key-" * 3
    assert signing.endpoint_secret("whe_1", "a" * 32) != first
