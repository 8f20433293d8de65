"""A person's request forgotten across a scope and the scopes below, in a real browser
(issue 32 item 5): the preview names a project below and includes it, the reviewer unticks
a row, types the count and a reference, and gets one bundled receipt that the standalone
verifier checks offline."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record, Status
from tests.e2e.conftest import login, screenshot
from tests.factories import make_operator

USER = "acme:alice:*"
PROJECT = "acme:alice:website"


@pytest.fixture(autouse=True)
def _empty_search_index(transactional_db: None) -> Iterator[None]:
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record_fts")


def shot(page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, name, narrow=True)


def test_reviewer_forgets_below_unticks_a_row_types_the_count_and_gets_the_bundle(
    page, tmp_path: Path
):
    # Given ten printer tickets at Alice's scope and two in her website project
    for n in range(10):
        services.remember(
            principal=SYSTEM, scope=USER, text=f"Remember that ticket {n} is about the printer."
        )
    below = [
        services.remember(
            principal=SYSTEM,
            scope=PROJECT,
            text=f"Remember that web ticket {n} is about the printer.",
        ).record_ids[0]
        for n in range(2)
    ]
    kept = below[1]
    make_operator("rita", [(USER, "reviewer")])
    login(page, "rita")

    # When she previews forgetting "printer" at her user scope
    page.goto(f"/memory/scope/{USER}/forget/")
    page.get_by_label("Records with the words").fill("printer")
    page.get_by_role("button", name="Preview what would be forgotten").click()

    # Then the preview names the project below, whose rows a forget here does not touch
    section = page.locator("#forget-below")
    assert PROJECT in section.inner_text() and "2 rows" in section.inner_text()
    assert kept not in page.locator("#main").inner_text()

    # When she includes the scopes below
    page.get_by_role("button", name="Include the scopes below in the preview").click()
    assert kept in page.locator("#main").inner_text()
    assert "12 if you untick none" in page.locator("#main").inner_text()
    # And unticks one of the project's rows, types the count and the request's reference
    page.locator(f"#keep-{kept}").uncheck()
    page.get_by_label("Type the number of rows left ticked").fill("11")
    page.get_by_label("Request reference (optional)").fill("REQ-2041")
    shot(page, "memory-forget-below-preview")
    assert Record.objects.filter(status=Status.TOMBSTONED).count() == 0
    page.locator("#forget-apply-button").click()
    page.wait_for_url("**/memory/receipts/bundle/**")

    # Then the bundle page shows the reference and one receipt per scope
    assert "REQ-2041" in page.locator("#bundle-reference").inner_text()
    receipts = page.locator("#bundle-receipts").inner_text()
    assert USER in receipts and PROJECT in receipts
    shot(page, "memory-forget-bundle")
    # And only the ticked rows are purged: the unticked one stays
    assert Record.objects.filter(status=Status.TOMBSTONED).count() == 11
    assert Record.objects.get(record_id=kept).status == Status.ACTIVE

    # And the downloaded bundle verifies offline with the standalone tool
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download JSON").click()
    saved = tmp_path / download_info.value.suggested_filename
    download_info.value.save_as(saved)
    bundle = json.loads(saved.read_text())
    assert bundle["reference"] == "REQ-2041" and kept not in saved.read_text()
    tool = str(Path(settings.BASE_DIR) / "tools" / "verify_audit.py")
    result = subprocess.run(
        [sys.executable, tool, "--forget-bundle", str(saved), "--no-signature-check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # And a tampered copy is rejected
    bundle["receipts"].pop()
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(bundle))
    result = subprocess.run(
        [sys.executable, tool, "--forget-bundle", str(tampered), "--no-signature-check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1

    # And a receipt of the bundle shows the reference too
    page.locator("#bundle-receipts a").first.click()
    assert "REQ-2041" in page.locator("#receipt-reference").inner_text()
