"""Template tags every dashboard page uses: one time format, and copy buttons.

- ``{{ value|when }}``: a timestamp as "3 minutes ago" (or a date when older than a
  week) inside ``<time>``, with the exact UTC time on hover and in ``datetime``.
- ``{% copy_button value "what" %}``: a button that copies ``value``; hidden until
  ``static/js/copy.js`` runs (without JavaScript the value is still selectable).
- ``{% bar_chart_figure chart "id" %}``: a server-drawn, accessible bar chart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from aetnaweb.dashboard import BarChart, bar_chart_html

register = template.Library()


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


@register.filter
def when(value: Any) -> SafeString | str:
    """Relative time, exact UTC on hover: the one time format of the dashboard."""
    moment = _as_datetime(value)
    if moment is None:
        return "" if value in (None, "") else str(value)
    now = timezone.now()
    exact = moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    if moment > now + timedelta(minutes=1):
        shown = f"in {timesince(now, moment, depth=1)}"
    elif now - moment < timedelta(minutes=1):
        shown = "just now"
    elif now - moment < timedelta(days=7):
        shown = f"{timesince(moment, now, depth=1)} ago"
    else:
        shown = moment.strftime("%Y-%m-%d %H:%M UTC")
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat().replace("+00:00", "Z"),
        exact,
        shown.replace("\xa0", " "),
    )


@register.simple_tag
def copy_button(value: Any, what: str = "value") -> SafeString:
    """A copy-to-clipboard button for ``value`` (an ID, a hash, a one-time secret)."""
    return format_html(
        '<button type="button" class="btn btn-small btn-copy" data-copy="{}" '
        'aria-label="Copy {}" hidden>Copy</button>',
        "" if value is None else str(value),
        what,
    )


@register.simple_tag
def bar_chart_figure(chart: BarChart, chart_id: str) -> SafeString:
    """``{% bar_chart_figure chart "id" %}``: :func:`aetnaweb.dashboard.bar_chart_html`."""
    return bar_chart_html(chart, chart_id)
