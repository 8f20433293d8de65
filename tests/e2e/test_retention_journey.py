"""Journey: an admin sets a retention policy on a subtree, sees what the next run will purge,
runs retention and opens the deletion receipt of what lapsed (issue 32 item 3)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record, Status
from tests.e2e.conftest import login, screenshot, settings_link
from tests.factories import make_operator


def test_set_a_policy_see_the_preview_run_and_read_the_receipt(page, task_worker):
    # Given a platform admin and two facts at alice's project, one 40 days old
    make_operator("root", [("platform:*:*", "admin")])
    old = services.remember(principal=SYSTEM, scope="acme:alice:apollo", text="My role is pilot.")
    new = services.remember(principal=SYSTEM, scope="acme:alice:apollo", text="My team is blue.")
    Record.objects.filter(record_id__in=old.record_ids).update(
        created_at=timezone.now() - timedelta(days=40)
    )
    login(page, "root")

    # When they open Maintenance and keep alice's records 30 days
    settings_link(page, "Maintenance").click()
    page.get_by_label("Scope subtree").fill("acme:alice:*")
    page.get_by_label("Content").select_option("records")
    page.get_by_label("Keep for (days)").fill("30")
    page.get_by_role("button", name="Set policy").click()

    # Then the policy is listed with what the next run purges: the old fact only
    policies = page.locator("#retention-policies")
    policies.wait_for()
    row = policies.locator("tbody tr").first.inner_text()
    assert "acme:alice:*" in row and "30 days" in row and "1 record, 0 stored messages" in row
    assert "never" in row
    page.evaluate("window.scrollTo(0, 0)")  # the redirect lands on the section's anchor
    screenshot(page, "retention-policies", narrow=True)

    # When they run retention
    page.get_by_role("button", name="Run retention now").click()

    # Then the job lists the purge at alice's project, with its receipt
    page.get_by_text("Purged 1 lapsed record").wait_for(timeout=30_000)
    page.get_by_role("link", name="receipt").first.click()
    assert "/memory/receipts/" in page.url
    assert old.record_ids[0] in page.content()
    screenshot(page, "retention-receipt")
    assert Record.objects.get(record_id=old.record_ids[0]).status == Status.TOMBSTONED
    assert Record.objects.get(record_id=new.record_ids[0]).status == Status.ACTIVE

    # And the Maintenance page says when the policy last ran
    page.goto("/maintenance/")
    row = page.locator("#retention-policies tbody tr").first.inner_text()
    assert "never" not in row and "(1 record, 0 messages)" in row
