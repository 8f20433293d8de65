"""Canonical JSON and the preimage: byte-compatible with audit-log-v1 (C-1)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import CanonicalJSONError, canonical_json, check_round_trip, digest
from audit.chain import compute_event_hash
from audit.verification import BAD_HASH, COLUMNS, FIRST_HAS_PREV, _ChainWalker
from tests.audit.conftest import tool

# JSON values that survive a round trip: no NaN/inf, finite floats only.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=6)
optional_text = st.none() | st.text(min_size=1, max_size=30)


def test_spec_examples_non_ascii_nested_and_key_order():
    value = {"z": 1, "a": {"y": [1, "é"], "b": None}, "é": '☃ \u2028 "q" \\ \n'}
    assert canonical_json(value) == (
        '{"a":{"b":null,"y":[1,"\\u00e9"]},"z":1,"\\u00e9":"\\u2603 \\u2028 \\"q\\" \\\\ \\n"}'
    )
    assert canonical_json(value).isascii()
    assert digest(value) == hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    assert digest({"b": 1, "a": 2}) == digest({"a": 2, "b": 1})


@pytest.mark.parametrize("value", [{"n": float("nan")}, {"n": float("inf")}, {"s": {1, 2}}])
def test_values_without_a_canonical_form_are_refused(value):
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


def test_lossy_values_fail_the_round_trip_check():
    with pytest.raises(CanonicalJSONError):
        check_round_trip({"t": (1, 2)})
    with pytest.raises(CanonicalJSONError):
        check_round_trip({1: "a"})
    check_round_trip({"f": 0.1, "big": 2**70, "s": "é"})


@given(json_values)
def test_canonical_json_is_pythons_default_dumps_sorted_and_compact(value):
    text = canonical_json(value)
    assert text == json.dumps(value, sort_keys=True, separators=(",", ":"))
    assert text.isascii()
    assert canonical_json(json.loads(text)) == text


@settings(max_examples=100, deadline=None)
@given(
    payload=json_objects,
    actor=st.text(min_size=1, max_size=20),
    event_type=st.text(min_size=1, max_size=20),
    session_id=optional_text,
    turn_id=optional_text,
    record_id=optional_text,
    prev_hash=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_both_fast_verifiers_reproduce_the_reference_hash(
    payload, actor, event_type, session_id, turn_id, record_id, prev_hash
):
    # Given any event hashed by the plain reading of the spec
    fields = {
        "event_id": "aud_" + "0" * 32,
        "subject_id": "acme:alice:proj",
        "event_type": event_type,
        "created_at": "2026-11-29T12:00:00.123456+00:00",
        "actor": actor,
        "session_id": session_id,
        "turn_id": turn_id,
        "record_id": record_id,
        "prev_hash": prev_hash,
    }
    reference = compute_event_hash(payload=payload, **fields)
    # When its stored payload text is canonical, or another spelling of the same object
    for text in (canonical_json(payload), json.dumps(payload, indent=1)):
        row = (1, *[fields[c] for c in COLUMNS[1:9]], text, prev_hash, reference)
        # Then the hot loops of the service and of the standalone tool accept its hash
        walker = _ChainWalker()
        walker.feed([row])
        [report] = walker.reports()
        assert report.failure_lines() in ([], [f"sequence 1: {FIRST_HAS_PREV}"])
        assert BAD_HASH not in " ".join(report.failure_lines())
        [result] = tool._walk([row])
        assert result.failure_lines() == report.failure_lines()
        # and a hash of anything else is refused
        walker = _ChainWalker()
        walker.feed([(*row[:-1], "0" * 64)])
        assert f"sequence 1: {BAD_HASH}" in walker.reports()[0].failure_lines()
