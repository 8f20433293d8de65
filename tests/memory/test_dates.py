"""Relative dates resolved against when a message was said, stored beside the words (issue 30)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from aetnaweb.access import SYSTEM
from memory import services
from memory.dates import resolve
from memory.models import Record

MONDAY = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)  # Monday 2 March 2026
S = "acme:alice:proj"


@pytest.mark.parametrize(
    ("words", "stored"),
    [
        ("next Tuesday", "next Tuesday (2026-03-10)"),
        ("this Sunday", "this Sunday (2026-03-08)"),
        ("last Friday", "last Friday (2026-02-27)"),
        ("tomorrow", "tomorrow (2026-03-03)"),
        ("yesterday", "yesterday (2026-03-01)"),
        ("today", "today (2026-03-02)"),
        ("the day after tomorrow", "the day after tomorrow (2026-03-04)"),
        ("next week", "next week (week of 2026-03-09)"),
        ("last month", "last month (2026-02)"),
        ("next year", "next year (2027)"),
        ("in 3 days", "in 3 days (2026-03-05)"),
        ("two weeks ago", "two weeks ago (2026-02-16)"),
        ("the 14th", "the 14th (2026-03-14)"),
        ("the 1st", "the 1st (2026-04-01)"),
        # Left as said: a bare weekday (past or next?), a date already, a resolved one
        ("on Friday", "on Friday"),
        ("the 14th of March", "the 14th of March"),
        ("next Tuesday (2026-03-10)", "next Tuesday (2026-03-10)"),
    ],
)
def test_each_relative_date_gets_its_absolute_date_beside_it(words, stored):
    assert resolve(words, MONDAY) == stored


def test_the_date_is_taken_in_the_zone_of_the_stated_time():
    # 23:30 on Monday in UTC-5 is already Tuesday in UTC
    late = datetime(2026, 3, 2, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert resolve("tomorrow", late) == "tomorrow (2026-03-03)"


@pytest.mark.django_db
def test_remember_resolves_against_the_message_time_and_keeps_the_words():
    result = services.remember(
        principal=SYSTEM, scope=S, text="My flight is next Tuesday.", occurred_at=MONDAY
    )
    assert result.records[0].content == "User's flight is next Tuesday (2026-03-10)."


@pytest.mark.django_db
def test_an_imported_turn_resolves_against_its_own_time():
    services.import_conversation(
        principal=SYSTEM,
        scope=S,
        turns=[
            {
                "text": "I went to the support group yesterday.",
                "speaker": "Ann",
                "occurred_at": MONDAY,
            },
            {
                "text": "I'll see you tomorrow.",
                "role": "other",
                "speaker": "Bo",
                "occurred_at": MONDAY + timedelta(days=7),
            },
        ],
    )
    contents = set(Record.objects.values_list("content", flat=True))
    assert "Ann (2 March 2026): I went to the support group yesterday (2026-03-01)." in contents
    assert "User went to the support group yesterday (2026-03-01)." in contents
    assert "Bo (9 March 2026): I'll see you tomorrow (2026-03-10)." in contents


@pytest.mark.django_db
def test_recall_results_carry_created_at_and_the_messages_time_and_the_block_shows_dates():
    # Given one message with a stated time and one without
    services.remember(principal=SYSTEM, scope=S, text="My car is red.", occurred_at=MONDAY)
    services.remember(principal=SYSTEM, scope=S, text="My bike is blue.")
    # When recalled
    found = {
        c.content: c for c in services.recall(principal=SYSTEM, scope=S, query="car bike").returned
    }
    car, bike = found["User's car is red."], found["User's bike is blue."]
    # Then each result carries when it was stored, and when it was said if stated
    assert car.occurred_at == MONDAY and car.created_at is not None and car.created_at > MONDAY
    assert bike.occurred_at is None and bike.created_at is not None
    assert car.as_dict()["occurred_at"] == "2026-03-02T09:30:00+00:00"
    # And the block shows the date said, else the date stored
    block = services.recall_block(principal=SYSTEM, scope=S, query="car bike", min_score=0)
    assert "User's car is red. [said 2026-03-02]" in block.text
    assert f"User's bike is blue. [stored {bike.created_at.date().isoformat()}]" in block.text
