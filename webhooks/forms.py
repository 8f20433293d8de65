"""Parsing the webhook pages' forms; no side effects (the services check again)."""

from __future__ import annotations

from typing import Any

from django import forms

from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin
from webhooks.events import MEMORY_CHANGES, NEEDS_A_PERSON, SUBSCRIBABLE
from webhooks.targets import MAX_URL_LENGTH


class EndpointForm(StorableTextMixin, forms.Form):
    url = forms.CharField(
        max_length=MAX_URL_LENGTH,
        label="URL",
        help_text="An https:// address that accepts POST requests. Private and loopback "
        "addresses are refused.",
        widget=forms.URLInput(attrs={"placeholder": "https://hooks.example.com/aetnaweb"}),
    )
    events = forms.MultipleChoiceField(
        choices=list(SUBSCRIBABLE.items()),
        widget=forms.CheckboxSelectMultiple,
        help_text="Sent when one of these happens in the endpoint's scope or below it. "
        "Memory changes are sent only if you tick them.",
    )
    description = forms.CharField(
        max_length=200, required=False, help_text="What receives these events (optional)."
    )

    def event_groups(self) -> list[tuple[str, list[Any]]]:
        """The event checkboxes in two groups: what needs a person, and memory changes."""
        boxes = list(self["events"])
        return [
            ("Needs a person", [box for box in boxes if box.data["value"] in NEEDS_A_PERSON]),
            (
                "Memory changes (IDs and digests, never content)",
                [box for box in boxes if box.data["value"] in MEMORY_CHANGES],
            ),
        ]


class EndpointCreateForm(EndpointForm):
    scope = forms.CharField(
        max_length=200,
        help_text="Events from this scope and everything below it, e.g. acme:*:* or acme:alice:*.",
    )
    field_order = ["url", "scope", "events", "description"]

    def clean_scope(self) -> Scope:
        try:
            return Scope.parse(self.cleaned_data["scope"])
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc


class EndpointEditForm(EndpointForm):
    active = forms.BooleanField(
        required=False, help_text="A disabled endpoint receives nothing (test events excepted)."
    )
