"""Relative dates, resolved against the time a message was said and written beside the words.

"My flight is next Tuesday." said on Monday 2 March 2026 is stored as "My
flight is next Tuesday (2026-03-10)." The original words stay; the absolute
date follows them in parentheses, so a memory read months later still says
which Tuesday. The rules (docs/agents.md, "Dates"), with weeks starting on
Monday and the date taken in the zone of the stated time:

- ``today``/``tonight`` → that day; ``tomorrow`` +1; ``yesterday`` -1; ``the
  day after tomorrow`` +2; ``the day before yesterday`` -2;
- ``next <weekday>`` → that weekday in the following week; ``last
  <weekday>`` → in the previous week; ``this <weekday>`` → in this week;
- ``next``/``last``/``this`` ``week`` → that week's Monday ("week of ...");
  ``month`` → ``YYYY-MM``; ``year`` → ``YYYY``;
- ``in N days``/``weeks`` and ``N days``/``weeks ago`` (digits or a number
  word up to twelve);
- ``the 14th`` → the next 14th on or after that day.

A bare weekday ("on Friday") is left as said: without the tense it may be
the last Friday or the next one.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    word: n
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
    if n
}
_RELATIVE = re.compile(
    r"\b(?:"
    r"(?P<dayword>the\s+day\s+after\s+tomorrow|the\s+day\s+before\s+yesterday|today|tonight|tomorrow|yesterday)"
    r"|(?P<which>next|last|this)\s+(?:(?P<weekday>"
    + "|".join(_WEEKDAYS)
    + r")|(?P<unit>week|month|year))"
    r"|in\s+(?P<ahead>\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(?P<ahead_unit>days?|weeks?)"
    r"|(?P<ago>\d{1,3}|" + "|".join(_NUMBERS) + r")\s+(?P<ago_unit>days?|weeks?)\s+ago"
    # "the 14th", but not "the 14th of March" (a date already): no capitalised word after.
    r"|the\s+(?P<nth>[1-9]|[12]\d|3[01])(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?(?-i:[A-Z]))"
    r")\b(?!\s*\(\d{4})",
    re.IGNORECASE,
)
# An annotation this module wrote: removed before words are resolved again.
ANNOTATION = re.compile(r"\s\((?:week of )?\d{4}(?:-\d{2}){0,2}\)")


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _nth(day: date, nth: int) -> date | None:
    """The first day numbered ``nth`` on or after ``day`` (skipping months too short for it)."""
    year, month = day.year, day.month
    for _ in range(13):
        try:
            candidate = date(year, month, nth)
        except ValueError:
            candidate = None
        if candidate is not None and candidate >= day:
            return candidate
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return None


def _absolute(match: re.Match[str], day: date) -> str | None:
    groups = {name: (value or "").lower() for name, value in match.groupdict().items()}
    if groups["dayword"]:
        word = " ".join(groups["dayword"].split())
        shift = {
            "the day after tomorrow": 2,
            "the day before yesterday": -2,
            "tomorrow": 1,
            "yesterday": -1,
        }.get(word, 0)
        return (day + timedelta(days=shift)).isoformat()
    which = groups["which"]
    step = {"next": 1, "last": -1, "this": 0}.get(which, 0)
    if groups["weekday"]:
        monday = _monday(day) + timedelta(weeks=step)
        return (monday + timedelta(days=_WEEKDAYS.index(groups["weekday"]))).isoformat()
    if groups["unit"] == "week":
        return f"week of {(_monday(day) + timedelta(weeks=step)).isoformat()}"
    if groups["unit"] == "month":
        index = day.year * 12 + day.month - 1 + step
        return f"{index // 12:04d}-{index % 12 + 1:02d}"
    if groups["unit"] == "year":
        return f"{day.year + step:04d}"
    if groups["ahead"]:
        days = _count(groups["ahead"]) * (7 if groups["ahead_unit"].startswith("week") else 1)
        return (day + timedelta(days=days)).isoformat()
    if groups["ago"]:
        days = _count(groups["ago"]) * (7 if groups["ago_unit"].startswith("week") else 1)
        return (day - timedelta(days=days)).isoformat()
    if groups["nth"]:
        found = _nth(day, int(groups["nth"]))
        return found.isoformat() if found else None
    return None


def resolve(text: str, said_at: datetime) -> str:
    """``text`` with each relative date followed by its absolute date, in parentheses."""
    day = said_at.date()

    def annotate(match: re.Match[str]) -> str:
        absolute = _absolute(match, day)
        return f"{match.group(0)} ({absolute})" if absolute else match.group(0)

    return _RELATIVE.sub(annotate, text)
