"""manage.py memory: every sub-verb, --json, and one-line refusals with exit status 2."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from aetnaweb.access import SYSTEM
from memory import services
from memory.models import Record

S = "acme:alice:proj"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out)
    return out.getvalue()


def run_json(*args: str):
    return json.loads(run("--json", *args))


@pytest.mark.django_db
def test_remember_recall_list_show_in_text_and_json():
    assert "active: User's backup email is bob@example.com." in run(
        "remember", S, "My backup email is bob@example.com."
    )
    data = run_json("remember", S, "--key", "desk", "--value", "4B", "--kind", "office")
    assert data["records"][0]["fact_key"] == "desk"
    recalled = run_json("recall", S, "backup email")
    assert recalled["candidates"][0]["content"] == "User's backup email is bob@example.com."
    assert "<relevant_memories>" in run("recall", S, "backup email", "--block")
    listing = run_json("list", S, "--status", "active")
    assert len(listing["items"]) == 2 and listing["next_cursor"] is None
    page = run_json("list", S, "--limit", "1")
    assert page["next_cursor"]
    assert "more: --after" in run("list", S, "--limit", "1")
    record_id = recalled["returned_ids"][0]
    shown = run_json("show", record_id)
    assert shown["record"]["record_id"] == record_id and shown["recalls"]
    assert "memory.record_created" in run("show", record_id)
    # --json also works after the verb
    assert json.loads(run("show", record_id, "--json"))["record"]["record_id"] == record_id


@pytest.mark.django_db
def test_review_forget_and_derived_verbs(tmp_path):
    quarantined = run_json("remember", S, "<webpage>My bank is Lakeside.</webpage>")["records"][0]
    assert quarantined["status"] == "quarantined"
    promoted = run_json("promote", S, quarantined["record_id"], "--reason", "checked")
    assert promoted["status"] == "active"
    other = run_json("remember", S, "<webpage>My broker is Shady.</webpage>")["records"][0]
    receipt_file = tmp_path / "reject.json"
    receipt = run_json("reject", S, other["record_id"], "--receipt-out", str(receipt_file))
    assert json.loads(receipt_file.read_text()) == receipt
    preview = run_json("forget", S, "--selector", "bank", "--preview")
    assert preview["record_ids"] == [quarantined["record_id"]]
    receipt = run_json("forget", S, "--selector", "bank", "--expect", quarantined["record_id"])
    assert receipt["purged_record_ids"] == [quarantined["record_id"]]
    run("remember", S, "My car is red.", "--session", "s1")
    assert "nothing to consolidate" in run("consolidate", S)
    assert "User's car is red." in run("persona", S)
    assert "session s1" in run("scenes", S)
    assert "chain: verifies" in run("inspect", S)
    assert "logged assistant turn" in run("capture", S, "assistant", "hello")
    assert "remembered: 1 record" in run("capture", S, "user", "My dog is Rex.")
    episode = Record.objects.get(content="User's dog is Rex.").episode_id
    facts = tmp_path / "facts.json"
    facts.write_text(
        json.dumps(
            {"facts": [{"content": "User has a dog.", "evidence": [episode]}, {"content": "x"}]}
        )
    )
    proposed = run_json("propose", S, str(facts))
    assert len(proposed["accepted"]) == 1 and proposed["rejected"][0]["reason"] == "no_evidence"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ("remember", "acme:alice", "My x is y."),
        ("recall", "acme:*:proj", "x"),
        ("list", "platform:bob:*"),
        ("forget", "acme corp:*:*", "--selector", "x"),
        ("show", "mem_unknown"),
        ("promote", S, "mem_unknown"),
        ("reject", S, "mem_unknown"),
        ("forget", S, "--record-id", "mem_unknown"),
        ("list", S, "--status", "gone"),
        ("capture", S, "system", "x"),
        ("remember", S, "--key", "k"),
        ("propose", S, "/nonexistent/facts.json"),
        ("import", S, "/nonexistent/turns.json"),
        ("remember", S, "My car is red.", "--occurred-at", "2026-03-02 09:30"),
    ],
)
def test_refusals_are_one_line_exit_2_and_write_nothing(rows, args):
    before = rows()
    with pytest.raises(CommandError) as caught:
        call_command("memory", *args, stdout=io.StringIO())
    assert caught.value.returncode == 2
    assert "\n" not in str(caught.value) and str(caught.value)
    assert rows() == before


@pytest.mark.django_db
def test_refusal_from_the_command_line_prints_one_line_on_stderr(capfd):
    from django.core.management import ManagementUtility

    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", "memory", "remember", "acme:alice", "My x is y."]).execute()
    assert exited.value.code == 2
    err = capfd.readouterr().err
    assert err.strip().count("\n") == 0 and "three segments" in err


@pytest.mark.django_db
def test_an_empty_forget_from_the_command_is_refused_and_recorded():
    services.remember(principal=SYSTEM, scope=S, text="My car is red.")
    with pytest.raises(CommandError) as caught:
        call_command("memory", "forget", S, "--selector", "  ", stdout=io.StringIO())
    assert caught.value.returncode == 2
    assert Record.objects.get().status == "active"


# -- forget (issue 9) -------------------------------------------------------------------


@pytest.mark.django_db
def test_forget_a_superseded_record_by_id_takes_its_lineage_and_preview_marks_it():
    old = services.remember(principal=SYSTEM, scope=S, text="My shell is bash.").record_ids[0]
    new = services.remember(principal=SYSTEM, scope=S, text="My shell is fish.").record_ids[0]
    preview = run("forget", S, "--record-id", old, "--preview")
    assert "would purge 2 record(s)" in preview
    assert f"{new} active (same fact): User's shell is fish." in preview
    receipt = run_json("forget", S, "--record-id", old, "--expect", old, "--expect", new)
    assert receipt["purged_record_ids"] == [old, new]
    assert "bash" not in run("list", S, "--status", "tombstoned")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--utterance", "forget it please"), "say what to forget"),
        (("--selector", "me"), "say what to forget"),
        (("--utterance", "forget everything"), "say what to forget"),
        (("--selector", "eet"), "nothing matched"),
        (("--utterance", "forget my boat"), "nothing matched"),
    ],
)
def test_vague_or_unmatched_forgets_exit_2_with_one_line_and_purge_nothing(rows, args, message):
    services.remember(principal=SYSTEM, scope=S, text="Remember that I hate loud meetings.")
    before = rows()
    with pytest.raises(CommandError) as caught:
        call_command("memory", "forget", S, *args, stdout=io.StringIO())
    assert caught.value.returncode == 2
    assert message in str(caught.value) and "\n" not in str(caught.value)
    after = rows()
    assert after["records"] == before["records"] and after["episodes"] == before["episodes"]
    assert after["AuditEvent"] == before["AuditEvent"] + 1  # memory.forget_rejected only


@pytest.mark.django_db
def test_a_broad_forget_from_the_command_needs_the_previewed_ids():
    for n in range(services.MAX_UNPREVIEWED_FORGET + 1):
        services.remember(
            principal=SYSTEM, scope=S, text=f"Remember that crate {n} is in the depot."
        )
    with pytest.raises(CommandError, match="preview first") as caught:
        call_command("memory", "forget", S, "--selector", "depot", stdout=io.StringIO())
    assert caught.value.returncode == 2
    ids = run_json("forget", S, "--selector", "depot", "--preview")["record_ids"]
    expect = [arg for record_id in ids for arg in ("--expect", record_id)]
    # Above ten the count is typed back too: without it, refused and nothing purged
    with pytest.raises(CommandError, match="confirm_count") as refused:
        call_command("memory", "forget", S, "--selector", "depot", *expect, stdout=io.StringIO())
    assert refused.value.returncode == 2
    receipt = run_json("forget", S, "--selector", "depot", *expect, "--confirm-count", "11")
    assert len(receipt["purged_record_ids"]) == services.MAX_UNPREVIEWED_FORGET + 1


@pytest.mark.django_db
def test_the_command_forgets_below_with_a_bundle_and_a_reference(tmp_path):
    user, below = "acme:alice:*", S
    services.remember(principal=SYSTEM, scope=user, text="Remember that crate 1 is in the depot.")
    services.remember(principal=SYSTEM, scope=below, text="Remember that crate 2 is in the depot.")
    preview = run_json("forget", user, "--selector", "depot", "--preview")
    assert [b["scope"] for b in preview["below"]] == [below]
    wide = run_json("forget", user, "--selector", "depot", "--preview", "--include-below")
    expect = [arg for record_id in wide["record_ids"] for arg in ("--expect", record_id)]
    out = tmp_path / "bundle.json"
    bundle = run_json(
        "forget",
        user,
        "--selector",
        "depot",
        "--include-below",
        *expect,
        "--reference",
        "REQ-7",
        "--receipt-out",
        str(out),
    )
    assert bundle["format"] == services.FORGET_BUNDLE_FORMAT and bundle["reference"] == "REQ-7"
    assert sorted(r["subject_id"] for r in bundle["receipts"]) == sorted([user, below])
    assert json.loads(out.read_text()) == bundle


@pytest.mark.django_db
def test_import_reads_a_conversation_file_and_remember_takes_occurred_at(tmp_path, rows):
    # Given a JSON file of turns
    turns = [
        {
            "text": "I play the cello.",
            "speaker": "Alice",
            "turn_id": "t1",
            "occurred_at": "2026-03-02T09:30:00+00:00",
        },
        {"text": "Lovely!", "role": "other", "speaker": "Bob", "turn_id": "t2"},
    ]
    path = tmp_path / "turns.json"
    path.write_text(json.dumps({"turns": turns}))
    # When imported from the command line / Then each kept turn and fact is listed
    out = run("import", S, str(path))
    assert "imported 2 turn(s), 3 record(s) stored" in out
    assert "t1 (user)" in out and "Bob: Lovely!" in out
    # And remember keeps a stated message time
    data = run_json("remember", S, "My car is red.", "--occurred-at", "2026-03-02T09:30:00Z")
    assert Record.objects.get(record_id=data["records"][0]["record_id"]).occurred_at is not None
    # And a file with a bad turn is refused in one line, storing nothing
    before = rows()
    path.write_text(json.dumps([{"text": "I ski.", "role": "robot"}]))
    with pytest.raises(CommandError) as caught:
        call_command("memory", "import", S, str(path), stdout=io.StringIO())
    assert "turns.0.role" in str(caught.value) and rows() == before
