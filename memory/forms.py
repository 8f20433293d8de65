"""Parsing the memory pages' input; no side effects (design.md: forms.py).

Scopes typed into a form are validated with :meth:`Scope.parse` and become a
form error naming the bad segment (a scope in a URL is the view's 404 page
instead). Record IDs are checked for shape only: whether a record exists, is
visible and is in the right state is the services' and selectors' business.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from django import forms

from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import StorableTextMixin
from memory.limits import (
    MAX_CONTEXT_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_RECALL_LIMIT,
    MAX_SELECTOR_CHARS,
)
from memory.models import SourceType, Status, TrustTier
from memory.services.forgetting import MAX_FORGET_REFERENCE_CHARS

MAX_RECEIPT_BYTES = 64 * 1024
RECORD_ID_RE = re.compile(r"mem_[0-9a-f]{32}")
EPISODE_ID_RE = re.compile(r"ep_[0-9a-f]{32}")
REJECT_WORD = "REJECT"
PROMOTE = "promote"
REJECT = "reject"
DECISIONS = [(PROMOTE, "Promote"), (REJECT, "Reject")]


def parse_scope_field(raw: str) -> Scope:
    try:
        return Scope.parse(raw.strip())
    except ScopeError as exc:
        raise forms.ValidationError(str(exc)) from exc


def check_episode_ids(raw: list[str]) -> list[str]:
    """Episode IDs, one per value or several in one separated by spaces or commas."""
    ids = [item for value in raw for item in re.split(r"[\s,]+", value) if item]
    for value in ids:
        if not EPISODE_ID_RE.fullmatch(value):
            raise forms.ValidationError(
                f"{value[:60]!r} is not a message ID (they look like ep_ followed by 32 hex digits)"
            )
    return list(dict.fromkeys(ids))


def check_record_id(raw: str) -> str:
    value = raw.strip()
    if not RECORD_ID_RE.fullmatch(value):
        raise forms.ValidationError(
            f"{value[:60]!r} is not a record ID (they look like mem_ followed by 32 hex digits)"
        )
    return value


class TextListField(forms.Field):
    """Several values of one parameter (``?x=a&x=b``), as a list of stripped strings.

    Unlike ``MultipleChoiceField`` it has no fixed choices: the values are
    record IDs or queue items checked by shape in the form's ``clean_*``.
    """

    widget = forms.MultipleHiddenInput
    default_error_messages = {"required": "Choose at least one.", "list": "Expected a list."}

    def to_python(self, value: Any) -> list[str]:
        if not value:
            return []
        if not isinstance(value, list | tuple):
            raise forms.ValidationError(self.error_messages["list"], code="list")
        return [str(item).strip() for item in value if str(item).strip()]


def _optional_choice(choices: list[tuple[str, str]], label: str) -> forms.ChoiceField:
    return forms.ChoiceField(choices=[("", f"Any {label}"), *choices], required=False, label=label)


class ScopeJumpForm(StorableTextMixin, forms.Form):
    """The scope browser's "open a scope" box."""

    scope = forms.CharField(
        max_length=200,
        help_text="tenant:user:project, e.g. acme:alice:website or acme:*:*",
    )

    def clean_scope(self) -> Scope:
        return parse_scope_field(self.cleaned_data["scope"])


class RecordFilterForm(StorableTextMixin, forms.Form):
    """Filters of a scope's record list (all optional; GET parameters)."""

    status = _optional_choice(Status.choices, "status")
    source_type = _optional_choice(SourceType.choices, "source type")
    trust_tier = _optional_choice(TrustTier.choices, "trust tier")
    session = forms.CharField(max_length=MAX_CONTEXT_CHARS, required=False, label="Session")
    q = forms.CharField(max_length=200, required=False, label="Text contains")
    below = forms.BooleanField(required=False, label="Include the scopes below")

    def selector_filters(self) -> dict[str, Any]:
        """Keyword arguments for :func:`memory.selectors.list_records`."""
        data = self.cleaned_data
        return {
            "include_descendants": bool(data.get("below")),
            "status": data.get("status") or None,
            "source_type": data.get("source_type") or None,
            "trust_tier": data.get("trust_tier") or None,
            "session_id": data.get("session") or None,
            "text": data.get("q") or None,
        }


class RecallTestForm(StorableTextMixin, forms.Form):
    """The recall tester: the same arguments an agent's recall takes."""

    query = forms.CharField(
        max_length=MAX_QUERY_CHARS,
        strip=True,
        label="Query",
        help_text="What an agent would ask, e.g. 'which editor do I use?'",
    )
    limit = forms.IntegerField(min_value=1, max_value=MAX_RECALL_LIMIT, initial=5, label="Limit")
    min_score = forms.FloatField(min_value=0.0, max_value=1.0, initial=0.0, label="Minimum score")


class DecisionForm(StorableTextMixin, forms.Form):
    """Promote or reject one quarantined record; the reason is required."""

    scope = forms.CharField(max_length=200, widget=forms.HiddenInput)
    record_id = forms.CharField(max_length=40, widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=DECISIONS)
    reason = forms.CharField(
        max_length=MAX_REASON_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give a reason: it is kept (as a digest) with the decision."},
    )
    acknowledge = forms.BooleanField(
        required=False,
        label="I read the warning and still want to promote",
    )

    def clean_scope(self) -> Scope:
        return parse_scope_field(self.cleaned_data["scope"])

    def clean_record_id(self) -> str:
        return check_record_id(self.cleaned_data["record_id"])


class BulkDecisionForm(StorableTextMixin, forms.Form):
    """Promote or reject several records at once, confirmed.

    Each selected item is ``<scope>|<record_id>`` (a scope never holds ``|``).
    Either decision needs the "I checked every ticked record" box (the page
    shows the live count ticked beside it); rejecting (which purges content)
    also needs the word ``REJECT`` typed.
    """

    MAX_ITEMS = 200

    items = TextListField(required=False)
    # "Tick all matching the filter": the view takes the queue's oldest
    # MAX_ITEMS matching records instead of the ticked ones, and ``expected``
    # (the count the page showed) must still hold, so nothing unseen is decided.
    all_matching = forms.BooleanField(required=False)
    expected = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=DECISIONS)
    reason = forms.CharField(
        max_length=MAX_REASON_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give a reason: it is kept (as a digest) with each decision."},
    )
    acknowledge = forms.BooleanField(
        required=False,
        label="I read the warning and still want to promote",
    )
    confirmed = forms.BooleanField(
        required=False, label="I checked every ticked record and want this decision for all"
    )
    confirm = forms.CharField(
        max_length=20,
        required=False,
        label="Confirmation",
        help_text=f"To reject, also type {REJECT_WORD}: rejecting purges content.",
    )

    def clean_items(self) -> list[tuple[Scope, str]]:
        raw = self.cleaned_data["items"]
        if len(raw) > self.MAX_ITEMS:
            raise forms.ValidationError(f"at most {self.MAX_ITEMS} records per bulk decision")
        parsed: list[tuple[Scope, str]] = []
        for item in dict.fromkeys(raw):
            scope_text, sep, record_id = item.partition("|")
            if not sep:
                raise forms.ValidationError(f"{item[:80]!r} is not a queue item")
            parsed.append((parse_scope_field(scope_text), check_record_id(record_id)))
        return parsed

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        items = data.get("items")
        decision = data.get("decision")
        if items is None or decision is None:
            return data
        if not items and not data.get("all_matching"):
            self.add_error("items", "Tick at least one record in the queue.")
            return data
        if not data.get("confirmed"):
            self.add_error(
                "confirmed",
                "Tick “I checked every ticked record” to confirm the decision.",
            )
        if decision == REJECT and (data.get("confirm") or "").strip() != REJECT_WORD:
            self.add_error(
                "confirm",
                f"Type {REJECT_WORD} to reject them; rejecting purges their content.",
            )
        return data


class SourceDecisionForm(StorableTextMixin, forms.Form):
    """Every waiting fact of one source message, decided together.

    Each fact's decision comes as ``decision-<record_id>`` = promote | reject;
    :func:`memory.services.decide_source` checks they are exactly the facts
    still waiting.
    """

    MAX_FACTS = 200
    PREFIX = "decision-"

    scope = forms.CharField(max_length=200, widget=forms.HiddenInput)
    episode_id = forms.CharField(max_length=40, widget=forms.HiddenInput)
    reason = forms.CharField(
        max_length=MAX_REASON_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give a reason: it is kept (as a digest) with each decision."},
    )
    acknowledge = forms.BooleanField(
        required=False, label="I read the warning and still want to promote"
    )

    def clean_scope(self) -> Scope:
        return parse_scope_field(self.cleaned_data["scope"])

    def clean_episode_id(self) -> str:
        value = self.cleaned_data["episode_id"].strip()
        if not EPISODE_ID_RE.fullmatch(value):
            raise forms.ValidationError(f"{value[:60]!r} is not a source message ID (ep_…)")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        decisions: dict[str, str] = {}
        for key in self.data:
            if not key.startswith(self.PREFIX):
                continue
            record_id = key.removeprefix(self.PREFIX)
            value = self.data.get(key)
            if value not in (PROMOTE, REJECT):
                self.add_error(None, "Choose promote or reject for every fact of the source.")
                return data
            try:
                decisions[check_record_id(record_id)] = value
            except forms.ValidationError:
                self.add_error(None, "A decision names something that is not a record ID.")
                return data
        if not decisions:
            self.add_error(None, "Choose promote or reject for every fact of the source.")
        elif len(decisions) > self.MAX_FACTS:
            self.add_error(None, f"at most {self.MAX_FACTS} facts per source")
        data["decisions"] = decisions
        return data


class ReviewScopeForm(StorableTextMixin, forms.Form):
    """Narrow the review queue to one scope's subtree (optional)."""

    scope = forms.CharField(max_length=200, required=False, label="Only scope")
    source_type = _optional_choice(list(SourceType.choices), "Source")
    age = forms.ChoiceField(
        required=False,
        label="Waiting",
        choices=[
            ("", "any time"),
            ("1", "over a day"),
            ("7", "over a week"),
            ("30", "over 30 days"),
        ],
    )

    warning = forms.ChoiceField(
        required=False,
        label="Warning",
        choices=[("", "with or without"), ("warned", "with a warning"), ("clean", "without")],
    )

    def clean_scope(self) -> Scope | None:
        raw = self.cleaned_data["scope"].strip()
        return parse_scope_field(raw) if raw else None

    def queue_filters(self, now: datetime) -> dict[str, Any]:
        """The selector arguments of a valid form (scope, source, waiting since, warning)."""
        days = self.cleaned_data.get("age")
        return {
            "scope": self.cleaned_data.get("scope"),
            "source_type": self.cleaned_data.get("source_type") or None,
            "waiting_since": now - timedelta(days=int(days)) if days else None,
            "warning": self.cleaned_data.get("warning") or None,
        }


class ForgetForm(StorableTextMixin, forms.Form):
    """A forget request: a selector (words the records or messages contain), a selection of
    record IDs, message (episode) IDs, or a session.

    Exactly one of them; an empty request is refused here, before any
    service runs (the service refuses it too, and never reads it as
    "everything").
    """

    selector = forms.CharField(
        max_length=MAX_SELECTOR_CHARS,
        required=False,
        strip=True,
        label="Records with the words",
        help_text="Whole words the records hold, any case, e.g. 'backup email' (never part of "
        "a word: 'me' does not match 'meetings').",
    )
    record_ids = TextListField(required=False)
    episode_ids = TextListField(
        required=False,
        label="Messages with the IDs",
        help_text="Stored message (episode) IDs, ep_…, separated by spaces or commas: each "
        "message is forgotten with every record drawn from it.",
    )
    session_id = forms.CharField(
        max_length=MAX_CONTEXT_CHARS,
        required=False,
        strip=True,
        label="Every message of the session",
        help_text="A session ID: all its stored messages and records at this scope.",
    )

    include_below = forms.BooleanField(
        required=False,
        label="Also the scopes below",
        help_text="Words also match in every scope below this one (one receipt per scope, "
        "bundled).",
    )

    # The ways to ask, in the order the services take them.
    WAYS = ("selector", "record_ids", "episode_ids", "session_id")

    def clean_record_ids(self) -> list[str]:
        raw = self.cleaned_data["record_ids"]
        return list(dict.fromkeys(check_record_id(item) for item in raw))

    def clean_episode_ids(self) -> list[str]:
        return check_episode_ids(self.cleaned_data["episode_ids"])

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        given = [way for way in self.WAYS if data.get(way)]
        if len(given) > 1:
            raise forms.ValidationError(
                "Forget by one thing at a time: words, a selection of records, message IDs "
                "or a session, not several."
            )
        if not given:
            raise forms.ValidationError(
                "Say what to forget: type words the records or messages contain, message IDs "
                "or a session, or tick records on the scope page. An empty request is never "
                "read as 'everything'."
            )
        return data

    def service_arguments(self) -> dict[str, Any]:
        """``selector=``, ``record_ids=``, ``episode_ids=`` or ``session_id=`` for the services."""
        for way in self.WAYS[1:]:
            if self.cleaned_data.get(way):
                return {way: self.cleaned_data[way]}
        return {"selector": self.cleaned_data["selector"]}


class ForgetApplyForm(ForgetForm):
    """The preview's confirmation: the same request plus the exact IDs previewed, the rows
    left ticked, the count typed back and the request's reference.

    A row offered with a tick box (``offered_*``) and not sent back ticked
    (``keep_*``) is left out; a post that offered none leaves nothing out.
    """

    NOT_PREVIEWED = "Nothing was previewed: preview the forget first."

    expected_record_ids = TextListField(required=False)
    expected_episode_ids = TextListField(required=False)
    offered_record_ids = TextListField(required=False)
    offered_episode_ids = TextListField(required=False)
    keep_record_ids = TextListField(required=False)
    keep_episode_ids = TextListField(required=False)
    confirm_count = forms.IntegerField(
        required=False,
        min_value=0,
        label="Type the number of rows left ticked",
    )
    reference = forms.CharField(
        required=False,
        max_length=MAX_FORGET_REFERENCE_CHARS,
        strip=True,
        label="Request reference (optional)",
        help_text="The ticket or letter this forget answers, e.g. REQ-2041: kept with the receipt.",
    )

    def left_out(self) -> dict[str, list[str]]:
        """``exclude_record_ids`` / ``exclude_episode_ids``: offered rows sent back unticked."""
        data = self.cleaned_data
        return {
            "exclude_record_ids": sorted(
                set(data.get("offered_record_ids") or []) - set(data.get("keep_record_ids") or [])
            ),
            "exclude_episode_ids": sorted(
                set(data.get("offered_episode_ids") or []) - set(data.get("keep_episode_ids") or [])
            ),
        }

    def clean_expected_record_ids(self) -> list[str]:
        raw = self.cleaned_data["expected_record_ids"]
        return list(dict.fromkeys(check_record_id(item) for item in raw))

    def clean_expected_episode_ids(self) -> list[str]:
        return check_episode_ids(self.cleaned_data["expected_episode_ids"])

    def clean(self) -> dict[str, Any]:
        data = self.cleaned_data
        # A preview always lists something (or refuses): two empty lists mean none was made.
        confirmed = data.get("expected_record_ids") or data.get("expected_episode_ids")
        if not confirmed and not self.has_error("expected_record_ids"):
            self.add_error("expected_record_ids", self.NOT_PREVIEWED)
        return super().clean()


class ReceiptVerifyForm(StorableTextMixin, forms.Form):
    """A deletion receipt to verify: an uploaded JSON file or pasted JSON."""

    receipt_file = forms.FileField(required=False, label="Receipt file (.json)")
    receipt_text = forms.CharField(
        required=False,
        max_length=MAX_RECEIPT_BYTES,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        label="…or paste the receipt JSON",
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        upload = data.get("receipt_file")
        text = data.get("receipt_text") or ""
        if self.errors:
            return data
        if upload is not None:
            if upload.size > MAX_RECEIPT_BYTES:
                raise forms.ValidationError(
                    "A receipt is a few hundred bytes; that file is too big."
                )
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise forms.ValidationError("The file is not UTF-8 text.") from exc
        if not text.strip():
            raise forms.ValidationError("Choose a receipt file or paste its JSON.")
        try:
            data["receipt"] = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"That is not JSON: {exc}") from exc
        return data


class MemorySearchForm(StorableTextMixin, forms.Form):
    """The top-bar search's filters: a status, a scope (its subtree), how recent."""

    status = _optional_choice(list(Status.choices), "status")
    scope = forms.CharField(max_length=200, required=False, label="Scope")
    age = forms.ChoiceField(
        required=False,
        label="Stored",
        choices=[
            ("", "any time"),
            ("1", "in the last day"),
            ("7", "in the last week"),
            ("30", "in the last 30 days"),
        ],
    )

    def clean_scope(self) -> Scope | None:
        raw = self.cleaned_data["scope"].strip()
        return parse_scope_field(raw) if raw else None

    def selector_filters(self, now: datetime) -> dict[str, Any]:
        """The arguments of :func:`memory.selectors.search_memory` of a valid form."""
        days = self.cleaned_data.get("age")
        return {
            "status": self.cleaned_data.get("status") or None,
            "scope": self.cleaned_data.get("scope"),
            "since": now - timedelta(days=int(days)) if days else None,
        }


class EraseSubjectForm(StorableTextMixin, forms.Form):
    """The request's reference and the subtree typed back; the service checks both again."""

    reference = forms.CharField(
        max_length=200,
        help_text="The ticket or letter this erasure answers; kept with the certificate.",
    )
    confirm = forms.CharField(max_length=200, help_text="Type the scope exactly to confirm.")


class LegalHoldForm(StorableTextMixin, forms.Form):
    reference = forms.CharField(
        max_length=200, help_text="The matter or order the hold answers (kept with the hold)."
    )


class SubjectExportForm(StorableTextMixin, forms.Form):
    reference = forms.CharField(
        max_length=200, help_text="The request's reference (a ticket or letter number)."
    )
