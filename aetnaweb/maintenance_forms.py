"""Forms of the Maintenance page: parsing only."""

from __future__ import annotations

from django import forms

from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin
from memory.models import RetentionTarget
from memory.services.retention import MAX_KEEP_DAYS


class ReindexForm(StorableTextMixin, forms.Form):
    """Reindex the records stored at one scope, or (empty) at every scope."""

    scope = forms.CharField(
        required=False,
        max_length=200,
        label="Scope",
        help_text="Records stored at exactly this scope; empty for every scope (platform admins).",
        widget=forms.TextInput(attrs={"placeholder": "tenant:user:project", "autocomplete": "off"}),
    )

    def clean_scope(self) -> str:
        raw = (self.cleaned_data.get("scope") or "").strip()
        if not raw:
            return ""
        try:
            return str(Scope.parse(raw))
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc


class RetentionForm(forms.Form):
    dry_run = forms.BooleanField(
        required=False, label="Dry run: count what would be removed, remove nothing"
    )


class MemoryRetentionForm(StorableTextMixin, forms.Form):
    """Set (or, with ``remove``, remove) the retention policy of one kind of content at a subtree."""

    scope = forms.CharField(
        max_length=200,
        label="Scope subtree",
        help_text="The policy applies at this scope and every scope below it.",
        widget=forms.TextInput(attrs={"placeholder": "acme:alice:*", "autocomplete": "off"}),
    )
    target = forms.ChoiceField(choices=RetentionTarget.choices, label="Content")
    keep_days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_KEEP_DAYS, label="Keep for (days)"
    )

    def clean_scope(self) -> str:
        try:
            return str(Scope.parse((self.cleaned_data.get("scope") or "").strip()))
        except ScopeError as exc:
            raise forms.ValidationError(str(exc)) from exc
