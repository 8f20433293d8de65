"""Plans read like pull requests (issue 13, loop 6): a one-line summary per plan, history
filters by proposer, adapter and date, diffs with line numbers and word-level highlights,
and a write into a folder that does not exist refused at staging."""

from __future__ import annotations

import pytest
from django.urls import reverse

from actions import selectors, services
from actions.errors import ActionInputError
from actions.models import ActionTransaction
from actions.selectors import _one_line
from actions.templatetags.actions_display import diff_rows
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from tests.actions.conftest import SCOPE, delete_op, write_op
from tests.factories import access_matrix, make_operator

AGENT = "agent:deploy-bot"


# -- the one-line summary -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "summary"),
    [
        ([("filesystem", "write_text", "demo/apollo/RELEASE_NOTES.md")],
         "write RELEASE_NOTES.md in demo/apollo"),
        ([("filesystem", "delete_file", "notes.txt")], "delete notes.txt at the root"),
        ([("filesystem", "write_text", None)], "write a file (payload purged)"),
        (
            [("filesystem", "write_text", "a/x.txt"), ("filesystem", "write_text", "a/y.txt"),
             ("filesystem", "delete_file", "a/z.txt")],
            "write 2 files and delete 1 file in a",
        ),
        ([("filesystem", "write_text", "a/x"), ("filesystem", "write_text", "b/y")],
         "write 2 files in 2 folders"),
        ([("scripted", "set", None)], "1 operation: scripted.set"),
        ([], "an empty plan"),
    ],
)  # fmt: skip
def test_one_line_summaries(ops, summary):
    assert _one_line(ops) == summary


@pytest.mark.django_db
def test_every_list_and_the_plan_page_show_the_summary(client, actions_root):
    (actions_root / "demo/apollo").mkdir(parents=True)
    patch = services.stage(
        principal=SYSTEM,
        scope=SCOPE,
        operations=[write_op("demo/apollo/RELEASE_NOTES.md", "# 1.0\n")],
        actor=AGENT,
    )
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    for page in ("actions:index", "actions:history"):
        assert "Write RELEASE_NOTES.md in demo/apollo" in client.get(reverse(page)).content.decode()
    detail = client.get(reverse("actions:detail", args=[patch.transaction_id]))
    assert "<h1>Write RELEASE_NOTES.md in demo/apollo</h1>" in detail.content.decode()


# -- a missing folder is refused at staging ---------------------------------------------------


@pytest.mark.django_db
def test_a_write_into_a_missing_folder_is_refused_at_staging_and_writes_nothing(actions_root):
    before = (AuditEvent.objects.count(), ActionTransaction.objects.count())
    with pytest.raises(ActionInputError, match="the folder 'reports/2026' does not exist"):
        services.stage(
            principal=SYSTEM,
            scope=SCOPE,
            operations=[write_op("reports/2026/q1.md", "x")],
            actor=AGENT,
        )
    assert (AuditEvent.objects.count(), ActionTransaction.objects.count()) == before
    # A file at the root, a write into an existing folder and a delete stage fine
    (actions_root / "reports").mkdir()
    services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("top.txt", "x")], actor=AGENT
    )
    services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("reports/q1.md", "x")], actor=AGENT
    )
    services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[delete_op("gone/old.txt")], actor=AGENT
    )


# -- history filters ---------------------------------------------------------------------------


@pytest.fixture
def plans(actions_root):
    one = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("a.txt", "1")], actor="agent:Alpha"
    )
    two = services.stage(
        principal=SYSTEM, scope=SCOPE, operations=[write_op("b.txt", "2")], actor="agent:beta"
    )
    ActionTransaction.objects.filter(pk=one.transaction_id).update(
        created_at="2026-01-05T10:00:00+00:00"
    )
    return one.transaction_id, two.transaction_id


def ids(page) -> list[str]:
    return [item["transaction_id"] for item in page.items]


@pytest.mark.django_db
def test_history_filters_by_proposer_adapter_and_date(plans):
    one, two = plans
    from aetnaweb.access import system_principal

    system = system_principal()
    assert ids(selectors.list_transactions(system, proposer="AGENT:ALPHA")) == [one]
    assert ids(selectors.list_transactions(system, adapter="filesystem")) == [two, one]
    assert ids(selectors.list_transactions(system, adapter="scripted")) == []
    from datetime import date

    jan5 = date(2026, 1, 5)
    assert ids(selectors.list_transactions(system, created_from=jan5, created_until=jan5)) == [one]
    assert ids(selectors.list_transactions(system, created_until=date(2026, 1, 4))) == []
    assert two in ids(selectors.list_transactions(system, created_from=date(2026, 1, 6)))


@pytest.mark.django_db
def test_the_history_page_filters_and_refuses_bad_input(client, plans):
    one, _two = plans
    client.force_login(make_operator("ada", [("acme:*:*", "viewer")]))
    url = reverse("actions:history")
    page = client.get(
        url, {"proposer": "agent:alpha", "since": "2026-01-05", "until": "2026-01-05"}
    )
    assert ids(page.context["page"]) == [one]
    bad = client.get(url, {"since": "2026-02-01", "until": "2026-01-01"})
    assert bad.status_code == 400 and bad.context["page"] is None
    assert "must not be after" in bad.content.decode()
    assert client.get(url, {"adapter": "File System!"}).status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize("case", access_matrix(SCOPE, role="viewer"))
def test_history_filter_permissions(client, plans, case, django_assert_max_num_queries):
    case.sign_in(client)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("actions:history"), {"adapter": "filesystem"})
    if case.grants is None:
        case.check(response)
        return
    assert response.status_code == 200
    assert (plans[0] in response.content.decode()) is case.allowed


# -- diffs ----------------------------------------------------------------------------------


def test_diff_rows_number_lines_and_mark_changed_words():
    diff = (
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -3,3 +3,3 @@\n"
        " keep this\n-the old <b>value</b> here\n+the new <b>value</b> here\n same\n"
    )
    rows = diff_rows(diff)
    body = [r for r in rows if r["kind"] in ("same", "add", "del")]
    assert [(r["kind"], r["old"], r["new"]) for r in body] == [
        ("same", 3, 3),
        ("del", 4, ""),
        ("add", "", 4),
        ("same", 5, 5),
    ]
    removed = next(r for r in rows if r["kind"] == "del")
    added = next(r for r in rows if r["kind"] == "add")
    assert [s["text"] for s in removed["segments"] if s["changed"]] == ["old"]
    assert [s["text"] for s in added["segments"] if s["changed"]] == ["new"]
    assert "".join(s["text"] for s in added["segments"]) == "the new <b>value</b> here"


@pytest.mark.django_db
def test_the_plan_page_escapes_diff_text(client, actions_root):
    (actions_root / "page.html").write_text("<p>old</p>\n")
    patch = services.stage(
        principal=SYSTEM,
        scope=SCOPE,
        operations=[write_op("page.html", "<script>alert(1)</script>\n")],
        actor=AGENT,
    )
    client.force_login(make_operator("ada", [("acme:*:*", "approver")]))
    html = client.get(reverse("actions:detail", args=[patch.transaction_id])).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html.replace("<mark>", "").replace(
        "</mark>", ""
    )
