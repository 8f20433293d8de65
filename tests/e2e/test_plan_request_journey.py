"""Approvers see the request (issue 33 item 6): the plan page quotes the person's message
that authorizes it (text, time, session), "Needs attention" reads in plain words, and the
breadcrumbs lead back to the list the plan was opened from."""

from __future__ import annotations

from actions.demo import REQUESTS
from tests.e2e.conftest import login, screenshot
from tests.e2e.test_overview_journey import demo  # noqa: F401  (fixture)


def test_the_approver_reads_the_authorizing_message_on_the_plan(page, demo):  # noqa: F811
    # Given april, approver of acme, and the demo's release-notes plan awaiting approval
    login(page, "april", demo)
    page.goto("/actions/")
    # When she opens it from the approval queue
    page.locator("td[data-label='Plan'] a", has_text="RELEASE_NOTES").first.click()
    page.wait_for_url("**/actions/act_*/?from=queue")
    # Then the breadcrumb leads back to the queue she came from
    crumbs = page.get_by_role("navigation", name="Breadcrumb")
    assert crumbs.get_by_role("link", name="Awaiting approval").is_visible()
    # And the authorizing evidence quotes the user's message itself, with time and session
    authorized = page.get_by_label("Authorized by")
    quoted = authorized.locator(".authority-message").first
    _, text = REQUESTS["chat:alice:apollo:turn-12"]
    assert quoted.locator("blockquote").inner_text().strip() == text
    caption = quoted.locator("figcaption").inner_text()
    assert "User message" in caption and " UTC" in caption
    assert "session chat:alice:apollo:turn-12" in caption
    screenshot(page, "actions-plan-request", narrow=True)
    # And its session link opens that conversation
    quoted.get_by_role("link", name="chat:alice:apollo:turn-12").click()
    page.wait_for_url("**/memory/sessions/?id=*")
    assert (
        "chat:alice:apollo:turn-12"
        in page.locator("h1").inner_text() + page.locator("main").inner_text()
    )


def test_needs_attention_reads_in_plain_words(page, demo):  # noqa: F811
    # Given the demo's webhook plan that ended uncertain
    login(page, "april", demo)
    page.goto("/actions/attention/")
    main = page.locator("main").inner_text()
    # Then the check names the target as a person would, not a Python dict
    assert "Check whether demo_webhook post to https://" in main
    assert "{'" not in main
    # And the error code is explained in words (the code itself stays, in brackets)
    assert "whether it took effect is unknown" in main
    screenshot(page, "actions-attention", narrow=True)
    # When she opens a plan from here, the breadcrumb leads back to Needs attention
    page.locator("article h3 a, td[data-label='Plan'] a").first.click()
    page.wait_for_url("**?from=attention*")
    crumbs = page.get_by_role("navigation", name="Breadcrumb")
    assert crumbs.get_by_role("link", name="Needs attention").is_visible()
