"""Journey: an auditor asks for an export file, watches its progress, downloads it and checks
its SHA-256; an admin runs retention from the Maintenance page and reads what it removed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from audit.models import AuditEvent
from tests.e2e.conftest import login, screenshot, settings_link
from tests.e2e.test_audit_journey import SUBJECTS, seed_chains
from tests.factories import make_operator


def test_request_an_export_then_watch_progress_then_download(page, tmp_path: Path, task_worker):
    # Given an auditor of acme and four acme chains
    make_operator("otto", [("acme:*:*", "auditor")])
    seed_chains()
    login(page, "otto")

    # When they open Exports from the top bar and ask for acme's subtree
    settings_link(page, "Exports").click()
    page.get_by_label("Scope", exact=True).fill("acme:*:*")
    page.get_by_role("button", name="Start export").click()

    # Then the job's page shows it queued or running, then done with a digest (polled by htmx)
    assert "/jobs/" in page.url
    page.get_by_role("link", name="Download audit-export-").wait_for(timeout=30_000)
    digest = page.locator(".hash").first.inner_text().strip()
    assert len(digest) == 64
    screenshot(page, "export-done", narrow=True)

    # And the download is the file with that digest: every acme row, oldest first
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download audit-export-").click()
    saved = tmp_path / "export.jsonl"
    download_info.value.save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == digest
    rows = [json.loads(line) for line in saved.read_text().splitlines()]
    assert {row["subject_id"] for row in rows} == set(SUBJECTS)  # no other tenant's chain
    # (the 24 seeded events and the access.grant_added event of otto's grant)
    assert len(rows) == AuditEvent.objects.filter(subject_id__startswith="acme:").count() == 25
    assert [row["sequence"] for row in rows] == sorted(row["sequence"] for row in rows)

    # And the Exports page lists it as theirs
    page.goto("/audit/exports/")
    assert "done" in page.locator("table").inner_text()
    screenshot(page, "exports", narrow=True)


def test_an_admin_runs_retention_from_the_maintenance_page(page, task_worker):
    # Given a platform admin
    make_operator("root", [("platform:*:*", "admin")])
    login(page, "root")
    # When they open Maintenance and run retention
    settings_link(page, "Maintenance").click()
    page.get_by_role("button", name="Run retention now").click()
    # Then the job finishes and lists what it removed
    page.get_by_text("Removed, finished").wait_for(timeout=30_000)
    assert "idempotency_keys" in page.locator("table").inner_text()
    # And the Maintenance page shows it as the last run
    page.goto("/maintenance/")
    assert "Last run" in page.locator("#retention-heading + p + h3, h3").first.inner_text()
    screenshot(page, "maintenance", narrow=True)
