"""No dead ends and no role-wrong text (issue 33 item 7): each role sees only links that
open, advice it can act on, and verification state that agrees with itself."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import login, screenshot
from tests.e2e.test_overview_journey import demo  # noqa: F401  (fixture)

DEAD_END_PAGES = ["/", "/memory/", "/actions/", "/audit/"]


def _dead_links(page) -> list[str]:
    """Every same-site link on the page that answers 404 (or 403) to this person."""
    hrefs = page.evaluate(
        "() => [...new Set([...document.querySelectorAll('main a[href]')]"
        ".map((a) => a.getAttribute('href'))"
        ".filter((h) => h.startsWith('/') && !h.startsWith('/static/')))]"
    )
    dead = []
    for href in hrefs:
        status = page.request.get(href, max_redirects=0).status
        if status in (403, 404):
            dead.append(f"{href}: {status}")
    return dead


@pytest.mark.parametrize("who", ["vera", "rita", "april", "otto"])
def test_no_link_on_the_main_pages_leads_to_a_404(page, demo, who):  # noqa: F811
    # Given a demo operator holding one role (viewer, reviewer, approver, auditor)
    login(page, who, demo)
    dead = []
    # When they open each main page, then every link on it opens for them
    for path in DEAD_END_PAGES:
        page.goto(path)
        dead += [f"{path} -> {link}" for link in _dead_links(page)]
        # and no page gives them command-line advice
        assert "manage.py" not in page.locator("main").inner_text(), path
    assert not dead, dead


def test_a_viewer_reads_no_text_meant_for_other_roles(page, demo):  # noqa: F811
    # Given vera, a viewer of acme, on the overview before any chain was verified
    login(page, "vera", demo)
    page.goto("/")
    main = page.locator("main")
    # Then the approvals card does not tell her she never approves her own plans
    assert "you never approve your own plans" not in main.inner_text()
    assert "you hold no approver role" in main.inner_text()
    # And the Quarantined card is not a link to a queue she cannot use
    assert main.get_by_role("link", name="Quarantined").count() == 0
    # And "Chains verified" says none yet, and who runs it, instead of staying blank
    evidence = page.locator("dl.evidence-facts")
    assert "none yet" in evidence.inner_text()
    assert "an auditor runs the first verification" in evidence.inner_text()
    screenshot(page, "overview-viewer", narrow=True)
    # And the memory pages show her no Review queue tab
    page.goto("/memory/")
    assert page.get_by_role("navigation", name="Memory").get_by_role("link").all_inner_texts() == [
        "Scopes",
        "Verify a receipt",
    ]


def test_an_approver_is_reminded_they_never_approve_their_own_plans(page, demo):  # noqa: F811
    login(page, "april", demo)
    page.goto("/")
    assert "you never approve your own plans" in page.locator("main").inner_text()


def test_a_finished_run_updates_the_badge_beside_it(page, demo, task_worker):  # noqa: F811
    # Given otto, an auditor, on the audit explorer: acme says "never verified"
    login(page, "otto", demo)
    page.goto("/audit/")
    row = page.locator(".verify-list li").filter(has_text="acme:*:*")
    assert "never verified" in row.inner_text()
    # When he verifies acme's chains and the run card says passed
    row.get_by_role("button", name="Verify chain").click()
    row.locator(".run-progress .badge-passed").wait_for(timeout=30_000)
    # Then the badge beside it says passed too, not "never verified"
    row.locator(".badge-passed", has_text="passed").first.wait_for()
    assert "never verified" not in row.inner_text()
    screenshot(page, "audit-verified-badge", narrow=False, full_page=False)


def test_checkpoint_columns_read_as_words(page, demo):  # noqa: F811
    login(page, "otto", demo)
    page.goto("/audit/checkpoints/")
    page.get_by_role("button", name="Create checkpoint").click()
    page.locator("td[data-label='Digest (SHA-256)']").first.wait_for()
    headers = " ".join(page.locator("th").all_inner_texts()).lower()
    assert "digest (sha-256)" in headers
    assert "checkpoint_sha256" not in headers
