"""Journeys through the guarded-actions pages in a real browser (Debian's Chromium, headless).

An agent stages a file write through the service; a different person, the approver,
reads the exact plan and its diff, approves it (the server signs), commits it, and
verifies and downloads the receipt; the file is then checked on disk. The attention
queue and the purge confirmation are exercised too. Screenshots land in docs/screenshots/.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from actions import services
from actions.models import ActionReceipt, ActionTransaction
from aetnaweb import access
from aetnaweb.access import SYSTEM
from tests.e2e.conftest import login, screenshot, sign_in
from tests.factories import (
    authorizing_episode_id,
    authorizing_evidence,
    ensure_authorizing_episode,
    make_operator,
)

SCOPE = "acme:alice:website"
AGENT = "agent:deploy-bot"
KEY = "e2e-approval-key-" + "0123456789abcdef" * 3


@pytest.fixture
def actions_root(tmp_path: Path, settings) -> Path:
    root = tmp_path / "actions-root"
    root.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(root)
    settings.AETNAWEB_APPROVAL_KEY = KEY
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    return root


def said(ref: str) -> dict:
    """Authorizing evidence citing the user's stored message ``ref`` (it must resolve)."""
    ensure_authorizing_episode(ref)
    return authorizing_evidence(ref)


def evidence(kind: str, ref: str, relation: str, **extra: object) -> dict:
    return {
        "kind": kind,
        "ref_id": ref,
        "digest": hashlib.sha256(ref.encode()).hexdigest(),
        "relation": relation,
        **extra,
    }


def stage_config_change(root: Path) -> str:
    """The agent's plan: raise the replica count in deploy.conf (an existing file)."""
    (root / "deploy.conf").write_text("replicas = 2\nlog_level = info\ntimeout = 30\n")
    patch = services.stage(
        principal=SYSTEM,
        scope=SCOPE,
        operations=[
            {
                "key": "raise-replicas",
                "adapter": "filesystem",
                "operation": "write_text",
                "arguments": {
                    "path": "deploy.conf",
                    "content": "replicas = 4\nlog_level = info\ntimeout = 30\n",
                },
                "evidence": [
                    said("chat:alice:1842"),
                    evidence("webpage", "https://status.example.org/load", "informed_by"),
                ],
            }
        ],
        actor=AGENT,
        session_id="sess-42",
        turn_id=7,
    )
    return patch.transaction_id


def test_approve_commit_and_verify_a_file_write(page, actions_root):
    # Given an agent's plan to change deploy.conf, and an approver who did not propose it
    txn_id = stage_config_change(actions_root)
    make_operator("ada", [("acme:*:*", "approver")])
    # When the approver signs in and opens the actions queue
    login(page, "ada")
    page.get_by_role("link", name="Actions", exact=True).click()
    page.wait_for_url("**/actions/")
    assert page.get_by_role("heading", name="Plans awaiting approval").is_visible()
    screenshot(page, "actions-queue", narrow=True)
    # Then the plan is listed; opening it shows the exact plan hash, the diff and the evidence
    # the queue links each plan by its one-line summary; its ID is shown beneath
    page.locator("tr", has_text=txn_id[:16]).get_by_role("link").first.click()
    plan_hash = ActionTransaction.objects.get(pk=txn_id).plan_hash
    assert page.get_by_text(plan_hash, exact=True).is_visible()
    # the diff numbers its lines and marks the changed word
    diff = page.locator("div.diff")
    assert diff.locator("tr.del").filter(has_text="replicas = 2").is_visible()
    assert diff.locator("tr.add").filter(has_text="replicas = 4").is_visible()
    assert diff.locator("tr.add mark").first.inner_text() == "4"
    authorized = page.get_by_label("Authorized by")
    assert authorized.get_by_text(authorizing_episode_id("chat:alice:1842")).first.is_visible()
    assert authorized.get_by_text("This is the stored message the plan cites").is_visible()
    # and the approver reads the person's message itself, with its time (issue 33 item 6)
    quoted = authorized.locator(".authority-message")
    assert quoted.locator("blockquote").inner_text().strip()
    assert "User message" in quoted.locator("figcaption").inner_text()
    assert " UTC" in quoted.locator("figcaption").inner_text()
    assert (
        page.get_by_label("Informed by").get_by_text("https://status.example.org/load").is_visible()
    )
    screenshot(page, "actions-plan", narrow=True)
    # When they approve it, the server signs in their name and shows the expiry
    page.get_by_role("button", name="Approve this exact plan").click()
    page.get_by_text("Approved by ada").wait_for()
    assert page.get_by_text("the approval expires at").is_visible()
    screenshot(page, "actions-approved")
    # And when they commit it, the file changes on disk and the receipt is shown
    page.get_by_role("button", name="Commit: run this plan now").click()
    page.get_by_text("Committed: every operation ran and was verified.").wait_for()
    assert (actions_root / "deploy.conf").read_text() == (
        "replicas = 4\nlog_level = info\ntimeout = 30\n"
    )
    # And verifying the receipt (htmx, in place) reports no failures
    page.get_by_role("link", name="Verify", exact=True).click()
    page.locator("#verification").get_by_text("Verified: no failures").wait_for()
    # Back to the top, so the sticky header and decision panel sit in place in a full-page shot.
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "actions-receipt", narrow=True)
    # And the downloaded receipt is byte for byte the stored one
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download receipt JSON").click()
    downloaded = Path(download_info.value.path()).read_text()
    assert downloaded == ActionReceipt.objects.get(transaction_id=txn_id).receipt_json
    assert json.loads(downloaded)["terminal_state"] == "committed"


def test_the_proposer_cannot_approve_and_a_reviewer_denies(page, actions_root):
    # Given an admin who staged a plan themselves
    root_user = make_operator("rita", [("acme:*:*", "admin")])
    txn_id = services.stage(
        scope=SCOPE,
        operations=[
            {
                "key": "w",
                "adapter": "filesystem",
                "operation": "write_text",
                "arguments": {"path": "banner.txt", "content": "Hello\n"},
                "evidence": [said("OPS-7")],
            }
        ],
        principal=access.operator_principal(root_user),
    ).transaction_id
    # When they open their own plan, the Approve button is disabled and says why
    sign_in(page, root_user)
    page.goto(f"/actions/{txn_id}/")
    approve = page.get_by_role("button", name="Approve this exact plan")
    assert approve.is_disabled()
    assert page.get_by_text("Separation of duties: another approver must approve it").is_visible()
    # And when they deny it without a reason, the form asks for one (the browser or the server)
    page.get_by_label("Reason for denying").fill("Wrong banner text; ask the agent again.")
    page.get_by_role("button", name="Deny").click()
    page.get_by_text("Denied. The plan is aborted").wait_for()
    assert ActionTransaction.objects.get(pk=txn_id).state == "aborted"
    assert not (actions_root / "banner.txt").exists()


def test_attention_queue_and_purge_confirmation(page, actions_root, monkeypatch):
    # Given a committed plan and one whose write failed mid-way (outcome unknown)
    done = stage_config_change(actions_root)
    failed = services.stage(
        principal=SYSTEM,
        scope="acme:alice:docs",
        operations=[
            {
                "key": "readme",
                "adapter": "filesystem",
                "operation": "write_text",
                "arguments": {"path": "README.txt", "content": "docs\n"},
                "evidence": [said("chat:alice:9")],
            }
        ],
        actor=AGENT,
    ).transaction_id
    olga = make_operator("olga", [("acme:*:*", "approver")])
    ada = make_operator("ada", [("acme:*:*", "approver")])
    for txn_id in (done, failed):
        services.approve(transaction_id=txn_id, principal=access.operator_principal(olga))
    services.commit(principal=SYSTEM, transaction_id=done)

    def disk_went_away(self, prepared, key):
        raise OSError("I/O error while writing")

    monkeypatch.setattr("actions.adapters.filesystem.FilesystemAdapter.execute", disk_went_away)
    services.commit(principal=SYSTEM, transaction_id=failed)
    monkeypatch.undo()
    # When the approver opens the attention queue, it says what to check
    sign_in(page, ada)
    page.goto("/actions/attention/")
    assert page.get_by_text(
        "Check whether filesystem write_text on README.txt happened"
    ).is_visible()
    screenshot(page, "actions-attention", narrow=True)
    # And the history lists both, newest first, with their outcomes
    page.get_by_role("link", name="History", exact=True).click()
    rows = page.locator("#results tbody tr")
    assert rows.count() == 2
    assert "uncertain" in rows.nth(0).inner_text() and "committed" in rows.nth(1).inner_text()
    screenshot(page, "actions-history", narrow=True)
    # And the purge of the committed plan asks for confirmation and says what it erases
    page.goto(f"/actions/{done}/purge/")
    assert page.get_by_text("full content of every file it wrote").is_visible()
    screenshot(page, "actions-purge", narrow=True)
    page.get_by_role("button", name="Purge payloads").click()
    # Without the tick nothing happens (the browser requires it); with it, the payloads go
    assert "/purge/" in page.url
    page.get_by_role("checkbox").check()
    page.get_by_role("button", name="Purge payloads").click()
    page.get_by_text("The payload was purged").wait_for()
    assert page.get_by_text("Purged 2 payload(s)").is_visible()
