"""Issue 29 item 4: a forgotten short value cannot be brute-forced back from the audit chain.

Before: ``memory.record_created`` kept the plain SHA-256 of "User's bank PIN
is 4821." and of ``{"customer_id": 90417}``, and the slot name "bank pin" as
text; an audit export plus 10,000 hashes gave the PIN back after a forget.
Now every digest of memory content in the chain is keyed by a per-row salt
stored beside the content and destroyed by the purge.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from aetnaweb.access import SYSTEM
from audit.canonical import canonical_json
from audit.selectors import export_lines
from memory import services
from memory.binding import salted_sha256
from memory.models import Episode, Record

SCOPE = "acme:alice:proj"
PIN_TEXT = "My bank PIN is 4821."
METADATA = {"customer_id": 90417}


def _digests(lines: list[str]) -> set[str]:
    """Every 64-hex value anywhere in the exported rows (payloads included)."""
    return {value for line in lines for value in re.findall(r"[0-9a-f]{64}", line)}


def _pin_guesses() -> dict[str, str]:
    # The attacker knows the engine's rewrite ("my X is Y" -> "User's X is Y.")
    # and the message shape; 10,000 candidates each.
    guesses = {}
    for number in range(10_000):
        pin = f"{number:04d}"
        for text in (f"User's bank PIN is {pin}.", f"My bank PIN is {pin}."):
            guesses[hashlib.sha256(text.encode()).hexdigest()] = pin
    return guesses


def _metadata_guesses() -> dict[str, int]:
    return {
        hashlib.sha256(canonical_json({"customer_id": n}).encode()).hexdigest(): n
        for n in range(100_000)
    }


@pytest.mark.django_db
def test_a_forgotten_pin_and_customer_id_cannot_be_brute_forced_from_an_export():
    # Given "My bank PIN is 4821." with metadata {"customer_id": 90417}
    stored = services.remember(principal=SYSTEM, scope=SCOPE, text=PIN_TEXT, metadata=METADATA)
    record = Record.objects.get(record_id=stored.record_ids[0])
    episode = Episode.objects.get(episode_id=stored.episode_id)
    assert record.content == "User's bank PIN is 4821."
    # While the record exists its salt reproduces the chain's digests (so the
    # attack below is aimed at the right values: with the salt it finds them)
    before = _digests(list(export_lines(SYSTEM, subject=SCOPE)))
    assert salted_sha256(record.digest_salt, record.content) in before
    assert salted_sha256(record.digest_salt, canonical_json(METADATA)) in before
    assert salted_sha256(episode.digest_salt, PIN_TEXT) in before
    # When it is forgotten and an auditor's export is taken
    services.forget(principal=SYSTEM, scope=SCOPE, record_ids=[record.record_id])
    lines = list(export_lines(SYSTEM, subject=SCOPE))
    exported = _digests(lines)
    # Then the salts are gone with the content
    assert Record.objects.get(pk=record.pk).digest_salt == ""
    assert Episode.objects.get(pk=episode.pk).digest_salt == ""
    # And no guess of the PIN nor of the customer ID matches any digest exported
    pins, customers = _pin_guesses(), _metadata_guesses()
    assert [pins[d] for d in exported if d in pins] == []
    assert [customers[d] for d in exported if d in customers] == []
    # And the slot name, which says what was forgotten, is not in the export as text
    text = "\n".join(lines).lower()
    assert "bank pin" not in text and "4821" not in text and "90417" not in text


@pytest.mark.django_db
def test_a_duplicate_a_promotion_and_a_consolidation_keep_the_slot_name_out_of_the_chain():
    # Given a slot written twice (a duplicate), a quarantined fact promoted, a consolidation
    services.remember(principal=SYSTEM, scope=SCOPE, text=PIN_TEXT)
    services.remember(principal=SYSTEM, scope=SCOPE, text=PIN_TEXT)
    held = services.remember(
        principal=SYSTEM, scope=SCOPE, text="<webpage>My locker code is 1234.</webpage>"
    )
    services.promote(principal=SYSTEM, scope=SCOPE, record_id=held.record_ids[0], reason="checked")
    services.consolidate(principal=SYSTEM, scope=SCOPE)
    # Then no event of the chain names either slot as text
    payloads = [json.loads(line)["payload"] for line in export_lines(SYSTEM, subject=SCOPE)]
    assert payloads and not any("bank pin" in p or "locker code" in p for p in payloads)


@pytest.mark.django_db
def test_each_record_and_episode_gets_its_own_salt():
    first = services.remember(principal=SYSTEM, scope=SCOPE, text="My bank PIN is 1111.")
    second = services.remember(principal=SYSTEM, scope="acme:bob:proj", text="My bank PIN is 1111.")
    salts = [
        *Record.objects.filter(record_id__in=[*first.record_ids, *second.record_ids]).values_list(
            "digest_salt", flat=True
        ),
        *Episode.objects.values_list("digest_salt", flat=True),
    ]
    # Same words, different salts: equal contents do not even show as equal digests
    assert len(salts) == 4 and len(set(salts)) == 4 and all(len(s) == 32 for s in salts)
