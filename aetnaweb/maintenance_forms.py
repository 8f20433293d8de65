"""Forms of the Maintenance page: parsing only."""

from __future__ import annotations

from django import forms

from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin


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
