"""Text every store can keep and every page can show.

Two rules, shared by every boundary (API, MCP, commands, forms) and by the
services themselves, so no path can store what another path cannot show:

- :func:`unstorable_text_in` / :func:`check_storable_text` refuse a NUL
  character (PostgreSQL text refuses it) and an unpaired surrogate
  (``\\ud800``-``\\udfff``: JSON can spell one, UTF-8 cannot encode it, so a
  page showing it would fail for good). Refusal messages never echo the bad
  character, so the refusal itself is always encodable.
- :func:`displayable` and :class:`DisplayableTemplates` show a string that is
  already stored (an append-only audit row cannot be fixed) with every
  unencodable code point replaced by U+FFFD, instead of failing the page.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from django.template.backends.django import DjangoTemplates, Template
from django.utils.safestring import mark_safe

from aetnaweb.errors import InvalidInput

NUL_REASON = "text may not contain the NUL character (\\u0000)"
SURROGATE_REASON = (
    "text may not contain an unpaired surrogate (\\ud800-\\udfff): it cannot be encoded as UTF-8"
)

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


class UnstorableText(InvalidInput):
    """Text no store keeps intact; ``field`` names where it was found (``payload.k``)."""

    code = "invalid_field"
    status = 400
    meaning = "a field does not validate (see field and detail)"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}", field=field)
        self.reason = reason

    @property
    def detail(self) -> str:
        # The API names the field beside the sentence, so the sentence leaves it out.
        return self.reason


def _reason(text: str) -> str | None:
    if "\x00" in text:
        return NUL_REASON
    if _SURROGATE.search(text):
        return SURROGATE_REASON
    return None


def unstorable_text_in(value: Any, where: str = "") -> tuple[str, str] | None:
    """``(dotted field path, reason)`` for the first bad string or key in ``value``, else ``None``.

    Walks strings, dict keys and values, lists and tuples; other values are
    not text and pass. A bad key is reported at the dict holding it.
    """
    if isinstance(value, str):
        reason = _reason(value)
        return (where, reason) if reason else None
    if isinstance(value, dict):
        for key, item in value.items():
            key_text = str(key)
            reason = _reason(key_text)
            if reason:
                return (where, reason)
            found = unstorable_text_in(item, f"{where}.{key_text}" if where else key_text)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = unstorable_text_in(item, f"{where}.{index}" if where else str(index))
            if found is not None:
                return found
    return None


def check_storable_text(value: Any, field: str) -> None:
    """Raise :class:`UnstorableText` naming ``field`` (and the path inside it) if ``value`` holds bad text."""
    found = unstorable_text_in(value, field)
    if found is not None:
        raise UnstorableText(found[0] or field, found[1])


def storable_text_arguments[F: Callable[..., Any]](service: F) -> F:
    """Refuse bad text in any keyword argument before ``service`` runs (it then writes nothing).

    Services take keyword arguments only, so the argument name is the field a
    refusal names; a view, command or MCP tool that forgot to check still
    cannot store what a page could not show.
    """

    @functools.wraps(service)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            check_storable_text(value, name)
        return service(*args, **kwargs)

    return checked  # type: ignore[return-value]


def displayable(text: str) -> str:
    """``text`` with each code point UTF-8 cannot encode (a lone surrogate) replaced by U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, text)


class DisplayableTemplate(Template):
    def render(self, context: Any = None, request: Any = None) -> str:
        # Rendered output is safe HTML; re.sub hands back a plain str, and a
        # template rendered into another (the admin's filter sidebar) would
        # then be escaped a second time and show as raw markup.
        return mark_safe(displayable(super().render(context, request)))  # noqa: S308


class DisplayableTemplates(DjangoTemplates):
    """Django templates whose output is always encodable.

    A string that reached the database before the boundaries refused it (or
    through raw SQL) would otherwise make ``HttpResponse`` raise
    UnicodeEncodeError on every render: one replacement step here covers
    every page, partial and the admin.
    """

    def from_string(self, template_code: str) -> DisplayableTemplate:
        return DisplayableTemplate(self.engine.from_string(template_code), self)

    def get_template(self, template_name: str) -> DisplayableTemplate:
        template = super().get_template(template_name)
        return DisplayableTemplate(template.template, self)


class StorableTextMixin:
    """For forms: a field whose cleaned value holds unstorable text gets a form error.

    Browsers' form encodings cannot carry a lone surrogate (Django decodes them
    with replacement), but NUL can arrive, and forms are also built from other
    input (commands, tests); the form says which field instead of the service
    raising later.
    """

    def full_clean(self) -> None:
        super().full_clean()  # type: ignore[misc]
        cleaned: dict[str, Any] = getattr(self, "cleaned_data", {})
        for name, value in list(cleaned.items()):
            found = unstorable_text_in(value)
            if found is not None:
                self.add_error(name, found[1])  # type: ignore[attr-defined]
