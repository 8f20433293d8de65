"""Parsing the dashboard's API-token form; no side effects (design.md: forms.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.utils import timezone

from aetnaweb.access import AUDIT, FORGET, PROPOSE, READ, STAGE, TOKEN_CAPABILITIES, WRITE
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin

CAPABILITY_HELP = {
    READ: "read: list and show records, recall, persona, scenes, list and show actions",
    WRITE: "write: remember, capture turns, log agent actions",
    FORGET: "forget: purge records and receive deletion receipts",
    PROPOSE: "propose: propose facts for review (they land quarantined)",
    STAGE: "stage: stage guarded actions for a person to approve",
    AUDIT: "audit: verify chains, export events, download checkpoints",
}

MAX_DAYS = 366


class TokenCreateForm(StorableTextMixin, forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="Who will use it, e.g. 'support-bot (prod)'. Recorded in the audit chain as a digest.",
    )
    scope = forms.CharField(
        max_length=200,
        help_text="The token reads and writes only inside this subtree, e.g. acme:alice:*.",
    )
    capabilities = forms.MultipleChoiceField(
        choices=[(cap, CAPABILITY_HELP[cap]) for cap in sorted(TOKEN_CAPABILITIES)],
        widget=forms.CheckboxSelectMultiple,
        help_text="Promote, reject, approve and commit are never available to tokens.",
    )
    expires_in_days = forms.IntegerField(
        min_value=1,
        max_value=MAX_DAYS,
        initial=30,
        label="Expires in (days)",
        help_text=f"1 to {MAX_DAYS} days.",
    )

    rate_limit_per_minute = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=1_000_000,
        label="Rate limit (requests per minute)",
        help_text="Empty: the server default. 0: unlimited. Over it, the API answers 429.",
    )

    def clean_scope(self) -> Scope:
        raw = self.cleaned_data["scope"]
        try:
            return Scope.parse(raw)
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def expires_at(self) -> datetime:
        days: int = self.cleaned_data["expires_in_days"]
        return timezone.now() + timedelta(days=days)
