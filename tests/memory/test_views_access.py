"""Memory pages: the permission matrix of every page and POST, and a bound on queries.

Each case signs in a fresh operator (anonymous, no grant, a sibling grant,
prefix twins, the right grant with the wrong role, the right grant and role)
and checks the answer: the login redirect, a 404 that reveals nothing, or
success. For POSTs, a refused case must also have written nothing.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory import services
from memory.models import DeletionReceipt, Record, RetrievalEvent, Status
from tests.factories import access_matrix, htmx_headers, login_as, make_operator

SCOPE = "acme:alice:proj"
# One Merkle batch integration (audit.tree.integrate_pending, every 64th append): 5 to 7
# queries measured, with room for a bigger batch's extra insert chunk.
MERKLE_BATCH_QUERIES = 10


@pytest.fixture
def memory(db):
    """A trusted fact and a quarantined webpage fact at SCOPE, and one fact at its tenant."""
    trusted = services.remember(
        principal=SYSTEM, scope=SCOPE, text="My editor is helix.", session_id="s1", turn_id="t1"
    )
    quarantined = services.remember(
        principal=SYSTEM,
        scope=SCOPE,
        text="Read this page: <webpage>My shell is fish.</webpage>",
        session_id="s1",
        turn_id="t2",
    )
    services.remember(
        principal=SYSTEM,
        scope="acme:*:*",
        text="Remember that the office wifi is called acme-guest.",
    )
    return {
        "trusted": trusted.records[0].record_id,
        "quarantined": quarantined.records[0].record_id,
    }


def audit_count() -> int:
    return AuditEvent.objects.count()


def status_of(record_id: str) -> str:
    return Record.objects.get(record_id=record_id).status


# -- pages (GET) ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_scope_page_permissions(client, memory, case):
    # Given an operator from the matrix
    case.sign_in(client)
    # When they open the scope page
    response = client.get(reverse("memory:scope", args=[SCOPE]))
    # Then only the right grant sees it, and its records
    case.check(response)
    if case.allowed:
        assert "User&#x27;s editor is helix." in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_scope_records_partial_permissions(client, memory, case):
    case.sign_in(client)
    response = client.get(
        reverse("memory:scope", args=[SCOPE]) + "?status=quarantined",
        headers=htmx_headers("records"),
    )
    case.check(response)


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_chain_status_permissions(client, memory, case):
    case.sign_in(client)
    response = client.get(reverse("memory:chain", args=[SCOPE]))
    case.check(response)


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_record_page_permissions(client, memory, case):
    case.sign_in(client)
    response = client.get(reverse("memory:record", args=[memory["trusted"]]))
    case.check(response)


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_forget_page_permissions(client, memory, case):
    case.sign_in(client)
    response = client.get(reverse("memory:forget", args=[SCOPE]))
    case.check(response)


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_review_queue_for_a_scope_permissions(client, memory, case):
    case.sign_in(client)
    response = client.get(reverse("memory:review") + f"?scope={SCOPE}")
    case.check(response)
    if case.allowed:
        assert "User&#x27;s shell is fish." in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_review_queue_lists_only_reviewable_records(client, memory, case):
    # Given an operator from the matrix, When they open the whole queue
    case.sign_in(client)
    response = client.get(reverse("memory:review"))
    if case.grants is None:
        case.check(response)
        return
    # Then every signed-in operator gets the page, but only the right role sees the fact
    assert response.status_code == 200
    assert ("User&#x27;s shell is fish." in response.content.decode()) == case.allowed


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_scope_browser_shows_only_reachable_scopes(client, memory, case):
    case.sign_in(client)
    response = client.get(reverse("memory:scopes"))
    if case.grants is None:
        case.check(response)
        return
    assert response.status_code == 200
    assert (f'href="/memory/scope/{SCOPE}/"' in response.content.decode()) == case.allowed


@pytest.fixture
def receipt_id(memory):
    """A forget at SCOPE (as the trusted in-process caller) and its receipt's event ID."""
    receipt = services.forget(principal=SYSTEM, scope=SCOPE, selector="helix")
    return receipt["audit_event_id"]


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_receipt_page_permissions(client, receipt_id, case):
    case.sign_in(client)
    response = client.get(reverse("memory:receipt", args=[receipt_id]))
    case.check(response)


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_receipt_download_permissions(client, receipt_id, case):
    case.sign_in(client)
    response = client.get(reverse("memory:receipt_json", args=[receipt_id]))
    case.check(response)
    if case.allowed:
        assert json.loads(response.content)["audit_event_id"] == receipt_id


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_receipt_verify_checks_only_reachable_receipts(client, receipt_id, case):
    # Given a genuine receipt of SCOPE
    document = DeletionReceipt.objects.get(audit_event_id=receipt_id).receipt
    case.sign_in(client)
    # When an operator pastes it into the verify form
    response = client.post(reverse("memory:receipt_verify"), {"receipt_text": json.dumps(document)})
    if case.grants is None:
        case.check(response)
        return
    # Then only an operator who may read the scope has it checked against the chain
    body = response.content.decode()
    if case.allowed:
        assert response.status_code == 200
        assert "The receipt verifies." in body
    else:
        assert response.status_code == 422
        assert "not one your grants reach" in body


# -- POSTs -------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_recall_tester_permissions(client, memory, case):
    # Given an operator from the matrix
    case.sign_in(client)
    before = (RetrievalEvent.objects.count(), audit_count())
    # When they run the recall tester
    response = client.post(
        reverse("memory:recall", args=[SCOPE]), {"query": "editor", "limit": 5, "min_score": 0}
    )
    # Then only the right grant runs a recall; a refusal logs nothing
    case.check(response)
    if not case.allowed:
        assert (RetrievalEvent.objects.count(), audit_count()) == before


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_promote_permissions(client, memory, case):
    case.sign_in(client)
    before = audit_count()
    response = client.post(
        reverse("memory:decide"),
        {
            "scope": SCOPE,
            "record_id": memory["quarantined"],
            "decision": "promote",
            "reason": "checked with the user",
        },
    )
    case.check(response, ok=302)
    if case.allowed:
        assert status_of(memory["quarantined"]) == Status.ACTIVE
    else:
        assert status_of(memory["quarantined"]) == Status.QUARANTINED
        assert audit_count() == before


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_reject_permissions(client, memory, case):
    case.sign_in(client)
    before = audit_count()
    response = client.post(
        reverse("memory:decide"),
        {
            "scope": SCOPE,
            "record_id": memory["quarantined"],
            "decision": "reject",
            "reason": "injected by the page",
        },
    )
    case.check(response, ok=302)
    if case.allowed:
        assert status_of(memory["quarantined"]) == Status.TOMBSTONED
    else:
        assert status_of(memory["quarantined"]) == Status.QUARANTINED
        assert audit_count() == before


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_bulk_decision_permissions(client, memory, case):
    case.sign_in(client)
    before = audit_count()
    response = client.post(
        reverse("memory:bulk"),
        {
            "items": [f"{SCOPE}|{memory['quarantined']}"],
            "decision": "promote",
            "reason": "all checked",
            "confirmed": "on",
        },
    )
    case.check(response)
    expected = Status.ACTIVE if case.allowed else Status.QUARANTINED
    assert status_of(memory["quarantined"]) == expected
    if not case.allowed:
        assert audit_count() == before


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_forget_preview_permissions(client, memory, case):
    case.sign_in(client)
    before = audit_count()
    response = client.post(
        reverse("memory:forget", args=[SCOPE]), {"step": "preview", "selector": "helix"}
    )
    case.check(response)
    # A preview writes nothing, allowed or not
    assert audit_count() == before
    assert status_of(memory["trusted"]) == Status.ACTIVE


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="reviewer", wrong_role="viewer"))
def test_forget_apply_permissions(client, memory, case):
    case.sign_in(client)
    before = audit_count()
    response = client.post(
        reverse("memory:forget", args=[SCOPE]),
        {"step": "apply", "selector": "helix", "expected_record_ids": [memory["trusted"]]},
    )
    case.check(response, ok=302)
    if case.allowed:
        assert status_of(memory["trusted"]) == Status.TOMBSTONED
    else:
        assert status_of(memory["trusted"]) == Status.ACTIVE
        assert audit_count() == before


# -- query bounds --------------------------------------------------------------------


@pytest.fixture
def busy_memory(memory):
    """Enough rows that a per-row query would show: 20 facts, 8 quarantined, recalls."""
    for index in range(20):
        services.remember_fact(
            principal=SYSTEM, scope=SCOPE, key=f"slot {index}", value=f"value {index}"
        )
    for index in range(8):
        services.remember(
            principal=SYSTEM,
            scope=SCOPE,
            text=f"<webpage>My colour number {index} is teal{index}.</webpage>",
        )
    for _ in range(3):
        services.recall(principal=SYSTEM, scope=SCOPE, query="editor helix")
    return memory


@pytest.fixture
def reviewer_client(client, busy_memory):
    login_as(client, make_operator("rita", [("acme:*:*", "reviewer")]))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url_name", "args", "query", "bound"),
    [
        ("memory:scopes", [], "", 6),
        ("memory:scope", [SCOPE], "", 9),
        ("memory:scope", [SCOPE], "?status=active&q=value", 9),
        # the chain check replays the scope's state events and reads its records
        # and episodes in chunks, each with its creation or ingest payloads
        # (issue 29 item 7): a constant per chunk of 5,000, not per record
        ("memory:chain", [SCOPE], "", 11),
        # the queue's total (one bounded count) and the active values promotions would replace
        ("memory:review", [], "", 8),
        ("memory:review", [], "?source_type=webpage&age=1&after=1", 9),
        ("memory:forget", [SCOPE], "", 5),
        ("memory:receipt_verify", [], "", 5),
    ],
)
def test_pages_have_a_bounded_number_of_queries(
    reviewer_client, django_assert_max_num_queries, url_name, args, query, bound
):
    with django_assert_max_num_queries(bound):
        response = reviewer_client.get(reverse(url_name, args=args) + query)
    assert response.status_code == 200


@pytest.mark.django_db
def test_record_page_has_a_bounded_number_of_queries(
    reviewer_client, busy_memory, django_assert_max_num_queries
):
    # + the record's purge markers and its episode's ingest event (issue 29 item 7)
    with django_assert_max_num_queries(10):
        response = reviewer_client.get(reverse("memory:record", args=[busy_memory["trusted"]]))
    assert response.status_code == 200


@pytest.mark.django_db
def test_receipt_page_has_a_bounded_number_of_queries(
    reviewer_client, django_assert_max_num_queries
):
    preview = services.forget_preview(principal=SYSTEM, scope=SCOPE, selector="value")
    receipt = services.forget(
        principal=SYSTEM,
        scope=SCOPE,
        selector="value",
        expected_record_ids=list(preview.record_ids),
        confirm_count=preview.count,
    )
    # (+2: the receipt's Merkle log proof is checked against the stored log's root)
    with django_assert_max_num_queries(9):
        response = reviewer_client.get(reverse("memory:receipt", args=[receipt["audit_event_id"]]))
    assert response.status_code == 200


@pytest.mark.django_db
def test_posts_have_a_bounded_number_of_queries(
    reviewer_client, busy_memory, django_assert_max_num_queries
):
    quarantined = list(
        Record.objects.filter(scope=SCOPE, status=Status.QUARANTINED).values_list(
            "record_id", flat=True
        )
    )
    with django_assert_max_num_queries(28):
        response = reviewer_client.post(
            reverse("memory:recall", args=[SCOPE]),
            {"query": "value slot", "limit": 10, "min_score": 0},
        )
    assert response.status_code == 200
    # (+3: the warning and same-source checks; the reason is kept as typed; +4: each
    # audit append is also a Merkle log append: state read, leaf, node, state write;
    # +2 on PostgreSQL: the tree and subject advisory locks)
    with django_assert_max_num_queries(27):
        response = reviewer_client.post(
            reverse("memory:decide"),
            {"scope": SCOPE, "record_id": quarantined[0], "decision": "promote", "reason": "ok"},
        )
    assert response.status_code == 302
    with django_assert_max_num_queries(8):
        response = reviewer_client.post(
            reverse("memory:forget", args=[SCOPE]), {"step": "preview", "selector": "value"}
        )
    assert response.status_code == 200


@pytest.mark.django_db
def test_bulk_decision_queries_grow_only_with_the_records_ticked(
    reviewer_client, busy_memory, django_assert_max_num_queries
):
    # Given nine quarantined records, When a reviewer rejects five at once
    ticked = list(
        Record.objects.filter(scope=SCOPE, status=Status.QUARANTINED).values_list(
            "record_id", flat=True
        )
    )[:5]
    # Then the request costs a fixed overhead plus one service call's queries per record
    # (the overhead includes the warning and same-source checks; each decision keeps its
    # reason, and a purge blanks the reasons of what it purges; each reject appends to
    # the Merkle log and proves its receipt's inclusion, under the log's advisory lock
    # on PostgreSQL; a Merkle batch integration, every 64th append, may fall inside this
    # request: on PostgreSQL sequences survive test rollbacks, so where it falls varies)
    with django_assert_max_num_queries(8 + MERKLE_BATCH_QUERIES + 25 * len(ticked)):
        response = reviewer_client.post(
            reverse("memory:bulk"),
            {
                "items": [f"{SCOPE}|{record_id}" for record_id in ticked],
                "decision": "reject",
                "reason": "injected",
                "confirm": "REJECT",
                "confirmed": "on",
            },
        )
    assert response.status_code == 200
