"""Dark mode (issue 33 item 10): the dashboard follows the system's colour scheme, with
axe passing in both (the every-page scan in test_accessibility.py runs in both schemes)."""

from __future__ import annotations

from tests.e2e.conftest import login, screenshot
from tests.e2e.test_overview_journey import demo  # noqa: F401  (fixture)

BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"


def _luminance(rgb: str) -> float:
    red, green, blue = (int(part) for part in rgb[rgb.index("(") + 1 : -1].split(",")[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def test_the_dashboard_follows_the_system_colour_scheme(page, demo):  # noqa: F811
    # Given a person whose system asks for dark colours
    page.emulate_media(color_scheme="dark")
    login(page, "admin", demo)
    # Then the overview is drawn dark, with light text
    page.goto("/")
    assert _luminance(page.evaluate(BACKGROUND)) < 0.15
    ink = page.evaluate("() => getComputedStyle(document.querySelector('main h1')).color")
    assert _luminance(ink) > 0.8
    screenshot(page, "overview-dark", narrow=True)
    # And a plan page too (the teardown runs axe on it in dark mode)
    page.goto("/actions/")
    screenshot(page, "actions-queue-dark", narrow=False)
    # When the system switches back to light, the same page is light again
    page.emulate_media(color_scheme="light")
    page.goto("/")
    assert _luminance(page.evaluate(BACKGROUND)) > 0.9


def test_the_api_reference_stays_light_and_readable_in_dark_mode(page, demo):  # noqa: F811
    # Swagger UI is drawn for light colours only, so its page keeps them in dark mode
    page.emulate_media(color_scheme="dark")
    login(page, "vera", demo)
    page.goto("/api/docs/")
    page.locator(".opblock").first.wait_for()
    assert _luminance(page.evaluate(BACKGROUND)) > 0.9
