"""Richer record filters (issue 35 item 4): $in, $ne and ranges on metadata, created_at
ranges, run inside the candidate queries on both databases, and validated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from aetnaweb.access import SYSTEM
from aetnaweb.errors import InvalidInput
from memory import metadata, search, selectors, services, vectors
from memory.metadata import MetadataError
from memory.models import Record

ALICE = "acme:alice:*"
pytestmark = pytest.mark.django_db


def remember(text: str, **meta) -> str:
    result = services.remember(
        principal=SYSTEM, scope=ALICE, text=text, force=True, metadata=meta or None
    )
    return result.records[0].record_id


@pytest.fixture
def tiers() -> dict[str, str]:
    return {
        "gold": remember("Launch plan orion for gold.", tier="gold", score=9, due="2026-03-01"),
        "silver": remember("Launch plan orion for silver.", tier="silver", score=5.5),
        "bronze": remember(
            "Launch plan orion for bronze.", tier="bronze", score=2, due="2026-01-15"
        ),
        "text_score": remember("Launch plan orion, score as text.", tier="x", score="7"),
        "bare": remember("Launch plan orion without metadata."),
    }


def listed(**filters) -> set[str]:
    page = selectors.list_records(SYSTEM, scope=ALICE, limit=50, **filters)
    return {record.record_id for record in page.items}


def test_in_and_ne(tiers):
    assert listed(metadata={"tier": {"$in": ["gold", "silver"]}}) == {
        tiers["gold"],
        tiers["silver"],
    }
    # $ne needs the key: the record without metadata is not "not gold"
    assert listed(metadata={"tier": {"$ne": "gold"}}) == {
        tiers["silver"],
        tiers["bronze"],
        tiers["text_score"],
    }


def test_numeric_ranges_match_numbers_only(tiers):
    assert listed(metadata={"score": {"$gte": 5.5}}) == {tiers["gold"], tiers["silver"]}
    assert listed(metadata={"score": {"$gt": 2, "$lt": 9}}) == {tiers["silver"]}
    assert listed(metadata={"score": {"$lte": 2}}) == {tiers["bronze"]}


def test_date_ranges_compare_iso_strings(tiers):
    assert listed(metadata={"due": {"$gte": "2026-02-01"}}) == {tiers["gold"]}
    assert listed(metadata={"due": {"$lt": "2026-12-31"}}) == {tiers["gold"], tiers["bronze"]}


def test_operators_and_equality_and_across_keys(tiers):
    wanted = {"tier": {"$in": ["gold", "bronze"]}, "score": {"$gte": 3}}
    assert listed(metadata=wanted) == {tiers["gold"]}
    assert listed(metadata={"tier": "silver", "score": {"$eq": 5.5}}) == {tiers["silver"]}


def test_created_at_range(tiers):
    # Given one record stored a week ago
    Record.objects.filter(record_id=tiers["bronze"]).update(
        created_at=timezone.now() - timedelta(days=7)
    )
    since = (timezone.now() - timedelta(days=1)).isoformat()
    recent = listed(created_at={"$gte": since})
    assert tiers["bronze"] not in recent
    assert tiers["gold"] in recent
    assert listed(created_at={"$lt": since}) == {tiers["bronze"]}


def test_recall_applies_operators_inside_both_candidate_queries(tiers):
    # Given a crowd of newer records on the same words that fail the filter
    for n in range(12):
        remember(f"Launch plan orion crowd {n}.", tier="gold", score=1)
    wanted = {"tier": {"$in": ["gold", "silver"]}, "score": {"$gte": 5}}
    # Then each index, asked for few rows, answers inside the filter
    checked = metadata.check_filter(wanted)
    terms = search.query_terms("launch plan orion")
    hits = search.search(visible_scopes=[ALICE], terms=terms, limit=2, metadata=checked)
    pks = set(
        Record.objects.filter(record_id__in=[tiers["gold"], tiers["silver"]]).values_list(
            "pk", flat=True
        )
    )
    assert {h.pk for h in hits} == pks
    if vectors.status().available:
        near = vectors.search(
            visible_scopes=[ALICE], query="launch plan orion", limit=2, metadata=checked
        )
        assert {h.pk for h in near} == pks
    # And recall with a small limit returns them, not the crowd
    result = services.recall(
        principal=SYSTEM,
        scope=ALICE,
        query="launch plan orion",
        limit=2,
        metadata=wanted,
        min_confidence=0.0,
    )
    assert set(result.record_ids) <= {tiers["gold"], tiers["silver"]}
    assert {c.record_id for c in result.candidates} <= {tiers["gold"], tiers["silver"]}
    assert result.record_ids


def test_recall_created_at_range(tiers):
    Record.objects.filter(record_id=tiers["gold"]).update(
        created_at=timezone.now() - timedelta(days=30)
    )
    result = services.recall(
        principal=SYSTEM,
        scope=ALICE,
        query="launch plan orion",
        limit=10,
        min_confidence=0.0,
        created_at={"$lt": (timezone.now() - timedelta(days=1)).isoformat()},
    )
    assert {c.record_id for c in result.candidates} == {tiers["gold"]}


@pytest.mark.parametrize(
    ("wanted", "field"),
    [
        ({"tier": {"$regex": "g.*"}}, "filters.metadata.tier.$regex"),
        ({"tier": {}}, "filters.metadata.tier"),
        ({"tier": {"$in": "gold"}}, "filters.metadata.tier.$in"),
        ({"tier": {"$in": []}}, "filters.metadata.tier.$in"),
        ({"tier": {"$in": [["gold"]]}}, "filters.metadata.tier"),
        ({"score": {"$gte": True}}, "filters.metadata.score.$gte"),
        ({"score": {"$gte": "soon"}}, "filters.metadata.score.$gte"),
        ({"score": {"$gte": 1, "$lt": "2026-01-01"}}, "filters.metadata.score"),
        ({"score": {"$ne": {"a": 1}}}, "filters.metadata.score"),
    ],
)
def test_bad_operators_and_operands_are_refused_naming_them(wanted, field):
    with pytest.raises(MetadataError) as refused:
        metadata.check_filter(wanted)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("bounds", "field"),
    [
        ({"$after": "2026-01-01"}, "filters.created_at.$after"),
        ({"$gte": "yesterday"}, "filters.created_at.$gte"),
        ({"$gte": "2026-01-01T00:00:00"}, "filters.created_at.$gte"),  # no time zone
        ({"$gte": 1767225600}, "filters.created_at.$gte"),
        ({}, "filters.created_at"),
    ],
)
def test_bad_created_at_bounds_are_refused_naming_them(bounds, field):
    with pytest.raises(InvalidInput) as refused:
        metadata.check_filter(None, created_at=bounds)
    assert refused.value.field == field


def test_a_checked_filter_checks_again_to_itself():
    checked = metadata.check_filter(
        {"tier": {"$in": ["a"], "$ne": "b"}, "n": 1}, created_at={"$gte": "2026-01-01"}
    )
    assert checked[metadata.CREATED_AT] == {"$gte": "2026-01-01T00:00:00Z"}
    assert metadata.check_filter(checked) == checked


def test_query_string_operators_parse():
    parsed = metadata.filter_from_query(
        [
            ("metadata.tier.$in", '["gold","silver"]'),
            ("metadata[score][$gte]", "3"),
            ("metadata[channel]", '"email"'),
            ("created_at.$lt", "2026-02-01T00:00:00Z"),
            ("scope", "acme:alice:*"),
        ]
    )
    assert parsed == {
        "tier": {"$in": ["gold", "silver"]},
        "score": {"$gte": 3},
        "channel": "email",
        metadata.CREATED_AT: {"$lt": "2026-02-01T00:00:00Z"},
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ([("metadata.tier.$like", '"g"')], "metadata.tier.$like"),
        ([("metadata.tier.$in", '"gold"')], "metadata.tier.$in"),
        ([("metadata.tier", '"a"'), ("metadata.tier.$ne", '"b"')], "metadata.tier.$ne"),
        ([("metadata.n.$gte", "1"), ("metadata.n.$gte", "2")], "metadata.n.$gte"),
    ],
)
def test_query_string_refusals_name_the_parameter(params, field):
    with pytest.raises(MetadataError) as refused:
        metadata.filter_from_query(params)
    assert refused.value.field == field


def test_nothing_is_written_by_a_refused_filter():
    before = Record.objects.count()
    with pytest.raises(MetadataError):
        services.recall(
            principal=SYSTEM, scope=ALICE, query="x", metadata={"a": {"$between": [1, 2]}}
        )
    assert Record.objects.count() == before
