"""The error catalogue: every domain error has one documented code and an allowed status,
the API answers each through one handler, pages and commands through one helper each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.signed_cookies import SessionStore
from django.core.management.base import CommandError
from django.http import Http404, HttpRequest, HttpResponse
from django.test import RequestFactory

import access.grants
import access.lockouts
import access.tokens
import actions.errors
import audit.canonical
import audit.checkpoints
import audit.exports
import audit.merkle
import audit.notes
import audit.selectors
import audit.services
import audit.tree
import audit.witness
import memory.batch
import memory.errors
from aetnaweb.access import AccessDenied
from aetnaweb.api import ERROR_CODES, _domain_error
from aetnaweb.cli import REFUSED, refusals_exit
from aetnaweb.dashboard import dashboard_view, form_refusals
from aetnaweb.errors import ALLOWED_STATUSES, CATALOGUE, DomainError, catalogue_markdown
from aetnaweb.scopes import ScopeError
from aetnaweb.text import NUL_REASON, UnstorableText

ROOT = Path(__file__).resolve().parents[2]
SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
# Wrappers answer with the code of what they wrap; they declare none of their own.
WRAPPERS = {memory.batch.BatchItemError}
LOADED = (access.grants, access.lockouts, access.tokens, audit.canonical, audit.checkpoints)
LOADED += (
    audit.exports,
    audit.merkle,
    audit.notes,
    audit.selectors,
    audit.services,
    audit.tree,
    audit.witness,
)


def _subclasses(cls: type) -> set[type]:
    return {sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))}


def _domain_errors() -> set[type[DomainError]]:
    assert LOADED  # (imported above so every app's classes are defined)
    return {cls for cls in _subclasses(DomainError) if cls.__module__.split(".")[0] != "tests"}


# -- the classes ---------------------------------------------------------------------


def test_every_domain_error_declares_its_own_code_status_and_meaning():
    # Given every DomainError subclass in the project
    classes = _domain_errors() - WRAPPERS
    assert len(classes) > 30
    for cls in classes:
        # Then each states its code, status and meaning itself (no inherited or mangled code)
        for attribute in ("code", "status", "meaning"):
            assert attribute in cls.__dict__, f"{cls.__qualname__} does not declare {attribute}"
        assert SNAKE.fullmatch(cls.code), cls
        assert cls.status in ALLOWED_STATUSES, cls
        assert cls.meaning.strip(), cls


def test_codes_are_unique_across_classes():
    # Given each class's own code and extra codes
    seen: set[str] = set()
    for cls in _domain_errors() - WRAPPERS:
        for code in (cls.code, *cls.__dict__.get("extra_codes", {})):
            seen.add(code)
            # Then the catalogue names one class per code, and any other class that
            # answers with it refines that class (UnstorableText is an InvalidInput)
            # with the same status.
            holder = CATALOGUE[code]
            assert issubclass(cls, holder), f"{code} is declared by {holder} and {cls}"
            assert cls.status == holder.status, cls
    assert seen == set(CATALOGUE)


def test_a_class_with_a_status_outside_the_allowed_set_is_refused_at_definition():
    with pytest.raises(TypeError, match="status 418"):

        class Teapot(DomainError):
            code = "teapot_catalogue_test"
            status = 418
            meaning = "never registered"


def test_a_second_class_claiming_a_code_is_refused_at_definition():
    with pytest.raises(TypeError, match="record_state_error"):

        class Impostor(DomainError):
            code = "record_state_error"
            status = 409
            meaning = "never registered"


# What clients and the published specs rely on: pinned, so changing a class's
# status or code fails here (and in the endpoint tests that meet them).
PINNED = {
    memory.errors.RecordNotFound: ("record_not_found", 400),
    memory.errors.RecordStateError: ("record_state_error", 409),
    memory.errors.ForgetPreviewStale: ("forget_preview_stale", 409),
    memory.errors.ExtractionError: ("extraction_error", 400),
    memory.errors.SelectorError: ("selector_error", 400),
    actions.errors.ActionInputError: ("invalid_operation", 400),
    actions.errors.ActionPolicyViolation: ("policy_violation", 400),
    actions.errors.AdapterNotRegistered: ("unknown_adapter", 400),
    actions.errors.TransactionNotFound: ("transaction_not_found", 404),
    actions.errors.ApprovalUnavailable: ("approval_unavailable", 503),
    audit.selectors.AuditQueryError: ("invalid_audit_query", 400),
    ScopeError: ("invalid_scope", 400),
    AccessDenied: ("access_denied", 404),
    UnstorableText: ("invalid_field", 400),
}


@pytest.mark.parametrize("cls", list(PINNED), ids=lambda cls: cls.__name__)
def test_the_published_codes_and_statuses_hold(cls):
    assert (cls.code, cls.status) == PINNED[cls]


def test_the_spec_catalogue_built_in_bases_are_kept():
    # Code written against guarded-actions "A19. Error catalogue" catches built-in types.
    assert issubclass(actions.errors.TransactionNotFound, KeyError)
    assert issubclass(actions.errors.ApprovalUnavailable, RuntimeError)
    assert issubclass(actions.errors.JournalNotFound, FileNotFoundError)
    assert issubclass(memory.errors.MemoryEngineError, ValueError)
    assert issubclass(ScopeError, ValueError)
    # and a KeyError subclass still prints its message plainly, not its repr
    assert str(actions.errors.TransactionNotFound("no transaction act_1")) == "no transaction act_1"


def test_the_documented_codes_come_from_the_classes():
    # Every non-404 code is documented under its class's status; 404s answer not_found.
    for code, cls in CATALOGUE.items():
        if cls.status == 404:
            assert code not in {c for codes in ERROR_CODES.values() for c in codes}
        else:
            assert code in ERROR_CODES[cls.status], code
    assert set(ERROR_CODES[404]) == {"not_found"}


def test_docs_carry_the_catalogue_as_the_classes_define_it():
    # Given the table between the markers in docs/agents.md
    text = (ROOT / "docs/agents.md").read_text()
    start = text.index("<!-- error-catalogue:start -->\n") + len("<!-- error-catalogue:start -->\n")
    table = text[start : text.index("<!-- error-catalogue:end -->")]
    # Then it is exactly the one the classes produce (paste catalogue_markdown() to refresh)
    assert table == catalogue_markdown()


# -- the one API handler -------------------------------------------------------------


def _answer(error: DomainError) -> tuple[int, dict]:
    request = RequestFactory().post("/api/v1/memory/forget")
    response = _domain_error(request, error)
    return response.status_code, json.loads(response.content)


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        (
            memory.errors.RecordStateError("rec is forgotten", field="record_id"),
            409,
            {"error": "record_state_error", "field": "record_id", "detail": "rec is forgotten"},
        ),
        (
            memory.errors.SelectorError("say what to forget", reason="vague_selector"),
            400,
            {"error": "vague_selector", "field": None, "detail": "say what to forget"},
        ),
        (
            actions.errors.ActionPolicyViolation("outside the root", field="operations"),
            400,
            {"error": "policy_violation", "field": "operations", "detail": "outside the root"},
        ),
        (
            actions.errors.ApprovalUnavailable("no approval key is configured"),
            503,
            {
                "error": "approval_unavailable",
                "field": None,
                "detail": "no approval key is configured",
            },
        ),
        (
            audit.selectors.AuditQueryError("bad cursor", field="after"),
            400,
            {"error": "invalid_audit_query", "field": "after", "detail": "bad cursor"},
        ),
        (
            ScopeError("invalid scope 'a:b': expected three segments"),
            400,
            {
                "error": "invalid_scope",
                "field": "scope",
                "detail": "invalid scope 'a:b': expected three segments",
            },
        ),
        (
            UnstorableText("payload.k", NUL_REASON),
            400,
            {"error": "invalid_field", "field": "payload.k", "detail": NUL_REASON},
        ),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, DomainError) else None,
)
def test_the_api_answers_each_apps_errors_with_the_class_code_and_status(error, status, body):
    assert _answer(error) == (status, body)


@pytest.mark.parametrize(
    "error",
    [
        AccessDenied("acme:bob:proj is not yours"),
        actions.errors.TransactionNotFound("no transaction act_123 at acme:bob:proj"),
    ],
)
def test_not_found_and_access_denied_answer_alike_without_detail(error):
    # The message (which may name another tenant's scope) never reaches the client.
    assert _answer(error) == (
        404,
        {"error": "not_found", "field": None, "detail": "no such resource for this token"},
    )


# -- the one view decorator ------------------------------------------------------------


def _page_request(method: str = "get", referer: str | None = None) -> HttpRequest:
    extra = {"HTTP_REFERER": referer} if referer else {}
    request = getattr(RequestFactory(), method)("/memory/review", **extra)
    request.user = AnonymousUser()
    request.session = SessionStore()
    request._messages = FallbackStorage(request)  # type: ignore[attr-defined]
    return request


def _view_raising(error: Exception):
    @dashboard_view
    def view(request: HttpRequest) -> HttpResponse:
        raise error

    return view


@pytest.mark.parametrize(
    "error",
    [
        AccessDenied("not yours"),
        actions.errors.TransactionNotFound("no such transaction"),
        memory.errors.RecordNotFound("no record mem_1 at acme:alice:proj"),
    ],
)
def test_the_view_decorator_turns_missing_or_out_of_reach_into_a_404(error):
    with pytest.raises(Http404):
        _view_raising(error)(_page_request())


def test_the_view_decorator_sends_a_refused_post_back_with_the_message():
    # Given a POST from one of our pages that a service refuses
    request = _page_request("post", referer="http://testserver/memory/review?scope=a")
    response = _view_raising(memory.errors.RecordStateError("already decided"))(request)
    # Then back to that page, with the refusal as a message
    assert response.status_code == 302
    assert response["Location"] == "http://testserver/memory/review?scope=a"
    assert [str(m) for m in get_messages(request)] == ["Nothing was changed: already decided"]


def test_the_view_decorator_never_redirects_to_another_site():
    request = _page_request("post", referer="https://evil.example/phish")
    response = _view_raising(memory.errors.RecordStateError("already decided"))(request)
    # Then the refusal page with the class's status, not a redirect
    assert response.status_code == 409
    assert b"already decided" in response.content


@pytest.mark.django_db
def test_the_view_decorator_shows_a_refused_get_as_the_refusal_page():
    response = _view_raising(actions.errors.ApprovalUnavailable("configure a key <b>"))(
        _page_request()
    )
    assert response.status_code == 503
    assert b"configure a key &lt;b&gt;" in response.content  # autoescaped
    assert b"Nothing was changed" in response.content


def test_the_view_decorator_keeps_the_invalid_scope_page():
    response = _view_raising(ScopeError("invalid scope 'a': expected three segments"))(
        _page_request()
    )
    assert response.status_code == 404
    assert b"expected three segments" in response.content


class ReasonForm(forms.Form):
    reason = forms.CharField()


def test_form_refusals_put_the_error_on_the_named_field():
    form = ReasonForm({"reason": "x"})
    assert form.is_valid()
    with form_refusals(form) as refused:
        raise memory.errors.RecordStateError("the reason is too short", field="reason")
    assert refused and refused.status == 409
    assert form.errors["reason"] == ["the reason is too short"]


def test_form_refusals_without_a_known_field_is_a_form_error():
    form = ReasonForm({"reason": "x"})
    assert form.is_valid()
    with form_refusals(form) as refused:
        raise actions.errors.ActionStateError("already committed", field="transaction")
    assert refused
    assert form.non_field_errors() == ["already committed"]


def test_form_refusals_let_missing_things_through_and_leave_a_clean_run_alone():
    form = ReasonForm({"reason": "x"})
    assert form.is_valid()
    with pytest.raises(AccessDenied), form_refusals(form):
        raise AccessDenied("not yours")
    with form_refusals(form) as refused:
        pass
    assert not refused and refused.status == 200 and not form.errors


# -- commands ---------------------------------------------------------------------------


def test_commands_turn_a_refusal_into_one_line_and_exit_2():
    with pytest.raises(CommandError) as caught, refusals_exit():
        raise memory.errors.RecordStateError("record mem_1 is\nalready forgotten")
    assert caught.value.returncode == REFUSED == 2
    assert str(caught.value) == "record mem_1 is already forgotten"


def test_commands_let_bugs_through():
    with pytest.raises(ZeroDivisionError), refusals_exit():
        raise ZeroDivisionError
