"""The audit pages: explorer, event, export, verification runs, checkpoints, evidence upload.

Each page and POST has a permission matrix (tests/factories.access_matrix) and a
bound on database queries; behaviour is checked through the rendered pages.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client
from django.urls import reverse

from aetnaweb import access
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent, Checkpoint, VerificationRun
from audit.receipts import build_deletion_receipt
from audit.services import (
    append_event,
    create_checkpoint,
    run_verification,
    start_verification_run,
)
from tests.audit.conftest import append, tamper
from tests.factories import access_matrix, htmx_headers, login_as, make_operator

SCOPE = "acme:alice:*"


def seed(per_subject: int = 3) -> dict[str, list[AuditEvent]]:
    """Events in alice's chain, its ancestors, a sibling and a prefix twin."""
    subjects = ["acme:alice:*", "acme:alice:web", "acme:*:*", "platform:*:*", "acme:bob:*"]
    subjects += ["acmecorp:*:*", "acme:alicex:*"]
    events: dict[str, list[AuditEvent]] = {subject: [] for subject in subjects}
    for index in range(per_subject):
        for subject in subjects:
            events[subject].append(
                append(
                    subject,
                    event_type=("memory.recall", "memory.record_created")[index % 2],
                    actor=("agent", "rita")[index % 2],
                    session_id=f"s-{index}",
                    record_id=f"rec_{subject.replace(':', '_').replace('*', 'x')}_{index}",
                    payload={"query_sha256": f"{index:064x}"},
                )
            )
    return events


def subjects_on_page(response) -> set[str]:
    return {item["event"].subject_id for item in response.context["events"]}


# -- explorer ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_explorer_scope_permissions(client, case, django_assert_max_num_queries):
    # Given events in and around alice's scope
    seed()
    case.sign_in(client)
    # When the explorer is filtered to alice's scope
    with django_assert_max_num_queries(12):
        response = client.get(reverse("audit:explorer"), {"scope": SCOPE})
    # Then only a grant on alice's scope (any role) shows it; everyone else gets a 404
    case.check(response)
    if case.allowed:
        assert subjects_on_page(response) == {"acme:alice:*", "acme:alice:web"}


@pytest.mark.django_db
def test_explorer_lists_only_what_the_grant_reads(client):
    # Given a viewer of acme:alice:*
    seed()
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    # When they open the unfiltered explorer
    response = client.get(reverse("audit:explorer"))
    # Then they see their subtree and its ancestors, never a sibling or a prefix twin
    assert response.status_code == 200
    assert subjects_on_page(response) == {
        "acme:alice:*",
        "acme:alice:web",
        "acme:*:*",
        "platform:*:*",
    }
    body = response.content.decode()
    assert "acme:bob:*" not in body and "acmecorp" not in body and "alicex" not in body


@pytest.mark.django_db
def test_explorer_is_newest_first_and_pages_by_sequence(client, django_assert_max_num_queries):
    # Given 120 events in one chain and an auditor
    for index in range(120):
        append(SCOPE, payload={"n": index})
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    # When the first page is read
    with django_assert_max_num_queries(12):
        first = client.get(reverse("audit:explorer"), {"scope": SCOPE})
    sequences = [item["event"].sequence for item in first.context["events"]]
    # Then it holds the newest 50, newest first, and links to the older page by key
    assert len(sequences) == 50 and sequences == sorted(sequences, reverse=True)
    assert first.context["next_url"].endswith(f"before={sequences[-1]}")
    # When the next page is read through that link
    with django_assert_max_num_queries(12):
        second = client.get(first.context["next_url"])
    older = [item["event"].sequence for item in second.context["events"]]
    # Then it continues strictly below the last key, without overlap, with the same cost
    assert older and max(older) < min(sequences)
    assert len(older) == 50
    third = client.get(second.context["next_url"])
    assert len(third.context["events"]) == 120 - 100 + 1  # + the grant event in acme:alice:*
    assert third.context["next_url"] is None


@pytest.mark.django_db
def test_explorer_filters_by_every_field(client):
    seed(per_subject=4)
    login_as(client, make_operator("otto", [("acme:*:*", "auditor")]))
    url = reverse("audit:explorer")

    def subjects_and_types(**params):
        response = client.get(url, params)
        assert response.status_code == 200, response.content
        return [(i["event"].subject_id, i["event"].event_type) for i in response.context["events"]]

    assert {s for s, _ in subjects_and_types(scope="acme:bob:*")} == {"acme:bob:*"}
    assert {t for _, t in subjects_and_types(event_type="memory.record_created")} == {
        "memory.record_created"
    }
    assert all(
        item["event"].actor == "rita"
        for item in client.get(url, {"actor": "rita"}).context["events"]
    )
    assert {
        i["event"].session_id for i in client.get(url, {"session_id": "s-2"}).context["events"]
    } == {"s-2"}
    only = client.get(url, {"record_id": "rec_acme_bob_x_1"}).context["events"]
    assert [i["event"].record_id for i in only] == ["rec_acme_bob_x_1"]
    # A time range in the future matches nothing; one covering now matches everything visible
    assert client.get(url, {"since": "2999-01-01T00:00"}).context["events"] == []
    everything = client.get(url, {"since": "2000-01-01T00:00", "until": "2999-01-01T00:00"})
    assert len(everything.context["events"]) > 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"scope": "acme:alice"}, "expected exactly three segments"),
        ({"scope": "acme:*:secret"}, "under no user is ambiguous"),
        ({"event_type": "Memory Recall"}, "dotted lower-case words"),
        ({"since": "2026-02-01T00:00", "until": "2026-01-01T00:00"}, "must be before"),
    ],
)
def test_explorer_invalid_filters_are_form_errors(client, params, message):
    # Given a viewer
    seed()
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    # When a filter is invalid
    response = client.get(reverse("audit:explorer"), params)
    # Then the form says why and nothing is listed
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not response.context["form"].is_valid()


@pytest.mark.django_db
def test_explorer_bad_cursor_is_a_400(client):
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    response = client.get(reverse("audit:explorer"), {"before": "abc"})
    assert response.status_code == 400


@pytest.mark.django_db
def test_explorer_htmx_request_gets_only_the_events_fragment(client):
    seed()
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    response = client.get(reverse("audit:explorer"), {"scope": SCOPE}, headers=htmx_headers())
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="events">')
    assert "<html" not in body and "Verify chains" not in body


@pytest.mark.django_db
def test_explorer_row_expands_to_escaped_payload_and_hashes(client):
    # Given an event whose payload holds markup
    event = append(SCOPE, event_type="agent.note", payload={"label": "<script>alert(1)</script>"})
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    # When the explorer renders it
    body = client.get(reverse("audit:explorer"), {"scope": SCOPE}).content.decode()
    # Then the payload is pretty-printed and escaped, and both hashes are shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body
    assert event.event_hash in body
    assert f'id="event-{event.sequence}"' in body and "<details>" in body


@pytest.mark.django_db
def test_explorer_red_banner_names_the_first_bad_sequence(client):
    # Given a chain whose third event was edited, and a finished run that caught it
    events = [append(SCOPE, payload={"n": n}) for n in range(5)]
    tamper("UPDATE audit_log SET actor = 'mallory' WHERE sequence = %s", [events[2].sequence])
    auditor = make_operator("otto", [("acme:*:*", "auditor")])
    with transaction.atomic():
        run = start_verification_run(principal=SYSTEM, subject="acme:*:*", started_by="otto")
    run_verification(run.pk)
    login_as(client, auditor)
    # When the explorer is opened
    body = client.get(reverse("audit:explorer")).content.decode()
    # Then a red banner names the first bad sequence, the chain, and how to investigate
    assert "banner-danger" in body
    assert f"first bad sequence #{events[2].sequence}" in body
    assert "acme:alice:*" in body and "tools/verify_audit.py" in body


@pytest.mark.django_db
def test_red_banner_is_not_shown_for_failures_outside_the_grant(client):
    # Given a failed run over every chain whose only failure is in globex
    events = [append("globex:*:*", payload={"n": n}) for n in range(3)]
    append(SCOPE, payload={"n": 1})
    tamper("UPDATE audit_log SET actor = 'mallory' WHERE sequence = %s", [events[1].sequence])
    with transaction.atomic():
        run = start_verification_run(principal=SYSTEM, started_by="system")
    run_verification(run.pk)
    assert VerificationRun.objects.get(pk=run.pk).status == "failed"
    # When a viewer of acme:alice:* opens the explorer
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    body = client.get(reverse("audit:explorer")).content.decode()
    # Then nothing about globex (or a failure) is shown to them
    assert "globex" not in body and "banner-danger" not in body


# -- event page ----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_event_page_permissions(client, case, django_assert_max_num_queries):
    event = seed()[SCOPE][1]
    case.sign_in(client)
    with django_assert_max_num_queries(10):
        response = client.get(reverse("audit:event", args=[event.event_id]))
    case.check(response)
    if case.allowed:
        assert response.context["hash_ok"] is True
        assert response.context["previous"].sequence < event.sequence


@pytest.mark.django_db
def test_event_page_flags_a_row_that_no_longer_recomputes(client):
    event = append(SCOPE, payload={"n": 1})
    tamper("UPDATE audit_log SET payload = %s WHERE sequence = %s", ['{"n":2}', event.sequence])
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    response = client.get(reverse("audit:event", args=[event.event_id]))
    assert response.context["hash_ok"] is False
    assert "does not recompute" in response.content.decode()


@pytest.mark.django_db
def test_unknown_event_is_a_404(client):
    login_as(client, make_operator("vera", [(SCOPE, "viewer")]))
    assert client.get(reverse("audit:event", args=["aud_" + "0" * 32])).status_code == 404


# -- export --------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_export_permissions(client, case, django_assert_max_num_queries):
    seed()
    case.sign_in(client)
    with django_assert_max_num_queries(12):
        response = client.get(reverse("audit:export"), {"scope": SCOPE})
        body = b"".join(response.streaming_content) if response.status_code == 200 else b""
    case.check(response)
    if case.allowed:
        lines = [json.loads(line) for line in body.decode().splitlines()]
        assert {line["subject_id"] for line in lines} == {"acme:alice:*", "acme:alice:web"}


@pytest.mark.django_db
def test_export_streams_the_filter_as_canonical_rows_of_auditable_chains_only(client):
    # Given an auditor of alice's subtree, who may read (but not audit) its ancestors
    events = seed(per_subject=2)
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    # When they export without a scope filter
    response = client.get(reverse("audit:export"), {"event_type": "memory.recall"})
    # Then the response streams JSON Lines of the rows' columns, alice's chains only
    assert response.streaming
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert "attachment" in response["Content-Disposition"]
    lines = b"".join(response.streaming_content).decode().splitlines()
    rows = [json.loads(line) for line in lines]
    assert {row["subject_id"] for row in rows} == {"acme:alice:*", "acme:alice:web"}
    assert {row["event_type"] for row in rows} == {"memory.recall"}
    stored = events[SCOPE][0]
    match = next(row for row in rows if row["sequence"] == stored.sequence)
    assert match["event_hash"] == stored.event_hash and match["payload"] == stored.payload
    # And each line is canonical JSON (sorted keys, no whitespace), as audit-log-v1 writes it
    assert all(
        line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"))
        for line in lines
    )


@pytest.mark.django_db
def test_export_with_an_invalid_scope_says_why(client):
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    response = client.get(reverse("audit:export"), {"scope": "acme::*"})
    assert response.status_code == 404
    assert "the user segment is empty" in response.content.decode()


# -- verification runs ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_verify_post_permissions_and_refusals_write_nothing(
    client, case, django_assert_max_num_queries
):
    seed()
    case.sign_in(client)
    with django_assert_max_num_queries(12):
        response = client.post(reverse("audit:verify"), {"scope": SCOPE})
    case.check(response, ok=302)
    runs = list(VerificationRun.objects.all())
    if case.allowed:
        assert [run.scope for run in runs] == [SCOPE]
        assert response["Location"] == reverse("audit:run", args=[runs[0].pk])
    else:
        assert runs == []


@pytest.mark.django_db
def test_verify_with_an_invalid_scope_writes_nothing_and_says_why(client):
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    response = client.post(reverse("audit:verify"), {"scope": "acme:alice"}, follow=True)
    assert VerificationRun.objects.count() == 0
    assert "expected exactly three segments" in response.content.decode()


@pytest.mark.django_db
def test_verify_runs_in_the_background_and_the_partial_polls_until_done(
    client, django_capture_on_commit_callbacks
):
    # Given an auditor and a chain
    for n in range(3):
        append(SCOPE, payload={"n": n})
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    # When verify is posted by htmx (the background thread is held back until commit)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("audit:verify"), {"scope": SCOPE}, headers=htmx_headers())
    run = VerificationRun.objects.get()
    # Then the response is the progress fragment, polling every second while it runs
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert 'hx-trigger="every 1s"' in body and "running" in body
    assert len(callbacks) == 1
    # When the run finishes (run here synchronously) and the partial is polled again
    run_verification(run.pk)
    polled = client.get(reverse("audit:run", args=[run.pk]), headers=htmx_headers())
    # Then it shows the verdict and stops polling
    body = polled.content.decode()
    assert "passed" in body and "hx-trigger" not in body


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_run_page_permissions(client, case, django_assert_max_num_queries):
    append(SCOPE)
    with transaction.atomic():
        run = start_verification_run(principal=SYSTEM, subject=SCOPE, started_by="system")
    run_verification(run.pk)
    case.sign_in(client)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("audit:run", args=[run.pk]))
    case.check(response)


# -- checkpoints ---------------------------------------------------------------------------


def alice_checkpoint() -> Checkpoint:
    """A checkpoint pinning only alice's chains, as her auditor would create it."""
    auditor = get_user_model().objects.filter(username="alice-auditor").first()
    auditor = auditor or make_operator("alice-auditor", [(SCOPE, "auditor")])
    document = create_checkpoint(
        actor="alice-auditor", principal=access.operator_principal(auditor)
    )
    return Checkpoint.objects.get(checkpoint_sha256=document["checkpoint_sha256"])


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_checkpoint_download_permissions(client, case, django_assert_max_num_queries):
    seed()
    checkpoint = alice_checkpoint()
    case.sign_in(client)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("audit:checkpoint_download", args=[checkpoint.pk]))
        body = b"".join(response.streaming_content) if response.status_code == 200 else b""
    case.check(response)
    if case.allowed:
        assert body.decode() == checkpoint.document + "\n"
        assert response["Content-Disposition"].startswith("attachment; filename=")


@pytest.mark.django_db
def test_a_checkpoint_pinning_no_chain_is_still_for_auditors_only(client):
    # Given a checkpoint of an empty log (it pins no chain at all)
    document = create_checkpoint(actor="system", principal=SYSTEM)
    checkpoint = Checkpoint.objects.get(checkpoint_sha256=document["checkpoint_sha256"])
    assert json.loads(checkpoint.document)["subjects"] in ({}, [])
    # When a viewer (no auditor grant anywhere) asks for it, then it does not exist for them
    make_operator("just-viewer", [(SCOPE, "viewer")])
    client.force_login(get_user_model().objects.get(username="just-viewer"))
    response = client.get(reverse("audit:checkpoint_download", args=[checkpoint.pk]))
    assert response.status_code == 404
    # And an auditor anywhere may download it
    make_operator("some-auditor", [(SCOPE, "auditor")])
    client.force_login(get_user_model().objects.get(username="some-auditor"))
    response = client.get(reverse("audit:checkpoint_download", args=[checkpoint.pk]))
    assert response.status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_checkpoint_list_permissions(client, case, django_assert_max_num_queries):
    seed()
    checkpoint = alice_checkpoint()
    case.sign_in(client)
    with django_assert_max_num_queries(10):
        response = client.get(reverse("audit:checkpoints"))
    if case.outcome == "anonymous" or case.label in {"no grant", "right grant wrong role"}:
        case.check(response)  # login redirect, or 404 without the auditor role anywhere
        return
    # An auditor elsewhere sees the page but never alice's checkpoint
    assert response.status_code == 200
    listed = [row["checkpoint"].pk for row in response.context["rows"]]
    assert listed == ([checkpoint.pk] if case.allowed else [])


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_checkpoint_create_permissions(client, case, django_assert_max_num_queries):
    # Given chains in and around alice's scope
    seed()
    user = case.sign_in(client)
    # When the case's user asks for a checkpoint
    with django_assert_max_num_queries(25):
        response = client.post(reverse("audit:checkpoint_create"))
    created = list(Checkpoint.objects.all())
    if case.outcome == "anonymous" or case.label in {"no grant", "right grant wrong role"}:
        case.check(response)
        assert created == []  # a refusal writes nothing
        return
    # Then an auditor gets one, pinning only chains they audit: alice's only for alice's auditor
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("audit:checkpoints") + "?created=")
    (checkpoint,) = created
    pinned = set(json.loads(checkpoint.document)["subjects"])
    assert checkpoint.created_by == user.get_username()
    if case.allowed:
        assert pinned == {"acme:alice:*", "acme:alice:web"}
    else:
        assert not pinned & {"acme:alice:*", "acme:alice:web"}


@pytest.mark.django_db
def test_checkpoint_download_all_streams_visible_checkpoints_oldest_first(client):
    seed()
    mine = [alice_checkpoint(), alice_checkpoint()]
    create_checkpoint(principal=SYSTEM, actor="system")  # every chain: not alice's auditor's to see
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    response = client.get(reverse("audit:checkpoint_download_all"))
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines == [cp.document for cp in mine]


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="application/octet-stream")


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="auditor", wrong_role="viewer"))
def test_evidence_upload_permissions(client, case, django_assert_max_num_queries):
    seed()
    checkpoint = alice_checkpoint()
    case.sign_in(client)
    with django_assert_max_num_queries(12):
        response = client.post(
            reverse("audit:evidence_verify"),
            {"evidence": upload("cp.jsonl", checkpoint.document + "\n")},
        )
    if case.outcome == "anonymous" or case.label in {"no grant", "right grant wrong role"}:
        case.check(response)
        return
    if case.allowed:
        assert response.status_code == 200 and response.context["results"]["ok"] is True
    else:
        # An auditor elsewhere is told the file names chains outside their grants
        assert response.status_code == 400
        assert "outside the scopes you may audit" in response.content.decode()


@pytest.mark.django_db
def test_uploaded_checkpoint_shows_each_subject_and_which_rule_failed(client):
    # Given a checkpoint of alice's chains, then her newest event deleted
    seed()
    checkpoint = alice_checkpoint()
    head = AuditEvent.objects.filter(subject_id=SCOPE).order_by("-sequence").first()
    tamper("DELETE FROM audit_log WHERE sequence = %s", [head.sequence])
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    # When the kept checkpoint is uploaded
    response = client.post(
        reverse("audit:evidence_verify"), {"evidence": upload("kept.jsonl", checkpoint.document)}
    )
    # Then alice's chain fails containment (named, with the rule) and the web chain holds
    results = response.context["results"]
    assert results["ok"] is False
    (line,) = results["lines"]
    assert [s["subject_id"] for s in line["failed_subjects"]] == [SCOPE]
    assert "is missing" in line["failed_subjects"][0]["reasons"][0]
    assert [s["subject_id"] for s in line["held_subjects"]] == ["acme:alice:web"]
    body = response.content.decode()
    assert "fails the containment rule" in body
    assert 'aria-current="page">Checkpoints</a>' in body  # the nav still says where you are


@pytest.mark.django_db
def test_uploaded_altered_checkpoint_is_refused_as_a_whole(client):
    seed()
    document = json.loads(alice_checkpoint().document)
    document["subjects"][SCOPE]["event_count"] += 1
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    response = client.post(
        reverse("audit:evidence_verify"),
        {"evidence": upload("altered.jsonl", json.dumps(document))},
    )
    (line,) = response.context["results"]["lines"]
    assert line["altered"] is True and not line["held_subjects"]
    assert "checkpoint_sha256 does not match" in response.content.decode()


def forget_receipt(subject: str = SCOPE) -> dict:
    with transaction.atomic():
        event = append_event(
            subject=subject,
            event_type="memory.forget",
            actor="rita",
            payload={
                "selector_sha256": "a" * 64,
                "purged_record_ids": ["rec_1"],
                "purged_episode_ids": ["epi_1"],
            },
        )
        return build_deletion_receipt(
            event=event,
            selector_sha256="a" * 64,
            purged_record_ids=["rec_1"],
            purged_episode_ids=["epi_1"],
        )


@pytest.mark.django_db
def test_uploaded_receipt_holds_or_names_the_failure(client):
    receipt = forget_receipt()
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    url = reverse("audit:evidence_verify")
    # A pretty-printed receipt is recognised and holds
    good = client.post(url, {"evidence": upload("receipt.json", json.dumps(receipt, indent=2))})
    assert good.context["results"] == {
        "kind": "receipt",
        "filename": "receipt.json",
        "ok": True,
        "failures": [],
        "receipt": receipt,
    }
    # An altered one does not, and the page says which rule failed
    receipt["purged_record_ids"] = ["rec_2"]
    bad = client.post(url, {"evidence": upload("receipt.json", json.dumps(receipt))})
    assert bad.context["results"]["ok"] is False
    assert "receipt_sha256 does not match" in bad.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json at all", "first line is not JSON"),
        ('{"format": "something-else"}', "Unrecognised evidence"),
        ('{"format": "aetnamem-checkpoint-v1"}', "line 1"),
        ("", "The submitted file is empty"),
    ],
)
def test_malformed_uploads_are_form_errors(client, text, message):
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    response = client.post(reverse("audit:evidence_verify"), {"evidence": upload("x.jsonl", text)})
    assert response.status_code == 400
    assert message in response.content.decode()


@pytest.mark.django_db
def test_checkpoint_forms_post_with_a_csrf_token_only(client):
    # Given the CSRF check enforced, as in a real browser session
    csrf_client = Client(enforce_csrf_checks=True)
    login_as(csrf_client, make_operator("otto", [(SCOPE, "auditor")]))
    # When a form is posted without its token, it is refused with the explanatory page
    response = csrf_client.post(reverse("audit:checkpoint_create"))
    assert response.status_code == 403
    assert "Nothing was changed" in response.content.decode()
    assert Checkpoint.objects.count() == 0
    # And every form on the pages carries the token
    page = csrf_client.get(reverse("audit:checkpoints")).content.decode()
    assert page.count('name="csrfmiddlewaretoken"') == page.count('method="post"') == 3


@pytest.mark.django_db
def test_run_page_says_a_queued_run_waits_for_a_task_worker(client):
    # Given a run that no worker has picked up yet
    append(SCOPE, payload={"n": 1})
    auditor = make_operator("otto", [("acme:*:*", "auditor")])
    with transaction.atomic():
        run = start_verification_run(principal=SYSTEM, subject="acme:*:*", started_by="otto")
    login_as(client, auditor)
    # When its page is opened
    body = client.get(reverse("audit:run", args=[run.pk])).content.decode()
    # Then it reads as queued, waiting for a worker, and keeps polling
    assert ">queued<" in body and "Waiting for a task worker" in body and "every 1s" in body
    # And once it has gone stale without a worker, the page says how to start one
    VerificationRun.objects.filter(pk=run.pk).update(
        started_at=run.started_at - timedelta(hours=1),
        heartbeat_at=run.started_at - timedelta(hours=1),
    )
    body = client.get(reverse("audit:run", args=[run.pk])).content.decode()
    assert "No task worker picked it up" in body and "db_worker" in body
    # With a retry button that asks for the same scope again
    assert "Retry: verify acme:*:* again" in body and 'name="scope" value="acme:*:*"' in body
    # And after a worker ran it, the page shows the verdict
    run_verification(run.pk)
    body = client.get(reverse("audit:run", args=[run.pk])).content.decode()
    assert ">passed<" in body and "Waiting for a task worker" not in body
