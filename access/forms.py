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


# -- people and access (access.people) --------------------------------------------------

ROLE_HELP = {
    "viewer": "viewer: read records, actions and the audit trail",
    "reviewer": "reviewer: also promote or reject quarantined facts, and forget",
    "approver": "approver: also approve, deny and commit guarded actions",
    "auditor": "auditor: also verify chains, checkpoints and exports",
    "admin": "admin: everything, including people, tokens and webhooks",
}


class _ScopeRoleFields(StorableTextMixin, forms.Form):
    scope = forms.CharField(
        max_length=200,
        help_text="The role holds on this scope and everything below it, e.g. acme:*:* or acme:alice:*.",
    )
    role = forms.ChoiceField(choices=[(role, text) for role, text in ROLE_HELP.items()])

    def clean_scope(self) -> Scope:
        raw = self.cleaned_data["scope"]
        try:
            return Scope.parse(raw)
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc


class InviteForm(_ScopeRoleFields):
    username = forms.CharField(
        max_length=150,
        label="Account name",
        help_text="What they will sign in with: letters, digits and @ . + - _",
    )
    email = forms.EmailField(
        required=False, help_text="Optional; kept on the account, never in the audit chain."
    )
    expires_in_days = forms.IntegerField(
        min_value=1,
        max_value=30,
        initial=7,
        label="Link expires in (days)",
        help_text="1 to 30 days. The link works once.",
    )
    field_order = ["username", "email", "scope", "role", "expires_in_days"]


class GrantForm(_ScopeRoleFields):
    """A role on a scope for an existing person."""


class JoinForm(forms.Form):
    """The invitee's password, twice; Django's password validators run in the service."""

    password = forms.CharField(
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 8 characters, not a common password, not all digits, not like your name.",
    )
    password_again = forms.CharField(
        strip=False,
        label="Password again",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
