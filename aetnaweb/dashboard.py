"""Shared helpers for every dashboard view (design.md "Views and templates").

A dashboard view reads like this::

    @require_GET
    @dashboard_view
    def scope_detail(request, scope):
        principal = principal_for(request)
        parsed = Scope.parse(scope)                 # invalid -> 404 page naming the reason
        access.require(principal, access.READ, parsed)  # out of reach -> plain 404
        page = key_page_from(request, ...)          # ?before=<key>, never OFFSET
        return render_page(request, "memory/scope_detail.html", {...}, partial="records")

- :func:`principal_for` builds the signed-in operator's principal once per request.
- :func:`dashboard_view` turns a domain refusal (:class:`~aetnaweb.errors.DomainError`)
  that escapes the view into the page's answer: out of reach or missing
  (``AccessDenied``, any 404-class error, ``missing = True``) into a 404 that
  does not say whether the thing exists; :class:`~aetnaweb.scopes.ScopeError`
  (an invalid scope typed into a URL) into a 404 page that says why; any other
  refusal into a message and a redirect back to the page the form was on (a
  POST from this site), else the refusal page with the class's status.
- :class:`form_refusals` is for a view that keeps its form: a refusal becomes
  an error on the form field the error names (or on the form as a whole).
- :func:`page_key` and :class:`KeyPage` are key-based pagination: the next
  page starts strictly after the last key seen, so page 10,000 costs what
  page 1 costs (no OFFSET, no COUNT(*)).
- :func:`render_page` renders the full page, or only ``template#partial``
  (Django's ``{% partialdef %}``) when htmx asks for the fragment.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import ScopeError

View = Callable[..., HttpResponseBase]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
NOT_FOUND_TEMPLATE = "404.html"


def principal_for(request: HttpRequest) -> Principal:
    """The signed-in operator as a :class:`~aetnaweb.access.Principal` (grants loaded once per request)."""
    cached = getattr(request, "_aetnaweb_principal", None)
    if cached is None:
        cached = access.operator_principal(request.user)
        request._aetnaweb_principal = cached  # type: ignore[attr-defined]
    return cached


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Which top-bar links the signed-in operator's roles can open (context processor).

    A link the role cannot use is hidden rather than leading to a 404; the
    pages still check on their own.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    principal = principal_for(request)
    return {
        "nav": {
            "read": access.has_capability_anywhere(principal, access.READ),
            "review": access.has_capability_anywhere(principal, access.REVIEW),
            "audit": access.has_capability_anywhere(principal, access.AUDIT),
            "tokens": bool(access.administered_scopes(principal)),
            "maintenance": bool(access.administered_scopes(principal)),
        }
    }


def invalid_scope_response(request: HttpRequest, error: ScopeError) -> HttpResponse:
    """The 404 page for a scope that does not parse, saying why (it reveals nothing stored)."""
    return render(request, NOT_FOUND_TEMPLATE, {"invalid_scope": str(error)}, status=404)


REFUSED_TEMPLATE = "400.html"


def is_missing(error: DomainError) -> bool:
    """Whether a page answers ``error`` as "not found": out of reach, or no such thing.

    A page's URL names the object, so an unknown record is a 404 here even
    where the API (whose body named it) answers 400.
    """
    return error.status == 404 or error.missing


def dashboard_view(view: View) -> View:
    """Turn a domain refusal the view did not handle into the page's answer.

    Missing or out of reach: 404, the same page either way (the existence of
    other tenants does not leak). An invalid scope in the URL: a 404 page
    saying why. Any other refusal of a POST sent from one of our pages: its
    message, and back to that page. Otherwise the refusal page with the
    class's status and the message. A scope typed into a *form* is a form
    error instead: forms validate with ``Scope.parse`` in ``clean_scope``.
    """

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except ScopeError as exc:
            return invalid_scope_response(request, exc)
        except DomainError as exc:
            if is_missing(exc):
                raise Http404("not found") from exc
            return refused_response(request, exc)

    return wrapper


def refused_response(request: HttpRequest, error: DomainError) -> HttpResponse:
    """The page's answer to a refusal: the message and back where the form was, or a 4xx page."""
    back = request.headers.get("Referer", "")
    if request.method == "POST" and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        messages.error(request, f"Nothing was changed: {error}")
        return redirect(back)
    return render(
        request,
        REFUSED_TEMPLATE,
        {"refusal": str(error), "refusal_status": error.status},
        status=error.status,
    )


class form_refusals:
    """For a view that keeps its form: a refusal becomes an error on the field it names.

    ::

        with form_refusals(form) as refused:
            services.deny(..., reason=form.cleaned_data["reason"])
        if refused:
            return render(request, TEMPLATE, {"form": form}, status=refused.status)

    A missing or out-of-reach error still propagates (the decorator makes it
    a 404): it is not something the person can fix in the form.
    """

    def __init__(self, form: forms.BaseForm) -> None:
        self.form = form
        self.error: DomainError | None = None

    def __enter__(self) -> form_refusals:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if not isinstance(exc, DomainError) or is_missing(exc):
            return False
        self.error = exc
        field = exc.field if exc.field in self.form.fields else None
        self.form.add_error(field, str(exc))
        return True

    def __bool__(self) -> bool:
        return self.error is not None

    @property
    def status(self) -> int:
        return self.error.status if self.error is not None else 200


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render ``template``, or just ``template#partial`` for an htmx request.

    ``partial`` names a ``{% partialdef %}`` in the template. Pass it only for
    requests whose htmx target is that fragment (see :func:`htmx_target`).
    """
    name = f"{template}#{partial}" if partial and getattr(request, "htmx", False) else template
    return render(request, name, context, status=status)


def htmx_target(request: HttpRequest) -> str | None:
    """The id of the element htmx will swap (``HX-Target``), or ``None`` for a normal request."""
    htmx = getattr(request, "htmx", None)
    if not htmx:
        return None
    return htmx.target


# -- key-based pagination ----------------------------------------------------------


def page_key(request: HttpRequest, name: str = "before") -> int | None:
    """The integer cursor in ``?before=`` (or ``name``), or ``None`` for the first page.

    Anything but a positive integer is a 400 with a message, not a silent first page.
    """
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise BadRequest(f"the page cursor {name}={raw!r} must be a positive whole number")
    return int(raw)


def page_size(request: HttpRequest, default: int = DEFAULT_PAGE_SIZE) -> int:
    """``?limit=`` clamped to 1..MAX_PAGE_SIZE."""
    raw = request.GET.get("limit", "").strip()
    if not raw.isdigit():
        return default
    return max(1, min(int(raw), MAX_PAGE_SIZE))


@dataclass(frozen=True)
class KeyPage[T]:
    """One page of a key-paginated list, newest (largest key) first."""

    items: Sequence[T]
    next_key: Any | None  # pass as ?before=<next_key> for the following page
    first_page: bool

    @property
    def has_next(self) -> bool:
        return self.next_key is not None

    @classmethod
    def from_rows(
        cls, rows: Iterable[T], *, limit: int, key: Callable[[T], Any], first_page: bool
    ) -> KeyPage[T]:
        """Build a page from up to ``limit + 1`` rows (the extra row only says "there is more")."""
        fetched = list(rows)
        items = fetched[:limit]
        next_key = key(items[-1]) if len(fetched) > limit and items else None
        return cls(items=items, next_key=next_key, first_page=first_page)

    def next_url(self, request: HttpRequest, name: str = "before") -> str | None:
        """The current URL with ``?before=`` moved to the next page (other filters kept)."""
        if self.next_key is None:
            return None
        params = request.GET.copy()
        params[name] = str(self.next_key)
        return f"{request.path}?{params.urlencode()}"


def paginate_by_key(
    queryset: Any,
    *,
    before: int | None,
    limit: int,
    key_field: str = "pk",
) -> KeyPage[Any]:
    """Newest-first page of ``queryset`` strictly below ``before`` on an indexed integer key.

    One query: ``WHERE key < before ORDER BY key DESC LIMIT limit + 1``.
    """
    ordered = queryset.order_by(f"-{key_field}")
    if before is not None:
        ordered = ordered.filter(**{f"{key_field}__lt": before})
    rows = list(ordered[: limit + 1])
    return KeyPage.from_rows(
        rows,
        limit=limit,
        key=lambda row: getattr(row, key_field) if not isinstance(row, dict) else row[key_field],
        first_page=before is None,
    )


def query_string(request: HttpRequest, **changes: Any) -> str:
    """The current query string with ``changes`` applied (``None`` removes a parameter)."""
    params = request.GET.copy()
    for name, value in changes.items():
        if value is None:
            params.pop(name, None)
        else:
            params[name] = str(value)
    return urlencode(sorted(params.lists()), doseq=True)


# -- charts --------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    label: str  # the full label, for the bar's <title> and the table fallback
    value: int
    x: float
    y: float
    width: float
    height: float
    tick_label: str  # short label under the axis, or "" when this bar has none
    center: float = 0.0  # x of the bar's middle, where its tick label is centred


@dataclass(frozen=True)
class BarChart:
    """Geometry for ``templates/dashboard/bar_chart.html``: an accessible server-rendered SVG."""

    title: str
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[int, float], ...]  # (value, y) for horizontal grid lines
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_bottom: int
    total: int
    y_label: str


def nice_step(raw: float) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``raw`` (and at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= raw:
                return step * factor
        step *= 10


def bar_chart(
    points: Sequence[tuple[str, str, int]],
    *,
    title: str,
    y_label: str = "events",
    width: int = 720,
    height: int = 220,
    label_every: int = 5,
) -> BarChart:
    """Lay out ``(label, tick_label, value)`` points as bars with a rounded y axis (about 4 ticks).

    Every ``label_every``-th bar, counted back from the last, gets a tick label.
    """
    left, right, top, bottom = 56, 28, 10, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((value for _, _, value in points), default=0)
    step = nice_step(peak / 4) if peak else 1
    top_value = step * max(1, -(-peak // step))
    slot = plot_w / max(1, len(points))
    gap = min(4.0, slot * 0.2)
    bars = []
    for index, (label, tick_label, value) in enumerate(points):
        bar_h = plot_h * value / top_value
        # Counted back from the newest bar, so the last (today) is always labelled.
        show = (len(points) - 1 - index) % label_every == 0
        center = left + index * slot + slot / 2
        bars.append(
            Bar(
                label=label,
                value=value,
                x=round(left + index * slot + gap / 2, 2),
                y=round(top + plot_h - bar_h, 2),
                width=round(slot - gap, 2),
                height=round(bar_h, 2),
                tick_label=tick_label if show else "",
                center=round(center, 2),
            )
        )
    ticks = tuple(
        (value, round(top + plot_h - plot_h * value / top_value, 2))
        for value in range(0, top_value + 1, step)
    )
    return BarChart(
        title=title,
        bars=tuple(bars),
        ticks=ticks,
        width=width,
        height=height,
        plot_left=left,
        plot_right=width - right,
        plot_bottom=top + plot_h,
        total=sum(value for _, _, value in points),
        y_label=y_label,
    )


def bar_chart_html(chart: BarChart, chart_id: str) -> SafeString:
    """``chart`` as an accessible figure: an SVG (each bar titled) and the same numbers as a table.

    Built here rather than by a template loop: the overview draws seven charts
    of 30 bars, and the template took about 50 ms of the page on the
    benchmark's machine (this takes about one). Every string put into the
    markup is escaped; every number is a number, hence the mark_safe.
    """
    e = html.escape
    unit = e(chart.y_label)
    left, right, bottom = chart.plot_left, chart.plot_right, chart.plot_bottom
    grid = "".join(
        f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}"></line>'
        f'<text x="{left - 6}" y="{y}" dy="0.32em" text-anchor="end">{int(value)}</text>'
        for value, y in chart.ticks
    )
    bars = "".join(
        f'<rect class="chart-bar{"" if bar.value else " chart-bar-empty"}" x="{bar.x}" '
        f'y="{bar.y}" width="{bar.width}" height="{bar.height}"><title>{e(bar.label)}: '
        f"{int(bar.value)} {unit}</title></rect>"
        for bar in chart.bars
    )
    ticks = "".join(
        f'<line class="chart-tick" x1="{bar.center}" x2="{bar.center}" y1="{bottom}" '
        f'y2="{bottom + 4}"></line><text x="{bar.center}" y="{bottom + 18}" '
        f'text-anchor="middle">{e(bar.tick_label)}</text>'
        for bar in chart.bars
        if bar.tick_label
    )
    rows = "".join(
        f'<tr><td>{e(bar.label)}</td><td class="num">{int(bar.value)}</td></tr>'
        for bar in chart.bars
    )
    cid, title = e(chart_id), e(chart.title)
    return mark_safe(  # noqa: S308  (escaped above, piece by piece)
        '<figure class="chart">'
        f'<svg viewBox="0 0 {chart.width} {chart.height}" role="img" '
        f'aria-labelledby="{cid}-title {cid}-desc" preserveAspectRatio="xMidYMid meet">'
        f'<title id="{cid}-title">{title}</title>'
        f'<desc id="{cid}-desc">{len(chart.bars)} bars, {int(chart.total)} {unit} in total; '
        "the same numbers are listed in the table below the chart.</desc>"
        f'<g class="chart-grid" aria-hidden="true">{grid}'
        f'<text class="chart-axis-title" x="14" y="{bottom}" transform="rotate(-90 14 {bottom})" '
        f'text-anchor="start">{unit}</text></g>'
        f'<g class="chart-bars">{bars}</g>'
        f'<g class="chart-x" aria-hidden="true"><line x1="{left}" x2="{right}" y1="{bottom}" '
        f'y2="{bottom}"></line>{ticks}</g>'
        "</svg>"
        '<details class="chart-table"><summary>Show the numbers</summary>'
        # Scrolls past 18rem: focusable and named, so a keyboard can scroll it
        # (axe: scrollable-region-focusable).
        f'<div class="table-wrap" tabindex="0" role="region" aria-label="{title}: the numbers">'
        f'<table><caption class="visually-hidden">{title}</caption>'
        f'<thead><tr><th scope="col">Day</th><th scope="col" class="num">{e(capfirst(chart.y_label))}'
        f"</th></tr></thead><tbody>{rows}</tbody></table></div></details></figure>"
    )
