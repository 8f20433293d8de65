"""Real-browser tests: Playwright driving Debian's Chromium against a live Django server.

Fixtures and helpers every e2e test uses (import the helpers from here:
``from tests.e2e.conftest import login, screenshot, sign_in``):

- ``page``: a fresh browser context and tab for one test, ``base_url`` set to
  the live server (``page.goto("/audit/")`` works), 1280x900 viewport. The
  database is ``transactional_db`` (the server runs in another thread, so
  test data must be committed). At teardown the test fails if the page logged
  a Content Security Policy violation or an uncaught JavaScript error, so
  every journey also proves the page is CSP-clean.
- ``login(page, user_or_username, password=PASSWORD)``: signs in through the
  real login form (the "log in" journey).
- ``sign_in(page, user)``: the fast way, a session cookie without the form.
- ``settings_link(page, name)``: a link in the top bar's Settings menu, the menu opened.
- ``task_worker``: a real ``manage.py db_worker`` on the test database, for
  journeys that start long work (a verification run).
- ``screenshot(page, name, narrow=True)``: saves ``docs/screenshots/<name>.png``
  (full page at the current width) and, with ``narrow``, ``<name>-narrow.png``
  at 390 px wide. Each width is scanned with axe-core first.
- ``check_accessibility(page)``: runs axe-core on the page as it is and fails on
  any *serious* or *critical* violation. It runs on every screenshot and on the
  page each test ends on (at teardown), so every page of the suite is scanned.
  For dark mode, call ``page.emulate_media(color_scheme="dark")`` first (Playwright's
  ``color_scheme``); test_accessibility.py scans every main page in both schemes.
  axe-core is vendored at ``tests/e2e/assets/axe.min.js`` (npm ``axe-core``
  4.14.1, MPL-2.0, licence beside it); it is injected through the DevTools
  protocol, which the page's CSP does not govern, and never served by the app.

Chromium is Debian's ``/usr/bin/chromium`` (override with ``AETNAWEB_CHROMIUM``).
When it is missing the tests are skipped with the reason, unless
``AETNAWEB_REQUIRE_BROWSER=1`` (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import PASSWORD
from tests.mcp.conftest import REPO, subprocess_env

CHROMIUM = Path(os.environ.get("AETNAWEB_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"
AXE_SOURCE = Path(__file__).parent / "assets" / "axe.min.js"
AXE_FAILING_IMPACTS = ("serious", "critical")
# Selectors axe should skip. Empty: Swagger UI on /api/docs/ is scanned too (its deep
# links are off and its colours overridden in aetnaweb.css so that it passes).
AXE_THIRD_PARTY: list[str] = []
AXE_RUN = """async ([impacts, thirdParty]) => {
  const context = {exclude: thirdParty.map((selector) => [selector])};
  const result = await axe.run(context, {resultTypes: ["violations"]});
  return result.violations
    .filter((v) => impacts.includes(v.impact))
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ` +
      v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", "));
}"""
WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One headless Chromium for the e2e package, closed before the next package runs.

    Package scope (not session) because Playwright's sync API keeps an event
    loop running in this thread while it is alive; other packages' tests
    (asyncio-based MCP tests, Django's async-safety checks) must not run under it.
    """
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: install Debian's chromium to run the browser tests"
        if os.environ.get("AETNAWEB_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (AETNAWEB_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright's running loop makes Django think test code is async and refuse
    # ORM calls from it; the test thread is in fact synchronous.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def checkpoint_sink(settings: Any, tmp_path: Path) -> Path:
    """Checkpoints created in a journey go to a temporary file, never the development one."""
    sink = tmp_path / "checkpoints.jsonl"
    settings.AETNAWEB_CHECKPOINT_SINK = str(sink)
    return sink


@pytest.fixture
def page(browser: Any, live_server: Any, transactional_db: None) -> Iterator[Any]:
    """A new tab on the live server; fails the test on CSP violations or JS errors."""
    context = browser.new_context(base_url=live_server.url, viewport=WIDE, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    problems: list[str] = []
    tab.on(
        "console",
        lambda message: (
            problems.append(message.text)
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    tab.on("pageerror", lambda error: problems.append(f"uncaught JavaScript error: {error}"))
    violations: list[str] = []
    try:
        yield tab
        if tab.url.startswith("http") and not tab.is_closed():
            violations = accessibility_violations(tab)
    finally:
        context.close()
    assert not problems, "the page reported: " + " | ".join(problems)
    assert not violations, "axe-core (serious or critical): " + " | ".join(violations)


def accessibility_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE_SOURCE.read_text(encoding="utf-8"))
    found: list[str] = page.evaluate(AXE_RUN, [list(AXE_FAILING_IMPACTS), AXE_THIRD_PARTY])
    return [f"{page.url}: {item}" for item in found]


def check_accessibility(page: Any) -> None:
    """Fail the test on any serious or critical axe-core violation on this page."""
    violations = accessibility_violations(page)
    assert not violations, "axe-core (serious or critical): " + " | ".join(violations)


def login(page: Any, user: Any, password: str = PASSWORD) -> None:
    """Sign in through the login form and wait until the dashboard has loaded."""
    username = user if isinstance(user, str) else user.get_username()
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login/" not in url)


def sign_in(page: Any, user: Any) -> None:
    """Give the page a signed-in session for ``user`` without typing into the login form."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    # Playwright does not expose the context's base_url; the login page's URL gives the origin.
    page.goto("/login/")
    origin = page.url.split("/login/")[0]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": origin}])


def settings_link(page: Any, name: str) -> Any:
    """The link ``name`` in the top bar's Settings menu, opening the menu first if it is closed.

    People, API tokens, Webhooks, Exports, Maintenance, API reference and the Django
    admin live in that menu (a ``<details>``), so a journey clicks through it as a person does.
    """
    menu = page.get_by_role("navigation", name="Main").locator("details.navmenu")
    if not menu.evaluate("el => el.open"):
        menu.locator("summary").click()
    return menu.get_by_role("link", name=name, exact=True)


def screenshot(page: Any, name: str, *, narrow: bool = False, full_page: bool = True) -> Path:
    """Save ``docs/screenshots/<name>.png`` (and ``<name>-narrow.png`` at 390 px with ``narrow``)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    check_accessibility(page)
    page.screenshot(path=str(path), full_page=full_page)
    if narrow:
        size = page.viewport_size or WIDE
        page.set_viewport_size(NARROW)
        check_accessibility(page)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-narrow.png"), full_page=full_page)
        page.set_viewport_size(size)
    return path


@pytest.fixture
def task_worker(transactional_db: None, _export_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """A real `manage.py db_worker` on the test database, as `make serve` runs one.

    It writes export files where the live server (this process) reads them.
    """
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-startup-delay", "--interval", "0.2"],
        cwd=REPO,
        env=subprocess_env() | {"AETNAWEB_EXPORT_DIR": str(_export_dir)},
        # Its log is not read; a pipe nobody drains would stall it.
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
