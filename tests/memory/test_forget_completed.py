"""Forget, completed (issue 32 item 5): matches in the scopes below, rows left out, the count
typed back above ten, a request reference, and the bundle tools/verify_audit.py checks offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aetnaweb.access import SYSTEM, AccessDenied
from aetnaweb.errors import InvalidInput
from audit import notes
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import services
from memory.errors import (
    ForgetNotConfirmed,
    ForgetPreviewStale,
    ForgetSelectionError,
    SelectorError,
)
from memory.models import DeletionReceipt, ForgetBundle, Record, Status
from memory.services.holds import set_legal_hold
from tests.audit.conftest import tool

ALICE = "acme:alice:*"
APOLLO = "acme:alice:apollo"
ZEUS = "acme:alice:zeus"
BOB = "acme:bob:*"
REFERENCE = "REQ-2041"


@pytest.fixture
def signer(tmp_path, settings) -> notes.SignerKey:
    key = notes.SignerKey.generate("aetnaweb.test/forget")
    path = tmp_path / "checkpoint_key"
    notes.write_private_key(path, key)
    settings.AETNAWEB_CHECKPOINT_KEY_FILE = str(path)
    return key


def remember(scope: str, text: str) -> str:
    return services.remember(principal=SYSTEM, scope=scope, text=text).record_ids[0]


def seed() -> dict[str, list[str]]:
    """The backup email at Alice's scope (2 facts), her apollo project (2) and zeus (1), and Bob's."""
    return {
        ALICE: [
            remember(ALICE, "Remember that my backup email is alice.old@example.org."),
            remember(ALICE, "Remember that the backup email for invoices is billing@example.org."),
        ],
        APOLLO: [
            remember(APOLLO, "Remember that the apollo backup email is apollo@example.org."),
            remember(APOLLO, "Remember that backup email reports go out on Mondays."),
        ],
        ZEUS: [remember(ZEUS, "Remember that the zeus backup email is zeus@example.org.")],
        BOB: [remember(BOB, "Remember that the bob backup email is bob@example.org.")],
    }


def content(record_id: str) -> str:
    return Record.objects.get(record_id=record_id).content


# -- the preview lists the scopes below ------------------------------------------------------


@pytest.mark.django_db
def test_the_preview_lists_matches_in_the_scopes_below_and_writes_nothing(rows):
    # Given the words stored at Alice's scope and in two of her projects, and at Bob's
    ids = seed()
    before = rows()
    # When the forget at her user scope is previewed
    preview = services.forget_preview(principal=SYSTEM, scope=ALICE, selector="backup email")
    # Then its lists are her scope's, and each scope below with a match is named with its rows
    assert sorted(preview.record_ids) == sorted(ids[ALICE])
    assert [b["scope"] for b in preview.below] == [APOLLO, ZEUS]
    assert sorted(preview.below[0]["record_ids"]) == sorted(ids[APOLLO])
    assert preview.below[1]["count"] == 1
    assert preview.count == 2 and not preview.include_below
    # And with include_below the lists and the count take them in; Bob's never appears
    wide = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    assert sorted(wide.record_ids) == sorted(ids[ALICE] + ids[APOLLO] + ids[ZEUS])
    assert {row["scope"] for row in wide.records} == {ALICE, APOLLO, ZEUS}
    assert wide.count == 5
    assert rows() == before


@pytest.mark.django_db
def test_matches_only_below_are_named_and_need_include_below(rows):
    remember(APOLLO, "Remember that the apollo backup email is apollo@example.org.")
    before = rows()
    with pytest.raises(SelectorError, match="include the scopes below") as refused:
        services.forget_preview(principal=SYSTEM, scope=ALICE, selector="backup email")
    assert refused.value.reason == "nothing_matched" and APOLLO in str(refused.value)
    preview = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    assert [row["scope"] for row in preview.records] == [APOLLO]
    assert rows() == before


@pytest.mark.django_db
def test_the_scopes_below_are_those_the_operator_may_forget_at(principal_for):
    seed()
    # An admin of the whole tenant sees each scope below; an operator of apollo cannot forget above
    admin = principal_for("acme:*:*", role="admin")
    preview = services.forget_preview(principal=admin, scope=ALICE, selector="backup email")
    assert [b["scope"] for b in preview.below] == [APOLLO, ZEUS]
    apollo_only = principal_for(APOLLO, role="admin")
    with pytest.raises(AccessDenied):
        services.forget_preview(principal=apollo_only, scope=ALICE, selector="backup email")


# -- include_below: one receipt per scope, bundled ---------------------------------------------


@pytest.mark.django_db
def test_including_the_scopes_below_purges_each_with_its_receipt_in_one_bundle():
    # Given the previewed forget with the scopes below
    ids = seed()
    preview = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    # When it is applied with the count typed back and a reference
    bundle = services.forget(
        principal=SYSTEM,
        scope=ALICE,
        selector="backup email",
        include_below=True,
        expected_record_ids=list(preview.record_ids),
        expected_episode_ids=list(preview.episode_ids),
        confirm_count=5,
        reference=REFERENCE,
    )
    # Then one receipt per scope is bundled, each naming exactly that scope's records
    assert bundle["format"] == services.FORGET_BUNDLE_FORMAT
    assert bundle["scope"] == ALICE and bundle["reference"] == REFERENCE
    by_scope = {r["subject_id"]: sorted(r["purged_record_ids"]) for r in bundle["receipts"]}
    assert by_scope == {s: sorted(ids[s]) for s in (ALICE, APOLLO, ZEUS)}
    for receipt in bundle["receipts"]:
        assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
    # And everything is purged except Bob's
    for scope in (ALICE, APOLLO, ZEUS):
        assert all(content(i) == "" for i in ids[scope])
    assert "bob@example.org" in content(ids[BOB][0])
    # And the closing event commits the receipts; the bundle and the reference are kept
    closing = AuditEvent.objects.get(event_type="memory.forget_bundled")
    payload = json.loads(closing.payload)
    assert payload["receipt_sha256s"] == sorted(r["receipt_sha256"] for r in bundle["receipts"])
    assert REFERENCE not in closing.payload
    kept = ForgetBundle.objects.get(closing_event_id=closing.event_id)
    assert kept.document == bundle and kept.reference == REFERENCE
    assert set(DeletionReceipt.objects.values_list("bundle_event_id", "reference")) == {
        (closing.event_id, REFERENCE)
    }
    # And each forget event commits the reference's digest, never its text
    for event in AuditEvent.objects.filter(event_type="memory.forget"):
        assert "reference_sha256" in json.loads(event.payload) and REFERENCE not in event.payload


@pytest.mark.django_db
def test_without_include_below_the_scopes_below_stay():
    ids = seed()
    receipt = services.forget(principal=SYSTEM, scope=ALICE, selector="backup email")
    assert receipt["format"] == "aetnamem-deletion-receipt-v1"
    assert sorted(receipt["purged_record_ids"]) == sorted(ids[ALICE])
    assert all(content(i) for i in ids[APOLLO] + ids[ZEUS])
    assert not ForgetBundle.objects.exists()


@pytest.mark.django_db
def test_a_scope_below_that_changed_since_the_preview_is_stale_and_nothing_is_purged(rows):
    seed()
    preview = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    remember(ZEUS, "Remember that the second zeus backup email is z2@example.org.")
    before = rows()
    with pytest.raises(ForgetPreviewStale):
        services.forget(
            principal=SYSTEM,
            scope=ALICE,
            selector="backup email",
            include_below=True,
            expected_record_ids=list(preview.record_ids),
            expected_episode_ids=list(preview.episode_ids),
        )
    assert rows() == before


# -- rows left out (unticked) --------------------------------------------------------------------


@pytest.mark.django_db
def test_a_row_left_out_stays_and_the_receipt_names_exactly_the_others():
    ids = seed()
    kept = ids[APOLLO][1]
    preview = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    bundle = services.forget(
        principal=SYSTEM,
        scope=ALICE,
        selector="backup email",
        include_below=True,
        expected_record_ids=list(preview.record_ids),
        expected_episode_ids=list(preview.episode_ids),
        exclude_record_ids=[kept],
        confirm_count=4,
    )
    purged = [i for r in bundle["receipts"] for i in r["purged_record_ids"]]
    assert kept not in purged and len(purged) == 4
    assert "reports go out on Mondays" in content(kept)
    # Its source message keeps its text too; the others' are emptied
    apollo = next(r for r in bundle["receipts"] if r["subject_id"] == APOLLO)
    source = Record.objects.get(record_id=kept).episode_id
    assert source not in apollo["purged_episode_ids"]


@pytest.mark.django_db
def test_a_lineage_is_left_out_whole_or_not_at_all(rows):
    old = remember(ALICE, "My backup email is old@example.org.")
    services.remember(
        principal=SYSTEM, scope=ALICE, text="Use new@example.org as my backup email from now on."
    )
    lineage = Record.objects.filter(scope=ALICE).values_list("record_id", flat=True)
    assert len(lineage) == 2 and Record.objects.get(record_id=old).status == Status.SUPERSEDED
    preview = services.forget_preview(principal=SYSTEM, scope=ALICE, selector="backup email")
    assert len({row["lineage"] for row in preview.records}) == 1
    before = rows()
    with pytest.raises(ForgetSelectionError, match="one lineage") as refused:
        services.forget(
            principal=SYSTEM,
            scope=ALICE,
            selector="backup email",
            expected_record_ids=list(preview.record_ids),
            exclude_record_ids=[old],
        )
    assert refused.value.field == "exclude_record_ids"
    assert rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("exclude", "message"),
    [
        ({"exclude_record_ids": ["mem_" + "0" * 32]}, "not listed by this forget's preview"),
        ({"exclude_episode_ids": ["ep_" + "0" * 32]}, "not listed by this forget's preview"),
        ("all", "nothing is left to forget"),
        ("source", "is the source of a record"),
    ],
)
def test_rows_left_out_that_leave_no_forget_are_refused_and_write_nothing(rows, exclude, message):
    ids = seed()
    preview = services.forget_preview(principal=SYSTEM, scope=ALICE, selector="backup email")
    if exclude == "all":
        exclude = {"exclude_record_ids": ids[ALICE]}
    elif exclude == "source":
        exclude = {"exclude_episode_ids": [Record.objects.get(record_id=ids[ALICE][0]).episode_id]}
    before = rows()
    with pytest.raises(ForgetSelectionError, match=message):
        services.forget(
            principal=SYSTEM,
            scope=ALICE,
            selector="backup email",
            expected_record_ids=list(preview.record_ids),
            expected_episode_ids=list(preview.episode_ids),
            **exclude,
        )
    assert rows() == before


# -- the count typed back above ten ------------------------------------------------------------


def eleven() -> list[str]:
    return [remember(ALICE, f"Remember that ticket {n} is about the printer.") for n in range(11)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("typed", "message"), [(None, "type the count \\(11\\)"), (12, "\\(12\\)"), (10, "\\(10\\)")]
)
def test_above_ten_a_missing_or_wrong_count_is_refused_and_writes_nothing(rows, typed, message):
    # Given eleven matching records, previewed
    eleven()
    preview = services.forget_preview(principal=SYSTEM, scope=ALICE, selector="printer")
    assert preview.count == 11 and preview.confirm_above == services.MAX_UNCONFIRMED_FORGET
    before = rows()
    # When applied without the count, or with a wrong one
    with pytest.raises(ForgetNotConfirmed, match=message) as refused:
        services.forget(
            principal=SYSTEM,
            scope=ALICE,
            selector="printer",
            expected_record_ids=list(preview.record_ids),
            confirm_count=typed,
        )
    # Then it is refused naming confirm_count, and nothing at all is written (no audit row either)
    assert refused.value.field == "confirm_count"
    assert refused.value.error_code == "forget_count_not_confirmed"
    assert rows() == before
    # And with the count typed right, the eleven go
    receipt = services.forget(
        principal=SYSTEM,
        scope=ALICE,
        selector="printer",
        expected_record_ids=list(preview.record_ids),
        confirm_count=11,
    )
    assert len(receipt["purged_record_ids"]) == 11


@pytest.mark.django_db
def test_the_count_is_what_is_left_after_rows_are_left_out():
    ids = eleven()
    preview = services.forget_preview(principal=SYSTEM, scope=ALICE, selector="printer")
    # Leaving one out brings it to ten: no count needed, but a count given must be right
    with pytest.raises(ForgetNotConfirmed):
        services.forget(
            principal=SYSTEM,
            scope=ALICE,
            selector="printer",
            expected_record_ids=list(preview.record_ids),
            exclude_record_ids=[ids[0]],
            confirm_count=11,
        )
    receipt = services.forget(
        principal=SYSTEM,
        scope=ALICE,
        selector="printer",
        expected_record_ids=list(preview.record_ids),
        exclude_record_ids=[ids[0]],
    )
    assert len(receipt["purged_record_ids"]) == 10 and ids[0] not in receipt["purged_record_ids"]


@pytest.mark.django_db
def test_a_count_that_is_not_a_whole_number_is_refused(rows):
    remember(ALICE, "Remember that ticket 1 is about the printer.")
    before = rows()
    for typed in ("1", 1.0, True):
        with pytest.raises(ForgetNotConfirmed, match="whole number"):
            services.forget(principal=SYSTEM, scope=ALICE, selector="printer", confirm_count=typed)
    assert rows() == before


# -- the request reference -------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("reference", ["x" * 201, "REQ\n2041", "REQ\x002041", 2041])
def test_a_bad_reference_is_refused_and_writes_nothing(rows, reference):
    remember(ALICE, "Remember that my backup email is alice.old@example.org.")
    before = rows()
    with pytest.raises(InvalidInput) as refused:
        services.forget(principal=SYSTEM, scope=ALICE, selector="backup email", reference=reference)
    assert refused.value.field == "reference"
    assert rows() == before


@pytest.mark.django_db
def test_the_reference_is_kept_with_a_single_receipt():
    remember(ALICE, "Remember that my backup email is alice.old@example.org.")
    receipt = services.forget(
        principal=SYSTEM, scope=ALICE, selector="backup email", reference=f"  {REFERENCE} "
    )
    row = DeletionReceipt.objects.get(audit_event_id=receipt["audit_event_id"])
    assert row.reference == REFERENCE and row.bundle_event_id == ""
    event = AuditEvent.objects.get(event_id=receipt["audit_event_id"])
    assert REFERENCE not in event.payload


@pytest.mark.django_db
def test_a_held_scope_below_refuses_the_whole_bundle(rows):
    seed()
    set_legal_hold(principal=SYSTEM, scope=ZEUS, reference="LIT-7")
    preview = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    before = rows()
    with pytest.raises(Exception, match="hold"):
        services.forget(
            principal=SYSTEM,
            scope=ALICE,
            selector="backup email",
            include_below=True,
            expected_record_ids=list(preview.record_ids),
            expected_episode_ids=list(preview.episode_ids),
        )
    assert rows() == before


# -- the bundle offline ----------------------------------------------------------------------------


def bundle_file(tmp_path: Path) -> Path:
    seed()
    preview = services.forget_preview(
        principal=SYSTEM, scope=ALICE, selector="backup email", include_below=True
    )
    bundle = services.forget(
        principal=SYSTEM,
        scope=ALICE,
        selector="backup email",
        include_below=True,
        expected_record_ids=list(preview.record_ids),
        expected_episode_ids=list(preview.episode_ids),
        confirm_count=preview.count,
        reference=REFERENCE,
    )
    path = tmp_path / "forget-bundle.json"
    path.write_text(json.dumps(bundle, indent=2))
    return path


def run_tool(*args: str) -> int:
    return int(tool.main(list(args)))


@pytest.mark.django_db
def test_the_bundle_verifies_offline_with_the_public_key(signer, tmp_path, capsys):
    path = bundle_file(tmp_path)
    assert run_tool("--forget-bundle", str(path), "--public-key", signer.verifier.text()) == 0
    out = capsys.readouterr().out
    assert "OK forget bundle" in out and out.count("signature verified") == 3
    # Without the key nothing proves who made it (exit 3); with another key it fails
    assert run_tool("--forget-bundle", str(path)) == 3
    other = notes.SignerKey.generate("aetnaweb.test/other").verifier.text()
    assert run_tool("--forget-bundle", str(path), "--public-key", other) == 1


def _rewritten(path: Path, change) -> Path:
    bundle = json.loads(path.read_text())
    change(bundle)
    bundle.pop("bundle_sha256")
    bundle["bundle_sha256"] = tool.digest(bundle)
    out = path.with_name("changed-" + path.name)
    out.write_text(json.dumps(bundle))
    return out


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda b: b["receipts"].clear(), "holds no receipt"),
        (lambda b: b["receipts"].pop(), "not the set its closing event commits"),
        (lambda b: b.update(reference="another request"), "names a different reference"),
        (lambda b: b.pop("closing_proof"), "no closing_proof"),
        (lambda b: b.update(scope=APOLLO), "not this forget's bundling event"),
        (lambda b: b.update(created_at="2020-01-01T00:00:00Z"), "not the time of its closing"),
        (lambda b: b["receipts"].append(b["receipts"][0]), "appears twice"),
        (lambda b: b.update(note="x"), "does not define: note"),
        (lambda b: b["receipts"][0].update(purged_record_ids=[]), "receipt"),
    ],
)
def test_a_tampered_bundle_fails(signer, tmp_path, capsys, change, reason):
    path = _rewritten(bundle_file(tmp_path), change)
    assert run_tool("--forget-bundle", str(path), "--public-key", signer.verifier.text()) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and reason in out


@pytest.mark.django_db
def test_a_bundle_edited_without_its_digest_fails(signer, tmp_path, capsys):
    path = bundle_file(tmp_path)
    bundle = json.loads(path.read_text())
    bundle["receipts"][0]["purged_record_ids"] = []
    path.write_text(json.dumps(bundle))
    assert run_tool("--forget-bundle", str(path), "--public-key", signer.verifier.text()) == 1
    assert "bundle_sha256 does not match" in capsys.readouterr().out
