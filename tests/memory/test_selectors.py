"""memory.selectors: visibility built in, key pagination, bounded queries."""

from __future__ import annotations

import pytest

from aetnaweb.access import READ, AccessDenied, Principal, system_principal
from aetnaweb.scopes import Scope
from memory import selectors, services
from memory.errors import QueryError, RecordNotFound

S = "acme:alice:proj"
SYSTEM = system_principal()


def seed_tree():
    ids = {}
    for scope in (
        "platform:*:*",
        "acme:*:*",
        "acme:alice:*",
        S,
        "acme:bob:*",
        "acmecorp:*:*",
        "acme:al:*",
    ):
        ids[scope] = services.remember_fact(
            principal=SYSTEM, scope=scope, key="motto", value=scope
        ).record_ids[0]
    return ids


@pytest.mark.django_db
def test_list_records_filters_and_paginates_by_key():
    for n in range(7):
        services.remember_fact(principal=SYSTEM, scope=S, key=f"k{n}", value="v")
    services.remember(principal=SYSTEM, scope=S, text="<webpage>My quarantine is real.</webpage>")
    first = selectors.list_records(SYSTEM, scope=S, status="active", limit=3)
    assert len(first.items) == 3 and first.next_cursor
    second = selectors.list_records(
        SYSTEM, scope=S, status="active", limit=3, after=first.next_cursor
    )
    third = selectors.list_records(
        SYSTEM, scope=S, status="active", limit=3, after=second.next_cursor
    )
    keys = [r.fact_key for page in (first, second, third) for r in page.items]
    assert keys == [f"k{n}" for n in range(6, -1, -1)] and third.next_cursor is None
    quarantined = selectors.list_records(SYSTEM, scope=S, status="quarantined")
    assert [r.content for r in quarantined.items] == ["User's quarantine is real."]
    assert (
        selectors.list_records(SYSTEM, scope=S, text="QUARANTINE").items[0].status == "quarantined"
    )
    assert selectors.list_records(SYSTEM, scope=S, source_type="webpage").items
    assert selectors.list_records(SYSTEM, scope=S, trust_tier="trusted_user", limit=200).items
    with pytest.raises(QueryError, match="unknown status"):
        selectors.list_records(SYSTEM, scope=S, status="deleted")
    with pytest.raises(QueryError, match="invalid cursor"):
        selectors.list_records(SYSTEM, scope=S, after="abc")
    with pytest.raises(QueryError):
        selectors.list_records(SYSTEM, scope=S, limit=0)


@pytest.mark.django_db
def test_list_records_is_exact_scope_unless_subtree_and_subtrees_are_segment_wise():
    ids = seed_tree()
    exact = selectors.list_records(SYSTEM, scope="acme:alice:*")
    assert [r.record_id for r in exact.items] == [ids["acme:alice:*"]]
    subtree = selectors.list_records(SYSTEM, scope="acme:*:*", include_descendants=True)
    assert {r.scope for r in subtree.items} == {
        "acme:*:*",
        "acme:alice:*",
        S,
        "acme:bob:*",
        "acme:al:*",
    }
    # acmecorp shares a prefix with acme and nothing else
    assert "acmecorp:*:*" not in {r.scope for r in subtree.items}


@pytest.mark.django_db
def test_operators_read_their_subtree_and_its_ancestors_never_siblings(principal_for):
    ids = seed_tree()
    alice = principal_for("acme:alice:*")
    # own subtree and ancestors: allowed
    for scope in ("acme:alice:*", S, "acme:*:*", "platform:*:*"):
        assert selectors.list_records(alice, scope=scope).items
    # siblings and prefix twins: denied
    for scope in ("acme:bob:*", "acmecorp:*:*", "acme:al:*", "acme:alicex:*"):
        with pytest.raises(AccessDenied):
            selectors.list_records(alice, scope=scope)
    # a subtree listing from an ancestor returns only what alice may read
    rows = selectors.list_records(alice, scope="acme:*:*", include_descendants=True)
    assert {r.scope for r in rows.items} == {"acme:*:*", "acme:alice:*", S}
    # record detail follows the same rule
    assert selectors.record_detail(alice, ids[S]).record.record_id == ids[S]
    with pytest.raises(AccessDenied):
        selectors.record_detail(alice, ids["acme:bob:*"])
    with pytest.raises(RecordNotFound):
        selectors.record_detail(alice, "mem_missing")


@pytest.mark.django_db
def test_tokens_stay_inside_their_subtree():
    seed_tree()
    token = Principal(
        label="agent:t", kind="token", bindings=((Scope.parse("acme:alice:*"), frozenset({READ})),)
    )
    assert selectors.list_records(token, scope=S).items
    with pytest.raises(AccessDenied):
        selectors.list_records(token, scope="acme:*:*")


@pytest.mark.django_db
def test_review_queue_lists_quarantined_records_the_principal_may_review(principal_for):
    a = services.remember(principal=SYSTEM, scope=S, text="<webpage>My pet is a cat.</webpage>")
    b = services.remember(
        principal=SYSTEM, scope="acme:bob:*", text="<webpage>My pet is a dog.</webpage>"
    )
    c = services.remember(
        principal=SYSTEM, scope="acmecorp:*:*", text="<webpage>My pet is a fish.</webpage>"
    )
    everything = selectors.review_queue(SYSTEM)
    assert [r.record_id for r in everything.items] == [
        a.record_ids[0],
        b.record_ids[0],
        c.record_ids[0],
    ]
    assert everything.items[0].episode.text.startswith("<webpage>")
    reviewer = principal_for(("acme:alice:*", "reviewer"))
    assert [r.record_id for r in selectors.review_queue(reviewer).items] == [a.record_ids[0]]
    tenant = principal_for(("acme:*:*", "reviewer"))
    assert len(selectors.review_queue(tenant).items) == 2
    page = selectors.review_queue(SYSTEM, limit=1)
    assert (
        selectors.review_queue(SYSTEM, limit=1, after=page.next_cursor).items[0].record_id
        == b.record_ids[0]
    )
    viewer = principal_for("acme:*:*")
    with pytest.raises(AccessDenied):
        selectors.review_queue(viewer)


@pytest.mark.django_db
def test_record_detail_has_the_chain_both_ways_episode_events_and_recalls():
    one = services.remember(principal=SYSTEM, scope=S, text="My car is red.").record_ids[0]
    two = services.remember(principal=SYSTEM, scope=S, text="My car is blue.").record_ids[0]
    three = services.remember(principal=SYSTEM, scope=S, text="My car is green.").record_ids[0]
    services.recall(principal=SYSTEM, scope=S, query="car")
    middle = selectors.record_detail(SYSTEM, two)
    assert [r.record_id for r in middle.supersedes_chain] == [one]
    assert [r.record_id for r in middle.superseded_by_chain] == [three]
    assert middle.episode.text == "My car is blue."
    assert [e.event_type for e in middle.audit_events] == [
        "memory.record_created",
        "memory.record_created",
    ]
    newest = selectors.record_detail(SYSTEM, three)
    assert [r.record_id for r in newest.supersedes_chain] == [two, one]
    assert newest.recalls and newest.recalls[0].returned
    services.forget(principal=SYSTEM, scope=S, record_ids=[three])
    purged = selectors.record_detail(SYSTEM, three)
    assert purged.episode.text == "" and purged.audit_events[-1].event_type == "memory.forget"
    assert purged.as_dict()["record"]["status"] == "tombstoned"


@pytest.mark.django_db
def test_record_detail_hides_events_from_chains_the_reader_may_not_see(principal_for):
    tenant_fact = services.remember(
        principal=SYSTEM, scope="acme:*:*", text="Remember that lunch is at noon."
    ).record_ids[0]
    services.remember(
        principal=SYSTEM, scope="acme:bob:*", text="Remember that lunch is at noon."
    )  # duplicate noticed in bob's chain
    alice = principal_for("acme:alice:*")
    events = selectors.record_detail(alice, tenant_fact).audit_events
    assert {e.subject_id for e in events} == {"acme:*:*"}
    assert "acme:bob:*" in {
        e.subject_id for e in selectors.record_detail(SYSTEM, tenant_fact).audit_events
    }


@pytest.mark.django_db
def test_retrieval_log_receipts_and_episodes(principal_for):
    services.remember(principal=SYSTEM, scope=S, text="My car is red.")
    services.recall(principal=SYSTEM, scope=S, query="car")
    services.recall(principal=SYSTEM, scope=S, query="red")
    receipt = services.forget(principal=SYSTEM, scope=S, selector="car")
    log = selectors.retrieval_log(SYSTEM, scope=S, limit=1)
    assert len(log.items) == 1 and log.next_cursor
    assert selectors.list_receipts(SYSTEM, scope=S).items[0].receipt == receipt
    assert selectors.get_receipt(SYSTEM, receipt["audit_event_id"]) == receipt
    bob = principal_for("acme:bob:*")
    for call in (
        lambda: selectors.retrieval_log(bob, scope=S),
        lambda: selectors.get_receipt(bob, receipt["audit_event_id"]),
        lambda: selectors.get_episode(bob, receipt["purged_episode_ids"][0]),
    ):
        with pytest.raises(AccessDenied):
            call()


@pytest.mark.django_db
def test_scope_tree_effective_scopes_and_tenant_counts(principal_for):
    seed_tree()
    services.remember(principal=SYSTEM, scope=S, text="<webpage>My pet is a cat.</webpage>")
    tree = selectors.scope_tree(SYSTEM)
    assert tree[0]["scope"] == "platform:*:*"
    acme = next(n for n in tree if n["scope"] == "acme:*:*")
    alice = next(n for n in acme["children"] if n["scope"] == "acme:alice:*")
    assert alice["children"][0]["scope"] == S
    assert alice["children"][0]["counts"]["quarantined"] == 1
    assert [n["scope"] for n in selectors.scope_tree(principal_for("acme:bob:*"))] == [
        "platform:*:*",
        "acme:*:*",
    ]
    effective = selectors.effective_recall_scopes(SYSTEM, scope=S)
    assert [(e["scope"], e["weight"], e["active"]) for e in effective] == [
        (S, 1.0, 1),
        ("acme:alice:*", 0.5, 1),
        ("acme:*:*", 0.25, 1),
        ("platform:*:*", 0.125, 1),
    ]
    counts = {row["tenant"]: row for row in selectors.counts_by_tenant(SYSTEM)}
    assert counts["acme"]["active"] == 5 and counts["acme"]["quarantined"] == 1
    assert [row["tenant"] for row in selectors.counts_by_tenant(principal_for("acmecorp:*:*"))] == [
        "acmecorp",
        "platform",
    ]


@pytest.mark.django_db
def test_list_queries_are_bounded(django_assert_max_num_queries):
    for n in range(30):
        services.remember(
            principal=SYSTEM, scope=S, text=f"<webpage>My item {n} is here.</webpage>"
        )
    with django_assert_max_num_queries(2):
        selectors.list_records(SYSTEM, scope=S, limit=20)
    with django_assert_max_num_queries(2):
        list(selectors.review_queue(SYSTEM, limit=20).items)
    with django_assert_max_num_queries(2):
        selectors.counts_by_tenant(SYSTEM)


@pytest.mark.django_db
def test_scope_counts_and_chain_status(principal_for):
    services.remember(principal=SYSTEM, scope=S, text="My car is red.")
    services.remember(principal=SYSTEM, scope=S, text="<webpage>My car is fake.</webpage>")
    assert selectors.scope_counts(SYSTEM, scope=S) == {
        "active": 1,
        "quarantined": 1,
        "superseded": 0,
        "tombstoned": 0,
        "episodes": 2,
    }
    assert selectors.scope_counts(SYSTEM, scope="acme:nobody:*")["active"] == 0
    status = selectors.chain_status(SYSTEM, scope=S)
    assert status["ok"] and status["events_checked"] == 4
    with pytest.raises(AccessDenied):
        selectors.chain_status(principal_for("acme:bob:*"), scope=S)
