"""Journey: an auditor creates and downloads a checkpoint, the database is tampered with,
and the dashboard shows verification failing (checkpoint upload and "Verify chain")."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import connection, transaction

from audit.models import AuditEvent
from audit.services import append_event
from tests.e2e.conftest import login, screenshot
from tests.factories import make_operator

SUBJECTS = ("acme:alice:*", "acme:alice:apollo", "acme:bob:*", "acme:*:*")
TYPES = ("episode.ingested", "memory.record_created", "memory.recall", "memory.record_promoted")


def seed_chains(per_subject: int = 6) -> None:
    """Interleaved events in four acme chains, shaped like the engine's (digests, not content)."""
    with transaction.atomic():
        for index in range(per_subject * len(SUBJECTS)):
            append_event(
                subject=SUBJECTS[index % len(SUBJECTS)],
                event_type=TYPES[index % len(TYPES)],
                actor=("agent", "system", "rita")[index % 3],
                payload={"message_sha256": f"{index:064x}", "count": index},
                session_id=f"session-{index % 3}",
                record_id=f"rec_{index:032x}" if index % 2 else None,
            )


def tamper(sql: str, params: list) -> None:
    """Edit audit_log behind the engine's back, as an attacker with database access would."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_checkpoint_then_tamper_then_verification_fails(page, tmp_path: Path, task_worker):
    # Given an auditor of acme and four acme chains
    make_operator("otto", [("acme:*:*", "auditor")])
    seed_chains()
    login(page, "otto")

    # When they create a checkpoint and download it
    page.goto("/audit/checkpoints/")
    page.get_by_role("button", name="Create checkpoint").click()
    assert "Checkpoint created: it pins 4 chains" in page.locator(".messages").inner_text()
    with page.expect_download() as download_info:
        page.locator("tr.highlight").get_by_role("link", name="Download").click()
    downloaded = tmp_path / "kept-elsewhere.jsonl"
    download_info.value.save_as(downloaded)
    screenshot(page, "checkpoints", narrow=True)
    # Then the file is one canonical checkpoint line pinning the four chains
    document = json.loads(downloaded.read_text().strip())
    assert document["format"] == "aetnamem-checkpoint-v1"
    assert sorted(document["subjects"]) == sorted(SUBJECTS)

    # And uploading it back right away shows that every pin holds
    page.get_by_label("Checkpoint file or deletion receipt").set_input_files(str(downloaded))
    page.get_by_role("button", name="Upload and verify").click()
    assert "every pinned chain holds (4)" in page.locator("#results").inner_text()

    # When someone deletes bob's newest event and edits a payload in alice's chain
    bob_head = AuditEvent.objects.filter(subject_id="acme:bob:*").order_by("-sequence").first()
    tamper("DELETE FROM audit_log WHERE sequence = %s", [bob_head.sequence])
    victim = AuditEvent.objects.filter(subject_id="acme:alice:*").order_by("sequence")[2]
    tamper(
        "UPDATE audit_log SET payload = %s WHERE sequence = %s",
        ['{"count":0,"message_sha256":"forged"}', victim.sequence],
    )

    # Then uploading the kept checkpoint names bob's chain as failing containment
    page.get_by_label("Checkpoint file or deletion receipt").set_input_files(str(downloaded))
    page.get_by_role("button", name="Upload and verify").click()
    results = page.locator("#results")
    assert "does not hold" in results.inner_text()
    assert "1 of 4 pinned chains fails the containment rule" in results.inner_text()
    assert f"acme:bob:* pinned at #{bob_head.sequence}" in results.inner_text()
    assert "is missing" in results.inner_text()
    screenshot(page, "checkpoint-verification-failed", narrow=True)

    # And "Verify chain" on acme is queued, run by the task worker, and reports the forged event
    page.goto("/audit/?scope=acme:*:*")
    page.locator(".verify-list li").filter(has_text="acme:*:*").get_by_role(
        "button", name="Verify chain"
    ).click()
    progress = page.locator(".run-progress")
    progress.get_by_text("failed", exact=True).wait_for()
    assert f"first bad sequence #{victim.sequence}" in progress.inner_text()
    # And the explorer shows the red banner naming the first bad sequence and how to investigate
    page.reload()
    banner = page.locator(".banner-danger").first
    assert f"first bad sequence #{victim.sequence}" in banner.inner_text()
    assert "acme:alice:*" in banner.inner_text()
    assert "tools/verify_audit.py" in banner.inner_text()
    screenshot(page, "audit-explorer-broken-chain", narrow=True)

    # And the event page says the forged row's hash does not recompute
    page.locator(f"#event-{victim.sequence} summary").click()
    page.get_by_role("link", name=f"Open event #{victim.sequence}").click()
    assert "does not recompute" in page.locator(".banner-danger").inner_text()
    screenshot(page, "audit-event-forged")
