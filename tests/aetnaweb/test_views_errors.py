"""Error pages and the shared dashboard helpers: 404 that does not leak, invalid scopes,
CSRF failures, bad cursors, key pagination and partial rendering."""

from __future__ import annotations

import pytest
from django.core.exceptions import BadRequest
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.urls import reverse

from access.models import ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.dashboard import (
    KeyPage,
    dashboard_view,
    page_key,
    page_size,
    paginate_by_key,
    principal_for,
    query_string,
    render_page,
)
from aetnaweb.scopes import Scope
from audit.models import VerificationRun
from audit.services import append_event, run_verification, start_verification_run
from tests.factories import htmx_headers, login_as, make_operator


def strip_csrf(body: str) -> str:
    """Pages differ only in their per-request CSRF token and CSP nonce; drop them to compare."""
    import re

    body = re.sub(r'nonce="[^"]*"', "", body)
    return re.sub(r'"X-CSRFToken": "[^"]*"', "", re.sub(r'value="[^"]{64}"', "", body))


@pytest.mark.django_db
def test_out_of_reach_and_missing_look_the_same(client, settings):
    # Given a run over globex and an acme viewer
    settings.AETNAWEB_CHECKPOINT_SINK = "/nonexistent/never-written"
    from django.db import transaction

    with transaction.atomic():
        append_event(subject="globex:*:*", event_type="memory.recall", actor="a", payload={})
        run = start_verification_run(principal=SYSTEM, subject="globex:*:*", started_by="system")
    run_verification(run.pk)
    login_as(client, make_operator("vera", [("acme:*:*", "auditor")]))
    # When they ask for globex's run and for a run that does not exist
    hidden = client.get(reverse("audit:run", args=[run.pk]))
    missing = client.get(reverse("audit:run", args=[run.pk + 1000]))
    # Then both are the same 404 page, which names no tenant
    assert hidden.status_code == missing.status_code == 404
    assert strip_csrf(hidden.content.decode()) == strip_csrf(missing.content.decode())
    assert "globex" not in hidden.content.decode()
    assert "Nothing to show here" in hidden.content.decode()
    assert VerificationRun.objects.count() == 1


def _scope_view(request, scope):
    parsed = Scope.parse(scope)
    access.require(principal_for(request), access.READ, parsed)
    return HttpResponse(f"ok {parsed}")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("acme:alice", "expected exactly three segments"),
        ("acme:*:secret", "under no user is ambiguous"),
        ("platform:bob:*", "is reserved for the root scope"),
        ("acme:al ice:*", "may only contain letters, digits"),
    ],
)
def test_an_invalid_scope_in_a_url_is_a_404_that_says_why(rf: RequestFactory, raw, reason):
    # Given a dashboard view taking a scope from its URL
    view = dashboard_view(_scope_view)
    request = rf.get(f"/x/{raw}/")
    request.user = make_operator("vera", [("acme:*:*", "viewer")])
    # When the scope does not parse
    response = view(request, raw)
    # Then the page is a 404 naming the reason (it reveals nothing stored)
    body = response.content.decode()
    assert response.status_code == 404
    assert "That scope is not valid" in body and reason in body


@pytest.mark.django_db
def test_dashboard_view_turns_access_denied_into_the_plain_404(rf: RequestFactory):
    from django.http import Http404

    view = dashboard_view(_scope_view)
    request = rf.get("/x/")
    request.user = make_operator("vera", [("acme:alice:*", "viewer")])
    assert view(request, "acme:alice:web").content == b"ok acme:alice:web"
    with pytest.raises(Http404):
        view(request, "acme:bob:*")


@pytest.mark.django_db
def test_a_form_posted_without_its_csrf_token_gets_the_explanatory_page():
    client = Client(enforce_csrf_checks=True)
    user = make_operator("boss", [("acme:*:*", "admin")])
    login_as(client, user)
    before = ScopeGrant.objects.count()
    response = client.post(reverse("audit:verify"), {"scope": "acme:*:*"})
    body = response.content.decode()
    assert response.status_code == 403
    assert "This form could not be accepted" in body and "Nothing was changed" in body
    assert VerificationRun.objects.count() == 0 and ScopeGrant.objects.count() == before


def test_the_500_page_renders_without_a_request_context():
    body = render_to_string("500.html")
    assert "Something went wrong on our side" in body and "aetnaweb.css" in body


def test_page_key_accepts_positive_integers_and_refuses_the_rest(rf: RequestFactory):
    assert page_key(rf.get("/")) is None
    assert page_key(rf.get("/?before=42")) == 42
    for bad in ("abc", "0", "-3", "1.5"):
        with pytest.raises(BadRequest):
            page_key(rf.get(f"/?before={bad}"))
    assert page_size(rf.get("/?limit=5000")) == 200
    assert page_size(rf.get("/?limit=x")) == 50


def test_key_page_from_rows_and_next_url_keep_other_filters(rf: RequestFactory):
    rows = [{"pk": n} for n in (9, 8, 7, 6)]
    page = KeyPage.from_rows(rows, limit=3, key=lambda row: row["pk"], first_page=True)
    assert [row["pk"] for row in page.items] == [9, 8, 7]
    assert page.has_next and page.next_key == 7
    request = rf.get("/audit/", {"scope": "acme:*:*", "before": "100"})
    assert page.next_url(request) == "/audit/?scope=acme%3A%2A%3A%2A&before=7"
    last = KeyPage.from_rows(rows[:2], limit=3, key=lambda row: row["pk"], first_page=False)
    assert not last.has_next and last.next_url(request) is None
    assert query_string(request, before=None, actor="rita") == "actor=rita&scope=acme%3A%2A%3A%2A"


@pytest.mark.django_db
def test_paginate_by_key_is_one_query_per_page(django_assert_num_queries):
    users = [make_operator(f"user{n}") for n in range(7)]
    from django.contrib.auth import get_user_model

    queryset = get_user_model().objects.all()
    with django_assert_num_queries(1):
        first = paginate_by_key(queryset, before=None, limit=3)
    assert [u.pk for u in first.items] == [u.pk for u in reversed(users)][:3]
    with django_assert_num_queries(1):
        second = paginate_by_key(queryset, before=first.next_key, limit=3)
    assert max(u.pk for u in second.items) < min(u.pk for u in first.items)


@pytest.mark.django_db
def test_render_page_renders_the_partial_only_for_htmx(rf: RequestFactory):
    from django.utils import timezone
    from django_htmx.middleware import HtmxDetails

    user = make_operator("vera", [("acme:*:*", "viewer")])
    now = timezone.now()
    run = VerificationRun(
        pk=1, status="passed", started_by="x", started_at=now, heartbeat_at=now, finished_at=now
    )
    for headers, expect_full in (({}, True), (htmx_headers(), False)):
        request = rf.get("/", headers=headers)
        request.user = user
        request.htmx = HtmxDetails(request)
        response = render_page(
            request, "audit/run.html", {"run": run, "scope_label": "x"}, partial="progress"
        )
        assert ("<html" in response.content.decode()) is expect_full
