"""Journey: with the demo data, an administrator verifies every chain, takes a checkpoint,
and reads the overview and the audit explorer (the README's screenshots come from here)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.e2e.conftest import login, screenshot


@pytest.fixture
def demo(settings, tmp_path: Path):
    """``manage.py demo`` into a sandbox: its key, login file and action files stay in tmp_path."""
    settings.DATA_DIR = tmp_path
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path / "actions-root")
    settings.AETNAWEB_APPROVAL_KEY = "d" * 40
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    out = StringIO()
    call_command("demo", stdout=out)
    password = next(
        line.split("password:", 1)[1].strip()
        for line in (tmp_path / "demo_login.txt").read_text().splitlines()
        if line.startswith("password:")
    )
    return password


def test_admin_verifies_checkpoints_and_reads_the_overview(page, demo, task_worker):
    # Given the demo data and its admin login
    login(page, "admin", demo)
    # When the admin verifies every chain from the audit explorer
    page.goto("/audit/")
    page.locator(".verify-list li").filter(has_text="platform:*:*").get_by_role(
        "button", name="Verify chain"
    ).click()
    page.locator(".run-progress .badge-passed").wait_for()
    # And takes a checkpoint
    page.goto("/audit/checkpoints/")
    page.get_by_role("button", name="Create checkpoint").click()
    assert "Checkpoint created" in page.locator(".messages").inner_text()
    # Then the overview shows each demo tenant with verified chains, counts and the chart
    page.goto("/")
    rows = page.locator("#tenants tbody tr")
    tenants = [rows.nth(i).locator("th").inner_text().split("\n")[0] for i in range(rows.count())]
    assert {"platform", "acme", "globex"} <= set(tenants)
    acme = rows.filter(has_text="acme").first
    assert "passed" in acme.inner_text()
    # (the first chart: audit events per day; the per-tenant activity charts follow)
    assert page.locator("figure.chart").first.locator("svg[role=img] rect.chart-bar").count() == 30
    assert (
        page.locator(".stat-card").filter(has_text="Quarantined").locator(".value").inner_text()
        != "0"
    )
    screenshot(page, "overview", narrow=True)
    # And the explorer lists alice's chain with a row expanded to its payload and hashes
    page.goto("/audit/?scope=acme:alice:*")
    first = page.locator(".events .event").first
    first.locator("summary").click()
    assert "event_hash" in first.inner_text()
    screenshot(page, "audit-explorer", narrow=True)
