"""What each guarded-actions page and POST does for a person with the right grant and role.

Who may do it is the permission matrix in ``test_views.py``; here: the happy paths, each
refusal (and that a refusal wrote nothing), htmx fragments, downloads, CSRF and CSP.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from actions import services
from actions.approvals import configured_authority
from actions.models import (
    ActionApproval,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionTransaction,
)
from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from tests.actions.conftest import SCOPE, table_counts, write_op
from tests.actions.test_views import (
    AGENT,
    aborted_write,
    approved_write,
    interrupted_write,
    stage_write,
    state_of,
)
from tests.factories import authorizing_episode_id, htmx_headers, login_as, make_operator


@pytest.fixture
def ada(client):
    """An approver on the whole tenant, signed in."""
    user = make_operator("ada", [("acme:*:*", "approver")])
    login_as(client, user)
    return user


def fail_next_write(monkeypatch) -> None:
    """The filesystem adapter raises mid-write: the outcome becomes unknown (uncertain)."""

    def explode(self, prepared, key):
        raise RuntimeError("disk went away")

    monkeypatch.setattr("actions.adapters.filesystem.FilesystemAdapter.execute", explode)


# -- the approval queue ---------------------------------------------------------------------


@pytest.mark.django_db
def test_queue_lists_waiting_plans_oldest_first_and_marks_own_proposals(
    client, actions_root, approval_key
):
    # Given an admin who staged one plan themselves, and an agent's plan staged after it
    admin = make_operator("root", [("acme:*:*", "admin")])
    own = services.stage(
        scope=SCOPE,
        operations=[write_op("mine.txt", "x")],
        principal=access.operator_principal(admin),
    ).transaction_id
    theirs = stage_write()
    login_as(client, admin)
    # When they open the queue
    response = client.get(reverse("actions:index"))
    body = response.content.decode()
    # Then both are listed, oldest first, and their own is marked (another approver must decide)
    assert response.status_code == 200
    assert body.index(own[:16]) < body.index(theirs[:16])
    assert "you proposed this" in body
    assert "Approval signing" in body and "valid for 15 minutes" in body


@pytest.mark.django_db
def test_queue_without_approver_role_says_how_to_get_it(client, actions_root):
    # Given a viewer (no approver role anywhere)
    login_as(client, make_operator("vic", [("acme:*:*", "viewer")]))
    # When they open the queue, then it explains the role they need
    body = client.get(reverse("actions:index")).content.decode()
    assert "You do not hold the approver role" in body
    assert "grant\n      you the approver role on the People page" in body
    # and a viewer gets no command-line advice they cannot act on (issue 33 item 7)
    assert "manage.py" not in body


@pytest.mark.django_db
def test_pages_say_approval_is_disabled_without_a_key(client, actions_root, settings, ada):
    # Given no approval key configured on the server
    settings.AETNAWEB_APPROVAL_KEY = ""
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    txn_id = stage_write()
    # When the approver opens the queue and the plan
    queue = client.get(reverse("actions:index")).content.decode()
    page = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    # Then both say approval is disabled and how to configure it, and Approve is disabled
    for body in (queue, page):
        assert "Approval is disabled on this server" in body
        assert "AETNAWEB_APPROVAL_KEY" in body
    assert 'disabled aria-describedby="approve-why"' in page
    assert "until an approval key is configured" in page


@pytest.mark.django_db
def test_a_too_short_key_is_reported_not_a_crash(client, actions_root, settings, ada):
    # Given a key shorter than 32 bytes
    settings.AETNAWEB_APPROVAL_KEY = "short"
    txn_id = stage_write()
    # When the plan is opened, then the page explains, and approving is refused cleanly
    page = client.get(reverse("actions:detail", args=[txn_id]))
    assert page.status_code == 200
    assert "at least 32 bytes" in page.content.decode()
    before = table_counts()
    response = client.post(reverse("actions:approve", args=[txn_id]))
    assert response.status_code == 409
    assert table_counts() == before


# -- the plan page ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_plan_page_shows_plan_hash_diff_evidence_and_decision(
    client, actions_root, approval_key, ada
):
    # Given an existing file and an agent's plan to rewrite it, with informing evidence too
    (actions_root / "notes.txt").write_text("old line\n")
    operation = write_op("notes.txt", "new line\n")
    operation["evidence"].append(
        {
            "kind": "webpage",
            "ref_id": "https://example.org/howto",
            "digest": "ab" * 32,
            "relation": "informed_by",
        }
    )
    patch = services.stage(principal=SYSTEM, scope=SCOPE, operations=[operation], actor=AGENT)
    # When the approver opens it
    response = client.get(reverse("actions:detail", args=[patch.transaction_id]))
    body = response.content.decode()
    # Then it shows the exact plan hash, and that the shown plan hashes to it
    assert response.status_code == 200
    assert patch.plan_hash in body
    assert "the plan below hashes to exactly this value" in body
    assert "aetna-world-patch-v1" in body
    # And the diff of the file write, line by line, with line numbers and the changed word
    assert (
        '<tr class="del"><td class="ln">1</td><td class="ln"></td><td class="sign">-</td>'
        '<td class="code"><mark>old</mark> line</td></tr>'
    ) in body
    assert (
        '<tr class="add"><td class="ln"></td><td class="ln">1</td><td class="sign">+</td>'
        '<td class="code"><mark>new</mark> line</td></tr>'
    ) in body
    assert "exactly what the plan hash binds" in body
    # And evidence split into what authorized it and what only informed it
    authorized = body.index("Authorized by</p>")
    informed = body.index("Informed by</p>")
    cited = authorizing_episode_id("msg-1")
    assert authorized < body.index(cited, authorized) < informed
    # And what the authorizing evidence resolved to (a stored user message)
    assert authorized < body.index(f"episode {cited}: a user message", authorized) < informed
    # quoted itself, with its time (issue 33 item 6), above the verdict in plain words
    quote = body.index('<blockquote class="prewrap">msg-1</blockquote>', authorized)
    assert authorized < quote < body.index("This is the stored message the plan cites") < informed
    assert "User message, " in body and " UTC" in body
    assert body.index("https://example.org/howto", authorized) > informed
    # And the decision: approve (with the approval's validity) or deny with a reason
    assert "Approve this exact plan" in body and "valid for <strong>15 minutes</strong>" in body
    assert "Reason for denying" in body


@pytest.mark.django_db
def test_plan_page_content_is_escaped(client, actions_root, approval_key, ada):
    # Given a plan whose file content is markup
    txn_id = stage_write("page.html", "<script>alert(1)</script>\n")
    # When it is shown, then the markup is text, never executed
    body = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


@pytest.mark.django_db
@pytest.mark.parametrize("bad_id", ["nope", "act_" + "0" * 32, "act_" + "Z" * 32])
def test_unknown_or_malformed_ids_are_404(client, actions_root, ada, bad_id):
    for name in ("actions:detail", "actions:verify", "actions:receipt", "actions:purge"):
        assert client.get(reverse(name, args=[bad_id])).status_code == 404
    for name in ("actions:approve", "actions:commit", "actions:recover"):
        assert client.post(reverse(name, args=[bad_id])).status_code == 404


# -- approve ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_approve_signs_on_the_server_in_the_users_name(client, actions_root, approval_key, ada):
    # Given an agent's plan
    txn_id = stage_write()
    # When the approver approves it
    response = client.post(reverse("actions:approve", args=[txn_id]))
    # Then they are sent back to the plan, which is approved by them with a valid signature
    assert response.status_code == 302
    assert response["Location"] == reverse("actions:detail", args=[txn_id])
    approval = ActionApproval.objects.get(transaction_id=txn_id)
    assert approval.approver_principal == "ada"
    authority = configured_authority()
    assert authority.signature_valid(approval.as_approval())
    event = AuditEvent.objects.get(record_id=txn_id, event_type="action.approved")
    assert event.actor == "ada"
    # And the plan page shows who approved it and when the approval expires
    body = client.get(response["Location"]).content.decode()
    assert "Approved. The server signed an approval" in body
    assert "Approved by <strong>ada</strong>" in body
    assert "the approval expires at" in body
    assert "Commit: run this plan now" in body


@pytest.mark.django_db
def test_a_user_cannot_approve_their_own_proposal(client, actions_root, approval_key):
    # Given an admin who staged a plan themselves (admins hold both stage and approve)
    admin = make_operator("root", [("acme:*:*", "admin")])
    txn_id = services.stage(
        scope=SCOPE,
        operations=[write_op("mine.txt", "x")],
        principal=access.operator_principal(admin),
    ).transaction_id
    login_as(client, admin)
    # When they open it, the Approve button is disabled and says why
    page = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    assert 'disabled aria-describedby="approve-why"' in page
    assert "Separation of duties: another approver must approve it" in page
    # And when they post the approval anyway, the service refuses and nothing is written
    before = table_counts()
    response = client.post(reverse("actions:approve", args=[txn_id]))
    assert response.status_code == 409
    assert "another approver must approve it" in response.content.decode()
    assert table_counts() == before
    assert state_of(txn_id) == "awaiting_approval"


@pytest.mark.django_db
def test_approving_twice_is_refused_and_writes_nothing(client, actions_root, approval_key, ada):
    txn_id = stage_write()
    client.post(reverse("actions:approve", args=[txn_id]))
    before = table_counts()
    response = client.post(reverse("actions:approve", args=[txn_id]))
    assert response.status_code == 409
    assert "not awaiting_approval" in response.content.decode()
    assert table_counts() == before
    assert ActionApproval.objects.filter(transaction_id=txn_id).count() == 1


@pytest.mark.django_db
def test_approve_without_a_key_is_refused_with_the_reason(client, actions_root, settings, ada):
    settings.AETNAWEB_APPROVAL_KEY = ""
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    txn_id = stage_write()
    before = table_counts()
    response = client.post(reverse("actions:approve", args=[txn_id]))
    assert response.status_code == 409
    assert "approval is disabled" in response.content.decode()
    assert table_counts() == before


# -- deny and abort -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_deny_needs_a_reason(client, actions_root, approval_key, ada):
    txn_id = stage_write()
    before = table_counts()
    response = client.post(reverse("actions:deny", args=[txn_id]), {"reason": "   "})
    assert response.status_code == 400
    assert "Say why you deny this plan" in response.content.decode()
    assert table_counts() == before
    assert state_of(txn_id) == "awaiting_approval"


@pytest.mark.django_db
def test_deny_with_a_reason_aborts_with_a_receipt(client, actions_root, approval_key, ada):
    txn_id = stage_write()
    response = client.post(
        reverse("actions:deny", args=[txn_id]), {"reason": "writes the <wrong> file"}
    )
    assert response.status_code == 302
    assert state_of(txn_id) == "aborted"
    assert ActionReceipt.objects.filter(transaction_id=txn_id).count() == 1
    # The reason is shown (escaped) on the plan, and the audit chain holds only its digest
    body = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    assert "writes the &lt;wrong&gt; file" in body
    assert "Denied. The plan is aborted" in body
    payload = AuditEvent.objects.get(record_id=txn_id, event_type="action.aborted").payload
    assert "wrong" not in payload and '"reason_category":"denied"' in payload


@pytest.mark.django_db
def test_abort_an_approved_plan(client, actions_root, approval_key, ada):
    txn_id = approved_write()
    response = client.post(reverse("actions:abort", args=[txn_id]), {"reason": "changed my mind"})
    assert response.status_code == 302
    assert state_of(txn_id) == "aborted"
    assert not (actions_root / "notes.txt").exists()


@pytest.mark.django_db
def test_abort_of_a_finished_plan_is_refused(client, actions_root, approval_key, ada):
    txn_id = aborted_write()
    before = table_counts()
    response = client.post(reverse("actions:abort", args=[txn_id]), {"reason": ""})
    assert response.status_code == 409
    assert "cannot abort from aborted" in response.content.decode()
    assert table_counts() == before


# -- commit ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_commit_writes_the_file_and_shows_the_receipt(client, actions_root, approval_key, ada):
    # Given a plan approved by another approver
    txn_id = approved_write("notes.txt", "hello\n")
    # When ada commits it
    response = client.post(reverse("actions:commit", args=[txn_id]))
    # Then the file is written and the plan page shows the outcome and the receipt
    assert response.status_code == 302
    assert (actions_root / "notes.txt").read_text() == "hello\n"
    body = client.get(response["Location"]).content.decode()
    assert "Committed: every operation ran and was verified." in body
    receipt = ActionReceipt.objects.get(transaction_id=txn_id)
    assert receipt.receipt_sha256 in body
    assert "Download receipt JSON" in body and 'hx-get="/actions/' in body
    # And the audit chain records who committed it
    committing = AuditEvent.objects.get(record_id=txn_id, event_type="action.committing")
    assert '"committed_by":"ada"' in committing.payload


@pytest.mark.django_db
def test_commit_after_the_world_changed_aborts_and_says_so(client, actions_root, approval_key, ada):
    txn_id = approved_write("notes.txt", "hello\n")
    (actions_root / "notes.txt").write_text("someone else was here\n")
    response = client.post(reverse("actions:commit", args=[txn_id]), follow=True)
    assert state_of(txn_id) == "aborted"
    assert "the world changed after approval" in response.content.decode()
    assert (actions_root / "notes.txt").read_text() == "someone else was here\n"


@pytest.mark.django_db
def test_commit_with_an_expired_approval_is_refused(client, actions_root, settings, ada):
    # Given an approval that expires a moment after it is recorded
    settings.AETNAWEB_APPROVAL_KEY = "k" * 40
    txn_id = stage_write()
    olga = access.operator_principal(make_operator("olga", [("acme:*:*", "approver")]))
    authority = configured_authority()
    txn = ActionTransaction.objects.get(pk=txn_id)
    issued = datetime.now(UTC) - timedelta(seconds=authority.ttl_seconds) + timedelta(seconds=0.4)
    signed = authority.issue(
        transaction_id=txn_id, plan_hash=txn.plan_hash, approver="olga", now=issued
    )
    services.approve(transaction_id=txn_id, principal=olga, approval=signed)
    time.sleep(0.5)
    # When the page is opened, the expiry is shown as passed
    page = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    assert "the approval expired at" in page
    assert "Commit will be refused" in page
    # And committing is refused, nothing runs, and the plan can still be aborted
    response = client.post(reverse("actions:commit", args=[txn_id]))
    assert response.status_code == 409
    assert "recorded approval is invalid or expired" in response.content.decode()
    assert state_of(txn_id) == "approved"
    assert not (actions_root / "notes.txt").exists()


@pytest.mark.django_db
def test_commit_of_an_unapproved_plan_is_refused(client, actions_root, approval_key, ada):
    txn_id = stage_write()
    before = table_counts()
    response = client.post(reverse("actions:commit", args=[txn_id]))
    assert response.status_code == 409
    assert "not approved" in response.content.decode()
    assert table_counts() == before


@pytest.mark.django_db
def test_an_uncertain_commit_lands_in_the_attention_queue_with_what_to_check(
    client, actions_root, approval_key, ada, monkeypatch
):
    # Given an approved write whose adapter fails mid-write
    txn_id = approved_write("notes.txt", "hello\n")
    fail_next_write(monkeypatch)
    # When it is committed from the dashboard
    response = client.post(reverse("actions:commit", args=[txn_id]), follow=True)
    # Then the outcome is reported as uncertain, with what to check on the plan page
    body = response.content.decode()
    assert state_of(txn_id) == "uncertain"
    assert "Outcome uncertain" in body
    assert "Check whether filesystem write_text on notes.txt happened" in body
    # And the attention queue lists it with the same checks
    queue = client.get(reverse("actions:attention")).content.decode()
    assert txn_id[:20] in queue
    assert "Check whether filesystem write_text on notes.txt happened" in queue
    assert "nothing will retry it" in queue


# -- recover ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_interrupted_run_is_listed_and_can_be_recovered(client, actions_root, approval_key, ada):
    # Given a commit whose process died mid-effect
    txn_id = interrupted_write()
    # Then the attention page lists it under "stopped mid-commit", linking to the plan
    queue = client.get(reverse("actions:attention")).content.decode()
    assert "Review and recover" in queue and txn_id[:16] in queue
    page = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    assert "Recover: fence this run" in page
    # When the approver recovers it
    response = client.post(reverse("actions:recover", args=[txn_id]), follow=True)
    # Then it ends recovery_required with a receipt and says what to check
    assert state_of(txn_id) == "recovery_required"
    assert ActionReceipt.objects.filter(transaction_id=txn_id).exists()
    body = response.content.decode()
    assert "Recovery recorded" in body
    assert "recovery fenced it" in body
    assert ActionOperation.objects.get(transaction_id=txn_id).state == "uncertain"


@pytest.mark.django_db
def test_recovering_a_plan_that_is_not_running_is_refused(client, actions_root, approval_key, ada):
    txn_id = approved_write()
    before = table_counts()
    response = client.post(reverse("actions:recover", args=[txn_id]))
    assert response.status_code == 409
    assert "does not require interrupted-run recovery" in response.content.decode()
    assert table_counts() == before


# -- receipts and verification ------------------------------------------------------------------


@pytest.mark.django_db
def test_receipt_downloads_as_the_stored_json(client, actions_root, approval_key, ada):
    txn_id = approved_write()
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    response = client.get(reverse("actions:receipt", args=[txn_id]))
    stored = ActionReceipt.objects.get(transaction_id=txn_id)
    assert response.status_code == 200
    assert response.content.decode() == stored.receipt_json
    assert response["Content-Disposition"] == f'attachment; filename="{txn_id}-receipt.json"'
    assert json.loads(response.content)["format"] == "aetna-action-receipt-v1"


@pytest.mark.django_db
def test_receipt_of_an_open_plan_is_404(client, actions_root, approval_key, ada):
    txn_id = stage_write()
    assert client.get(reverse("actions:receipt", args=[txn_id])).status_code == 404


@pytest.mark.django_db
def test_verify_returns_the_panel_to_htmx_and_the_page_without_it(
    client, actions_root, approval_key, ada
):
    txn_id = approved_write()
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    url = reverse("actions:verify", args=[txn_id])
    fragment = client.get(url, headers=htmx_headers("verification"))
    assert fragment.status_code == 200
    assert b"<html" not in fragment.content
    assert b'id="verification"' in fragment.content
    assert b"Verified: no failures" in fragment.content
    full = client.get(url)
    assert b"<html" in full.content and b"Verified: no failures" in full.content


@pytest.mark.django_db
def test_verify_shows_each_failure(client, actions_root, approval_key, ada):
    # Given a committed plan whose operation was tampered with in the database (T-9)
    txn_id = approved_write()
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    ActionOperation.objects.filter(transaction_id=txn_id).update(operation="delete_file")
    # When it is verified, then the failures are listed one by one
    fragment = client.get(
        reverse("actions:verify", args=[txn_id]), headers=htmx_headers("verification")
    ).content.decode()
    assert "Verification failed" in fragment
    assert "<li>persisted action plan does not match its plan hash</li>" in fragment
    # And the plan page itself warns that the plan shown does not hash to the plan hash
    page = client.get(reverse("actions:detail", args=[txn_id])).content.decode()
    assert "does not hash to this value" in page


# -- purge ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_purge_needs_the_confirmation(client, actions_root, approval_key, ada):
    txn_id = aborted_write()
    before = table_counts()
    response = client.post(reverse("actions:purge", args=[txn_id]), {})
    assert response.status_code == 400
    assert "Tick the box to confirm the purge" in response.content.decode()
    assert table_counts() == before
    assert not ActionPayload.objects.filter(purged_at__isnull=False).exists()


@pytest.mark.django_db
def test_purge_erases_payloads_and_keeps_the_receipt_verifiable(
    client, actions_root, approval_key, ada
):
    # Given a committed write
    txn_id = approved_write("notes.txt", "secret content\n")
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    # When the approver confirms the purge
    response = client.post(reverse("actions:purge", args=[txn_id]), {"confirm": "on"}, follow=True)
    body = response.content.decode()
    # Then every payload is blanked, the page says so with the audit event, and the diff is gone
    assert not ActionPayload.objects.filter(transaction_id=txn_id, purged_at__isnull=True).exists()
    event = AuditEvent.objects.get(record_id=txn_id, event_type="action.payloads_purged")
    assert event.actor == "ada"
    assert event.event_id in body
    assert "secret content" not in body
    assert "The payload was purged" in body
    # And the receipt still verifies
    assert services.verify(principal=SYSTEM, transaction_id=txn_id).valid


@pytest.mark.django_db
def test_purge_of_an_open_plan_is_refused(client, actions_root, approval_key, ada):
    # Given a plan still awaiting approval
    txn_id = stage_write()
    # Then the confirmation page explains that it cannot be purged yet and offers no form
    page = client.get(reverse("actions:purge", args=[txn_id])).content.decode()
    assert "can only be purged once it has" in page
    assert 'name="confirm"' not in page
    # And a direct POST is refused by the service, erasing nothing
    before = table_counts()
    response = client.post(reverse("actions:purge", args=[txn_id]), {"confirm": "on"})
    assert response.status_code == 409
    assert "payloads can only be purged from a finished transaction" in response.content.decode()
    assert table_counts() == before


# -- history ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_history_filters_by_state_and_scope(client, actions_root, approval_key, ada):
    waiting = stage_write()
    done = aborted_write()
    elsewhere = services.stage(
        principal=SYSTEM, scope="acme:bob:proj", operations=[write_op("b.txt", "b")], actor=AGENT
    ).transaction_id
    url = reverse("actions:history")
    by_state = client.get(url, {"state": "aborted"}).content.decode()
    assert done[:16] in by_state and waiting[:16] not in by_state
    by_scope = client.get(url, {"scope": "acme:bob:*"}).content.decode()
    assert elsewhere[:16] in by_scope and waiting[:16] not in by_scope


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"scope": "acme:*:secret"}, "acme:*:secret"),
        ({"state": "exploded"}, "Select a valid choice"),
        ({"after": "1 OR 1=1"}, "the page cursor must be a transaction ID"),
    ],
)
def test_history_rejects_bad_filters_with_a_message(client, actions_root, ada, params, message):
    response = client.get(reverse("actions:history"), params)
    assert response.status_code == 400
    assert message in response.content.decode()


@pytest.mark.django_db
def test_history_pages_by_key(client, actions_root, approval_key, ada):
    # Given three plans
    ids = [stage_write(f"f{n}.txt", "x") for n in range(3)]
    url = reverse("actions:history")
    # When the history is read one at a time, following the "older" link
    seen = []
    response = client.get(url, {"limit": 1})
    for _ in range(3):
        body = response.content.decode()
        seen.extend(txn for txn in ids if txn[:16] in body)
        marker = 'hx-get="'
        if marker not in body:
            break
        next_url = body.split(marker, 1)[1].split('"', 1)[0].replace("&amp;", "&")
        assert "after=act_" in next_url
        response = client.get(next_url, headers=htmx_headers("results"))
        assert b"<html" not in response.content  # htmx gets only the results fragment
    # Then every plan was seen exactly once, newest first
    assert seen == list(reversed(ids))


# -- CSRF and CSP --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_post_needs_the_csrf_token(actions_root, approval_key):
    txn_id = stage_write()
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    for name in ("approve", "deny", "abort", "commit", "recover", "purge"):
        response = client.post(reverse(f"actions:{name}", args=[txn_id]), {"reason": "x"})
        assert response.status_code == 403, name
    assert state_of(txn_id) == "awaiting_approval"


@pytest.mark.django_db
def test_pages_carry_the_csp_and_no_inline_styles_or_handlers(
    client, actions_root, approval_key, ada
):
    txn_id = approved_write()
    services.commit(principal=SYSTEM, transaction_id=txn_id)
    pages = [
        reverse("actions:index"),
        reverse("actions:attention"),
        reverse("actions:history"),
        reverse("actions:detail", args=[txn_id]),
        reverse("actions:purge", args=[txn_id]),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert "script-src 'self' 'nonce-" in response["Content-Security-Policy"], url
        body = response.content.decode()
        assert ' style="' not in body and " onclick=" not in body, url
        assert 'name="csrfmiddlewaretoken"' in body or url.endswith(("/history/", "/attention/"))
