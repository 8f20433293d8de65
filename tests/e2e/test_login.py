"""Journey: an operator signs in, sees the overview, and signs out."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import login, screenshot
from tests.factories import make_operator


def test_operator_logs_in_and_out(page):
    # Given an auditor on acme
    make_operator("dora", [("acme:*:*", "auditor")])
    # When they open the dashboard, they are sent to the login page
    page.goto("/")
    assert "/login/" in page.url
    screenshot(page, "login", narrow=True)
    # And when they sign in with their password
    login(page, "dora")
    # Then they land on the overview with their name in the top bar
    assert page.locator(".who").inner_text() == "dora"
    assert page.get_by_role("heading", level=1).count() == 1
    # And logging out returns them to the login page
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/login/")


def test_wrong_password_is_refused_with_a_message(page):
    # Given an operator
    make_operator("erin", [("acme:*:*", "viewer")])
    # When they type a wrong password
    login_attempt = page.goto("/login/")
    assert login_attempt is not None and login_attempt.ok
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    # Then the form says so and they stay signed out
    assert page.get_by_role("alert").inner_text().startswith("Your username and password")
    assert "/login/" in page.url


@pytest.mark.parametrize("path", ["/"])
def test_pages_need_a_login(page, path):
    # When an anonymous visitor opens a dashboard page, they are asked to sign in first
    page.goto(path)
    assert "/login/" in page.url


def test_a_mistyped_scope_and_an_unreachable_page_say_what_happened(page):
    # Given a viewer of acme signed in
    make_operator("vera", [("acme:*:*", "viewer")])
    login(page, "vera")
    # When a scope with two segments is typed into an address
    response = page.goto("/memory/scope/acme:alice/")
    # Then the 404 page says the scope is invalid and why
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", level=1).inner_text() == "That scope is not valid"
    assert "expected exactly three segments" in page.get_by_role("alert").inner_text()
    screenshot(page, "error-invalid-scope")
    # And a page outside the grants looks exactly like one that does not exist
    response = page.goto("/audit/runs/999999/")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", level=1).inner_text() == "Nothing to show here"
