"""Forms for the audit pages: parsing and validation only, no side effects.

A scope typed into any of these forms is parsed with ``Scope.parse`` and an
invalid one becomes a form error naming the reason (scopes.md: "a form error
in the dashboard"), never a repaired value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django import forms

from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin
from audit.chain import EVENT_TYPE_RE

MAX_UPLOAD_BYTES = 20 * 1024 * 1024
DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
CHECKPOINT_FORMAT = "aetnamem-checkpoint-v1"
RECEIPT_FORMAT = "aetnamem-deletion-receipt-v1"


def clean_scope_value(raw: str, *, required: bool = False) -> str:
    raw = (raw or "").strip()
    if not raw:
        if required:
            raise forms.ValidationError("Enter a scope, e.g. acme:*:* or acme:alice:*.")
        return ""
    try:
        return str(Scope.parse(raw))
    except ScopeError as exc:
        raise forms.ValidationError(str(exc)) from exc


def utc_datetime_field(label: str) -> forms.DateTimeField:
    """An optional UTC date and time, typed or picked (the browser's date-time picker)."""
    return forms.DateTimeField(
        required=False,
        input_formats=DATETIME_FORMATS,
        label=label,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )


class EventFilterForm(StorableTextMixin, forms.Form):
    """The audit explorer's filters; every field is optional and exact."""

    scope = forms.CharField(
        required=False,
        max_length=200,
        help_text="This scope's chain and every chain under it, e.g. acme:*:* or acme:alice:*.",
        widget=forms.TextInput(attrs={"placeholder": "tenant:user:project", "autocomplete": "off"}),
    )
    event_type = forms.CharField(
        required=False,
        max_length=100,
        label="Event type",
        help_text="Each type with the number of events you may see.",
        widget=forms.Select(),
    )
    actor = forms.CharField(
        required=False, max_length=150, help_text="Exact name, any letter case."
    )
    session_id = forms.CharField(
        required=False, max_length=200, label="Session", help_text="Whole ID or its start."
    )
    record_id = forms.CharField(
        required=False, max_length=200, label="Record", help_text="Whole ID or its start."
    )
    since = utc_datetime_field("From (UTC)")
    until = utc_datetime_field("Until (UTC)")

    def __init__(
        self,
        data: Any = None,
        *,
        type_counts: dict[str, int] | None = None,
    ) -> None:
        super().__init__(data)
        counts = dict(type_counts or {})
        requested = (self.data.get("event_type") or "").strip() if self.is_bound else ""
        if requested and requested not in counts and EVENT_TYPE_RE.fullmatch(requested):
            counts[requested] = 0  # a link to a type nobody may see yet keeps its filter
        choices: list[tuple[str, str]] = [("", "Any type")]
        choices += [(name, f"{name} ({counts[name]:,})") for name in sorted(counts)]
        widget = self.fields["event_type"].widget
        assert isinstance(widget, forms.Select)
        widget.choices = choices

    def clean_scope(self) -> str:
        return clean_scope_value(self.cleaned_data.get("scope", ""))

    def clean_event_type(self) -> str:
        value = (self.cleaned_data.get("event_type") or "").strip()
        if value and not EVENT_TYPE_RE.fullmatch(value):
            raise forms.ValidationError(
                "An event type is dotted lower-case words, e.g. memory.record_promoted."
            )
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in ("actor", "session_id", "record_id"):
            cleaned[name] = (cleaned.get(name) or "").strip()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            raise forms.ValidationError("“From” must be before “Until”.")
        return cleaned

    def filters(self) -> dict[str, Any]:
        """The non-empty filters, as keyword arguments for the event selector."""
        data = self.cleaned_data
        result: dict[str, Any] = {}
        for name in ("scope", "event_type", "actor", "session_id", "record_id"):
            if data.get(name):
                result[name] = data[name]
        for name in ("since", "until"):
            if data.get(name):
                result[name] = data[name].astimezone(UTC)
        return result

    def is_filtered(self) -> bool:
        return bool(self.is_bound and self.is_valid() and self.filters())


class ExportRequestForm(StorableTextMixin, forms.Form):
    """Ask for an export file: a scope's subtree (empty: every chain) and an optional time range."""

    scope = forms.CharField(
        required=False,
        max_length=200,
        help_text="This scope's chain and every chain under it; empty for every chain.",
        widget=forms.TextInput(attrs={"placeholder": "tenant:user:project", "autocomplete": "off"}),
    )
    since = utc_datetime_field("From (UTC)")
    until = utc_datetime_field("Until (UTC)")

    def clean_scope(self) -> str:
        return clean_scope_value(self.cleaned_data.get("scope", ""))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "“Until” must be after “From”.")
        return cleaned

    def request(self) -> dict[str, Any]:
        """The cleaned request as keyword arguments for ``audit.exports.start_export``."""
        data = self.cleaned_data
        return {
            "scope": data.get("scope") or None,
            "since": data["since"].astimezone(UTC) if data.get("since") else None,
            "until": data["until"].astimezone(UTC) if data.get("until") else None,
        }


class VerifyChainForm(StorableTextMixin, forms.Form):
    """Start a verification run over one scope's chains."""

    scope = forms.CharField(max_length=200)

    def clean_scope(self) -> str:
        return clean_scope_value(self.cleaned_data.get("scope", ""), required=True)


@dataclass(frozen=True)
class EvidenceUpload:
    """An uploaded evidence file, recognised by its content."""

    kind: str  # "checkpoint" or "receipt"
    filename: str
    checkpoint_lines: tuple[str, ...] = ()
    receipt: Any = None


class EvidenceUploadForm(forms.Form):
    """A checkpoint file (JSON Lines) or a deletion receipt (one JSON object), up to 20 MiB."""

    evidence = forms.FileField(
        label="Checkpoint file or deletion receipt",
        help_text="A .jsonl checkpoint file downloaded earlier, or a deletion receipt (.json).",
    )

    def clean_evidence(self) -> EvidenceUpload:
        upload = self.cleaned_data["evidence"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError("The file is larger than 20 MiB.")
        try:
            text = upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError("The file is not UTF-8 text.") from exc
        name = upload.name or "upload"
        if not text.strip():
            raise forms.ValidationError("The file is empty.")
        # A receipt is one JSON object (possibly pretty-printed); a checkpoint
        # file is one canonical JSON object per line.
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and whole.get("format") == RECEIPT_FORMAT:
            return EvidenceUpload(kind="receipt", filename=name, receipt=whole)
        lines = tuple(text.splitlines())
        first = next((line for line in lines if line.strip()), "")
        try:
            head = json.loads(first)
        except ValueError as exc:
            raise forms.ValidationError(
                "The file is neither a checkpoint file (JSON Lines) nor a deletion receipt (JSON): "
                "its first line is not JSON."
            ) from exc
        if isinstance(head, dict) and head.get("format") == CHECKPOINT_FORMAT:
            return EvidenceUpload(kind="checkpoint", filename=name, checkpoint_lines=lines)
        if isinstance(head, dict) and head.get("format") == RECEIPT_FORMAT:
            return EvidenceUpload(kind="receipt", filename=name, receipt=head)
        raise forms.ValidationError(
            f"Unrecognised evidence: expected format {CHECKPOINT_FORMAT!r} (a checkpoint file) "
            f"or {RECEIPT_FORMAT!r} (a deletion receipt)."
        )


def utc_iso(value: datetime) -> str:
    """The ISO-8601 UTC form ``created_at`` is stored in, for comparisons on the text column."""
    return value.astimezone(UTC).isoformat()
