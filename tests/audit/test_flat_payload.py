"""The flat-payload fast path of both chain verifiers: it may only skip work, never change a verdict.

A payload text recognized as flat and canonical is hashed as stored instead of
being parsed and re-encoded. That is exact only if every recognized text is
byte for byte ``canonical_json(json.loads(text))``; these tests check that
claim for both verifiers (the service's ``audit.verification`` and the
standalone ``tools/verify_audit.py``), exhaustively over ASCII and by property,
and check that the walkers' verdicts equal the spec's rule on rows built here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit import verification
from audit.canonical import canonical_json
from audit.chain import compute_event_hash
from tests.audit.conftest import tool

RECOGNIZERS = {"service": verification._is_flat_canonical, "tool": tool._is_flat_canonical}


def canonical_or_none(text: str) -> str | None:
    """The spec's reading: the canonical JSON of the parsed payload, or None if there is none."""
    try:
        value = json.loads(text, parse_constant=lambda name: 1 / 0)
        return canonical_json(value) if isinstance(value, dict) else None
    except (ValueError, ZeroDivisionError):
        return None


@pytest.mark.parametrize("which", list(RECOGNIZERS))
def test_every_ascii_character_in_a_string_is_recognized_exactly_when_written_as_is(which):
    # Given every ASCII code point as a one-character key and as a value
    recognize = RECOGNIZERS[which]
    for code in range(128):
        char = chr(code)
        for text in (f'{{"a":"{char}"}}', f'{{"{char}":1}}'):
            # When the fast path looks at it
            # Then it accepts exactly the characters ensure_ascii writes unescaped
            expected = canonical_or_none(text) == text
            assert recognize(text) is expected, (code, text)
    assert recognize('{"a":"\\u00e9"}') is False  # canonical, but escaped: the parser decides
    assert recognize('{"a":"\\\\"}') is False


@pytest.mark.parametrize("which", list(RECOGNIZERS))
@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '{"a":1}',
        '{"":0,"a":-1,"b":true,"c":false,"d":null,"e":"x y","f":1234567890123456}',
        '{"content_sha256":"' + "a" * 64 + '","count":3,"fact_key":"backup email"}',
        "{" + ",".join(f'"k{n:02d}":{n}' for n in range(16)) + "}",
    ],
)
def test_flat_canonical_payloads_are_recognized(which, text):
    assert canonical_or_none(text) == text
    assert RECOGNIZERS[which](text) is True


@pytest.mark.parametrize("which", list(RECOGNIZERS))
@pytest.mark.parametrize(
    "text",
    [
        '{"b":1,"a":2}',  # keys out of order
        '{"a":1,"a":1}',  # duplicate key
        '{"a":1,"a":2}',
        '{"a":-0}',  # parses to 0
        '{"a":01}',
        '{"a":1.0}',  # floats always take the careful path
        '{"a":1e2}',
        '{"a":12345678901234567}',  # 17 digits: the careful path
        '{"a":NaN}',
        '{"a":Infinity}',
        '{ "a":1}',
        '{"a": 1}',
        '{"a":1} ',
        ' {"a":1}',
        '{"a":1,}',
        '{,"a":1}',
        '{"a":{}}',  # nested objects and arrays: the careful path sorts inside them
        '{"a":[]}',
        '{"a":"\\n"}',
        '{"a":"\\/"}',
        '{"a":"é"}',
        '{"a":"\x7f"}',
        '{"a":"\x00"}',
        "[1]",
        '"a"',
        "",
        "{" + ",".join(f'"k{n:02d}":{n}' for n in range(17)) + "}",  # more than 16 keys
    ],
)
def test_anything_else_takes_the_careful_path(which, text):
    assert RECOGNIZERS[which](text) is False


flat_keys = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=4)
flat_values = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**17), max_value=10**17)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x80), max_size=6)
    | st.lists(st.integers(), max_size=2)
)
flat_dicts = st.dictionaries(flat_keys, flat_values, max_size=18)
dump_options = st.fixed_dictionaries(
    {
        "sort_keys": st.booleans(),
        "ensure_ascii": st.booleans(),
        "separators": st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")]),
    }
)
# Edits that keep the text JSON-like but may make it non-canonical.
edits = st.sampled_from(
    [
        ("", ""),
        (":0", ":-0"),
        (":1", ":01"),
        (",", ',"a":1,'),
        ("}", ',"a":1}'),
        ('"', '"\\u0041'),
        ("{", "{ "),
    ]
)


@given(flat_dicts, dump_options, edits)
def test_a_recognized_text_is_always_its_own_canonical_form(value, options, edit):
    # Given a payload written by some other JSON writer, maybe edited
    text = json.dumps(value, **options).replace(*edit, 1)
    # When either verifier recognizes it as flat and canonical
    # Then the spec's canonical JSON of its parse is the text itself
    for recognize in RECOGNIZERS.values():
        if recognize(text):
            assert canonical_or_none(text) == text


# -- the walkers ----------------------------------------------------------------------

SUBJECT = "acme:alice:proj"


def make_row(sequence: int, payload_text: Any, prev_hash: str | None, *, forged: bool) -> tuple:
    """A row whose hash follows the spec, or (forged) is taken over the stored text as is."""
    fields = {
        "event_id": f"aud_{sequence:032x}",
        "subject_id": SUBJECT,
        "event_type": "memory.recall",
        "created_at": "2026-11-29T12:00:00+00:00",
        "actor": "system",
        "session_id": None,
        "turn_id": "t-1",
        "record_id": None,
        "prev_hash": prev_hash,
    }
    canonical = canonical_or_none(payload_text) if isinstance(payload_text, str) else None
    if forged or canonical is None:
        preimage = canonical_json({**fields, "payload": "@"}).replace('"@"', str(payload_text))
        event_hash = hashlib.sha256(preimage.encode()).hexdigest()
    else:
        event_hash = compute_event_hash(**fields, payload=json.loads(payload_text))
    return (
        sequence,
        fields["event_id"],
        SUBJECT,
        fields["event_type"],
        fields["created_at"],
        fields["actor"],
        None,
        "t-1",
        None,
        payload_text,
        prev_hash,
        event_hash,
    )


def both_verdicts(rows: list[tuple]) -> tuple[list[str], list[str]]:
    walker = verification._ChainWalker()
    walker.feed(rows)
    (service,) = walker.reports()
    (standalone,) = tool._walk(rows)
    return service.failure_lines(), standalone.failure_lines()


def expected_reasons(payload_text: Any, *, forged: bool) -> list[str]:
    if not isinstance(payload_text, str):
        return ["sequence 1: payload is not JSON"]
    canonical = canonical_or_none(payload_text)
    if canonical is None:
        return []  # decided by the careful path, which the existing tests cover
    if forged and canonical != payload_text:
        return ["sequence 1: event_hash does not recompute from the event's preimage"]
    return []


@given(flat_dicts, dump_options, edits, st.booleans())
def test_walkers_follow_the_spec_for_any_stored_payload_text(value, options, edit, forged):
    # Given one event whose payload text was written by some JSON writer, hashed by
    # the spec (over the parsed payload) or forged (over the stored text as is)
    text = json.dumps(value, **options).replace(*edit, 1)
    row = make_row(1, text, None, forged=forged)
    # When both verifiers walk it
    service, standalone = both_verdicts([row])
    # Then they agree, and a parsable payload is judged by the spec's rule
    assert service == standalone
    if canonical_or_none(text) is not None:
        assert service == expected_reasons(text, forged=forged)


@pytest.mark.parametrize(
    "text",
    [
        '{"b":1,"a":2}',
        '{"a":1,"a":1}',
        '{"a":-0}',
        '{"a": 1}',
        '{"a":1.50}',
        '{"a":"\\u0041"}',
    ],
)
def test_a_hash_taken_over_a_non_canonical_text_is_caught_and_the_parse_still_verifies(text):
    # Given a payload stored in a non-canonical but equivalent form
    assert canonical_or_none(text) not in (None, text)
    # When its hash was forged over the stored text
    # Then both verifiers reject it; when hashed by the spec, both accept it
    assert (
        both_verdicts([make_row(1, text, None, forged=True)])
        == (["sequence 1: event_hash does not recompute from the event's preimage"],) * 2
    )
    assert both_verdicts([make_row(1, text, None, forged=False)]) == ([], [])


@pytest.mark.parametrize("stored", [b'{"a":1}', 7, None])
def test_a_payload_that_is_not_text_is_named_by_both(stored):
    row = make_row(1, stored, None, forged=True)
    assert both_verdicts([row]) == (["sequence 1: payload is not JSON"],) * 2


def test_a_chain_of_flat_payloads_verifies_and_an_edit_is_caught():
    # Given a chain of three events with flat canonical payloads
    rows, head = [], None
    for sequence in (1, 2, 3):
        row = make_row(sequence, f'{{"count":{sequence},"q":"x"}}', head, forged=False)
        rows.append(row)
        head = row[-1]
    assert both_verdicts(rows) == ([], [])
    # When the middle payload is edited into another flat canonical text
    edited = list(rows[1])
    edited[9] = '{"count":9,"q":"x"}'
    rows[1] = tuple(edited)
    # Then both verifiers name it
    assert (
        both_verdicts(rows)
        == (["sequence 2: event_hash does not recompute from the event's preimage"],) * 2
    )


@pytest.mark.parametrize("cap", [0, 1, 4096])
def test_remembered_key_sets_never_excuse_another_order(cap, monkeypatch):
    # Given a walk that has already accepted the key set ("a", "b") many times,
    # with the memory of key sets capped at `cap`
    monkeypatch.setattr(verification, "_ORDERED_KEY_SETS", cap)
    monkeypatch.setattr(tool, "_ORDERED_KEY_SETS", cap)
    texts = ['{"a":1,"b":2}'] * 3 + ['{"b":1,"a":2}', '{"a":1,"a":2}', '{"a":3,"b":4}']
    texts += ['{"c":1}', '{"d":1,"c":2}']
    rows, head = [], None
    for sequence, text in enumerate(texts, start=1):
        row = make_row(sequence, text, head, forged=True)
        rows.append(row)
        head = row[-1]
    # When both verifiers walk it, every hash forged over the stored text
    # Then exactly the non-canonical texts are named, whatever the cap
    bad = "event_hash does not recompute from the event's preimage"
    expected = [f"sequence {n}: {bad}" for n in (4, 5, 8)]
    assert both_verdicts(rows) == (expected, expected)
