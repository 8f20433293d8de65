"""Forms for the guarded-actions pages: parsing and validating input, no side effects."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from actions import formats
from actions.limits import MAX_OWNER_LENGTH, MAX_REASON_LENGTH
from actions.models import ActionResolution
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin

TRANSACTION_ID = re.compile(r"^act_[0-9a-f]{32}$")


class DenyForm(StorableTextMixin, forms.Form):
    """A reviewer's refusal. The reason is required; it stays on the transaction, never in the audit log."""

    reason = forms.CharField(
        label="Reason for denying",
        max_length=MAX_REASON_LENGTH,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Why this plan must not run"}),
        help_text="Kept on the transaction for the proposer to read; the audit chain records only its digest.",
        error_messages={"required": "Say why you deny this plan; the proposer needs the reason."},
    )


class AbortForm(StorableTextMixin, forms.Form):
    """Abort an approved (or staged) plan before it runs; the reason is optional."""

    reason = forms.CharField(
        label="Reason for aborting (optional)",
        max_length=MAX_REASON_LENGTH,
        required=False,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Why this plan should not run"}),
    )


class ResolutionForm(StorableTextMixin, forms.Form):
    """Close an uncertain or recovery-required transaction: what was found, who follows up."""

    outcome = forms.ChoiceField(
        label="What you found",
        choices=[("", "choose…"), *ActionResolution.OUTCOMES],
        error_messages={"required": "Say what you found in the world."},
    )
    owner = forms.CharField(
        label="Owner of any follow-up",
        max_length=MAX_OWNER_LENGTH,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "a person or a team", "autocomplete": "off"}),
        error_messages={"required": "Name who owns the follow-up (you, a person or a team)."},
    )
    note = forms.CharField(
        label="Note",
        max_length=MAX_REASON_LENGTH,
        strip=True,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "What you checked and what you did"}
        ),
        help_text="Readable here by those who may see this plan; the audit chain records its digest.",
        error_messages={"required": "Write what you checked and what you did."},
    )


class PurgeForm(StorableTextMixin, forms.Form):
    """The confirmation step before payloads are purged."""

    confirm = forms.BooleanField(
        label="I understand that the file content, arguments and before-images of this "
        "transaction are erased and cannot be restored.",
        error_messages={"required": "Tick the box to confirm the purge; nothing was erased."},
    )


class HistoryFilterForm(StorableTextMixin, forms.Form):
    """Filters for the transaction history: a scope subtree, a state, and the page cursor."""

    scope = forms.CharField(
        required=False,
        max_length=200,
        label="Scope",
        widget=forms.TextInput(attrs={"placeholder": "acme:alice:*", "autocomplete": "off"}),
        help_text="Only this scope and the scopes under it.",
    )
    state = forms.ChoiceField(
        required=False,
        label="State",
        choices=[("", "any state")]
        + [
            (state, state.replace("_", " "))
            for state in formats.TRANSACTION_STATES
            if state != formats.DRAFT
        ],
    )
    proposer = forms.CharField(
        required=False,
        max_length=150,
        label="Proposed by",
        widget=forms.TextInput(attrs={"placeholder": "agent:deploy-bot", "autocomplete": "off"}),
        help_text="The exact proposer, any letter case.",
    )
    adapter = forms.CharField(
        required=False,
        max_length=100,
        label="Adapter",
        widget=forms.TextInput(attrs={"placeholder": "filesystem", "autocomplete": "off"}),
    )
    since = forms.DateField(
        required=False,
        label="From (UTC)",
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
    until = forms.DateField(
        required=False,
        label="Until (UTC, inclusive)",
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
    )
    after = forms.CharField(required=False, max_length=40, widget=forms.HiddenInput)

    def clean_adapter(self) -> str | None:
        value = (self.cleaned_data.get("adapter") or "").strip()
        if value and not re.fullmatch(r"[a-z0-9_.-]{1,100}", value):
            raise forms.ValidationError("An adapter name is lower-case letters, digits, _ . -")
        return value or None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("“From” must not be after “Until”.")
        return data

    def clean_scope(self) -> str | None:
        raw = self.cleaned_data.get("scope") or ""
        if not raw:
            return None
        try:
            return str(Scope.parse(raw))
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_after(self) -> str | None:
        raw = self.cleaned_data.get("after") or ""
        if not raw:
            return None
        if not TRANSACTION_ID.match(raw):
            raise forms.ValidationError("the page cursor must be a transaction ID (act_…)")
        return raw

    def filters(self) -> dict[str, Any]:
        """Keyword arguments for :func:`actions.selectors.list_transactions`."""
        data = self.cleaned_data
        return {
            "scope": data.get("scope"),
            "states": [data["state"]] if data.get("state") else None,
            "after": data.get("after"),
            "proposer": (data.get("proposer") or "").strip() or None,
            "adapter": data.get("adapter"),
            "created_from": data.get("since"),
            "created_until": data.get("until"),
        }
