"""A15 the filesystem adapter: every path rule (FS-1..FS-9)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from actions import services
from actions.adapters import FilesystemAdapter, PreparationContext
from actions.adapters.filesystem import describe_prepared, public_snapshot
from actions.errors import NotDispatched
from actions.models import ActionOperation
from actions.proposals import OperationProposal
from tests.actions.conftest import SCOPE, delete_op, stage_and_approve, write_op

CONTEXT = PreparationContext("act_x", "op_x", SCOPE, "agent")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def adapter(root: Path) -> FilesystemAdapter:
    return FilesystemAdapter(root)


def _prepare(adapter, operation="write_text", **arguments):
    return adapter.prepare(
        OperationProposal(key="k", adapter="filesystem", operation=operation, arguments=arguments),
        CONTEXT,
    )


def test_root_must_be_an_existing_directory_fs1(tmp_path):
    with pytest.raises(ValueError, match="root is not a directory"):
        FilesystemAdapter(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="root is not a directory"):
        FilesystemAdapter(tmp_path / "file")


def test_manifest_fs1(adapter, root):
    assert adapter.manifest() == {
        "adapter": "filesystem",
        "version": "1",
        "root": str(root.resolve()),
        "operations": ["write_text", "delete_file"],
        "effect_class": "verified_compensatable",
        "supports_idempotency": True,
        "supports_verification": True,
        "supports_verified_compensation": True,
    }


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "requires a relative path"),
        (None, "requires a relative path"),
        (5, "requires a relative path"),
        (".", "requires a relative path"),
        ("a\x00b", "requires a relative path"),
        ("/etc/passwd", "must be relative to the configured root"),
        ("../outside.txt", "escapes the configured root"),
        ("a/../../outside.txt", "escapes the configured root"),
    ],
)
def test_path_rules_fs2(adapter, path, message):
    with pytest.raises(ValueError, match=message):
        _prepare(adapter, path=path, content="x")


def test_symbolic_links_are_refused_anywhere_fs2(adapter, root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (outside / "f.txt").write_text("x")
    (root / "linkfile").symlink_to(outside / "f.txt")
    with pytest.raises(ValueError, match="symbolic-link paths are not supported"):
        _prepare(adapter, path="linkdir/f.txt", content="y")
    with pytest.raises(ValueError, match="symbolic-link targets are not supported"):
        _prepare(adapter, path="linkfile", content="y")
    assert (outside / "f.txt").read_text() == "x"


def test_stored_path_is_normalized_fs2(adapter, root):
    (root / "a").mkdir()
    prepared = _prepare(adapter, path="./a//b.txt", content="x")
    assert prepared.arguments["path"] == "a/b.txt"
    assert prepared.preview["path"] == "a/b.txt"


@pytest.mark.parametrize("path", ["a//b/../c.txt", "a/./b/../c.txt", "b/.."])
def test_dot_dot_inside_the_root_is_refused_with_the_normalized_path_suggested(adapter, root, path):
    # Given a path whose '..' would stay inside the root (issue 10 item 8: the docs say
    # '..' is refused, and it is, with a message that does not claim it escapes)
    (root / "a" / "b").mkdir(parents=True)
    # When it is staged, then it is refused, naming the rule and the path to send instead
    with pytest.raises(ValueError) as caught:
        _prepare(adapter, path=path, content="x")
    message = str(caught.value)
    assert "'..' segments are refused" in message and "escapes" not in message
    assert not (root / "a" / "c.txt").exists()


def test_regular_files_only_fs3(adapter, root):
    (root / "dir").mkdir()
    with pytest.raises(ValueError, match="regular files only"):
        _prepare(adapter, path="dir", content="x")
    os.mkfifo(root / "fifo")
    with pytest.raises(ValueError, match="regular files only"):
        _prepare(adapter, "delete_file", path="fifo")


def test_snapshot_and_public_snapshot_fs3(adapter, root):
    (root / "f.txt").write_bytes(b"hello")
    os.chmod(root / "f.txt", 0o640)
    snapshot = adapter.snapshot("f.txt")
    assert snapshot == {
        "exists": True,
        "kind": "file",
        "sha256": _sha(b"hello"),
        "content_b64": "aGVsbG8=",
        "mode": 0o640,
    }
    assert public_snapshot(snapshot) == {
        "exists": True,
        "kind": "file",
        "sha256": _sha(b"hello"),
        "mode": 0o640,
    }
    assert adapter.snapshot("missing/deeper.txt")["exists"] is False


def test_prepare_write_fs4(adapter, root):
    (root / "f.txt").write_text("old")
    os.chmod(root / "f.txt", 0o644)
    prepared = _prepare(adapter, path="f.txt", content="new")
    assert prepared.preview == {
        "path": "f.txt",
        "before_sha256": _sha(b"old"),
        "after_sha256": _sha(b"new"),
        "before_exists": True,
        "after_exists": True,
        "after_mode": 0o644,
    }
    assert prepared.preconditions["content_b64"]  # the full before-image
    assert prepared.effect_class == "verified_compensatable"
    assert prepared.sensitive_fields == ("content",)
    new = _prepare(adapter, path="new.txt", content="x")
    assert new.preview["after_mode"] == 0o600 and new.preview["before_exists"] is False


def test_prepare_refusals_fs4(adapter):
    with pytest.raises(ValueError, match="write_text requires string content"):
        _prepare(adapter, path="f.txt", content=b"bytes")
    with pytest.raises(ValueError, match="unsupported filesystem operation"):
        _prepare(adapter, "chmod", path="f.txt")
    with pytest.raises(ValueError, match="unknown arguments"):
        _prepare(adapter, path="f.txt", content="x", mode=0o777)


def test_prepare_delete_fs4(adapter, root):
    (root / "f.txt").write_text("bye")
    prepared = _prepare(adapter, "delete_file", path="f.txt")
    assert prepared.preview["after_sha256"] is None and prepared.preview["after_exists"] is False
    assert prepared.arguments == {"path": "f.txt"}


def test_revalidate_compares_exists_sha_kind_mode_fs5(adapter, root):
    (root / "f.txt").write_text("old")
    os.chmod(root / "f.txt", 0o644)
    prepared = _prepare(adapter, path="f.txt", content="new")
    assert adapter.revalidate(prepared).ok
    os.chmod(root / "f.txt", 0o600)  # same content, other mode
    observation = adapter.revalidate(prepared)
    assert not observation.ok and observation.reason == "filesystem precondition changed"


def test_revalidate_fails_when_a_symlink_appears_fs5(adapter, root, tmp_path):
    (root / "d").mkdir()
    prepared = _prepare(adapter, path="d/f.txt", content="new")
    (root / "d").rmdir()
    (root / "d").symlink_to(tmp_path, target_is_directory=True)
    assert not adapter.revalidate(prepared).ok


def test_execute_write_is_atomic_keeps_mode_and_is_idempotent_fs6(adapter, root):
    (root / "f.txt").write_text("old")
    os.chmod(root / "f.txt", 0o640)
    prepared = _prepare(adapter, path="f.txt", content="new")
    receipt = adapter.execute(prepared, "key-1")
    assert (root / "f.txt").read_text() == "new"
    assert (root / "f.txt").stat().st_mode & 0o777 == 0o640
    assert receipt["provider_request_id"] == "key-1" and receipt["changed"] is True
    assert "content_b64" not in receipt["after"]  # receipts hold the public snapshot only
    again = adapter.execute(prepared, "key-1")
    assert again["changed"] is False
    assert sorted(p.name for p in root.iterdir()) == ["f.txt"]  # no temporary files left


def test_execute_new_file_gets_0600_fs6(adapter, root):
    previous = os.umask(0o022)
    try:
        prepared = _prepare(adapter, path="n.txt", content="x")
        adapter.execute(prepared, "k")
    finally:
        os.umask(previous)
    assert (root / "n.txt").stat().st_mode & 0o777 == 0o600


def test_execute_delete_and_missing_file_fs6(adapter, root):
    (root / "f.txt").write_text("bye")
    prepared = _prepare(adapter, "delete_file", path="f.txt")
    assert adapter.execute(prepared, "k")["changed"] is True
    assert not (root / "f.txt").exists()
    assert adapter.execute(prepared, "k")["changed"] is False  # a missing file is fine


def test_execute_knows_when_nothing_was_dispatched_fs6_decision2(adapter, root, tmp_path):
    (root / "missing/dir").mkdir(parents=True)  # exists when staged (else refused there)
    prepared = _prepare(adapter, path="missing/dir/f.txt", content="x")
    (root / "missing/dir").rmdir()
    with pytest.raises(NotDispatched, match="parent directory must already exist"):
        adapter.execute(prepared, "k")
    forged = type(prepared)(**{**prepared.__dict__, "operation": "chmod"})
    with pytest.raises(NotDispatched, match="unsupported filesystem operation"):
        adapter.execute(forged, "k")
    # A directory swapped for a link after preparation cannot redirect the write
    (root / "d").mkdir()
    prepared = _prepare(adapter, path="d/f.txt", content="x")
    (root / "d").rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "d").symlink_to(outside, target_is_directory=True)
    with pytest.raises(NotDispatched, match="symbolic-link"):
        adapter.execute(prepared, "k")
    assert list(outside.iterdir()) == []


def test_verify_fs7(adapter, root):
    prepared = _prepare(adapter, path="f.txt", content="new")
    receipt = adapter.execute(prepared, "k")
    assert adapter.verify(prepared, receipt).ok
    (root / "f.txt").write_text("tampered")
    assert not adapter.verify(prepared, receipt).ok


def test_compensate_restores_content_and_mode_fs8_fs9(adapter, root):
    (root / "f.txt").write_text("old")
    os.chmod(root / "f.txt", 0o640)
    prepared = _prepare(adapter, path="f.txt", content="new")
    receipt = adapter.execute(prepared, "k")
    compensation = adapter.compensate(prepared, receipt, "k:compensate")
    assert (root / "f.txt").read_text() == "old"
    assert (root / "f.txt").stat().st_mode & 0o777 == 0o640
    assert adapter.verify_compensation(prepared, compensation).ok


def test_compensate_unlinks_a_new_file_and_restores_a_deleted_one_fs8(adapter, root):
    created = _prepare(adapter, path="new.txt", content="x")
    adapter.compensate(created, adapter.execute(created, "k"), "k:c")
    assert not (root / "new.txt").exists()
    (root / "gone.txt").write_text("keep me")
    deleted = _prepare(adapter, "delete_file", path="gone.txt")
    compensation = adapter.compensate(deleted, adapter.execute(deleted, "k"), "k:c")
    assert (root / "gone.txt").read_text() == "keep me"
    assert adapter.verify_compensation(deleted, compensation).ok


def test_compensate_refuses_when_file_changed_after_execution_fs8(adapter, root):
    prepared = _prepare(adapter, path="f.txt", content="new")
    receipt = adapter.execute(prepared, "k")
    (root / "f.txt").write_text("someone else's later edit")
    with pytest.raises(
        RuntimeError, match="refusing compensation because the file changed after execution"
    ):
        adapter.compensate(prepared, receipt, "k:c")
    assert (root / "f.txt").read_text() == "someone else's later edit"


def test_compensate_needs_the_before_image_fs8(adapter, root):
    (root / "f.txt").write_text("old")
    prepared = _prepare(adapter, path="f.txt", content="new")
    receipt = adapter.execute(prepared, "k")
    stripped = type(prepared)(
        **{**prepared.__dict__, "preconditions": {**prepared.preconditions, "content_b64": None}}
    )
    with pytest.raises(RuntimeError, match="persisted before-image is unavailable"):
        adapter.compensate(stripped, receipt, "k:c")


def test_verify_compensation_detects_unrestored_state_fs9(adapter, root):
    (root / "f.txt").write_text("old")
    prepared = _prepare(adapter, path="f.txt", content="new")
    adapter.execute(prepared, "k")
    observation = adapter.verify_compensation(prepared, {})
    assert not observation.ok


def test_describe_gives_a_unified_diff(adapter, root):
    (root / "f.txt").write_text("line one\nline two\n")
    prepared = _prepare(adapter, path="f.txt", content="line one\nline 2\n")
    description = describe_prepared(prepared.as_payload())
    assert description["target"] == "f.txt"
    assert "-line two" in description["diff"] and "+line 2" in description["diff"]
    assert "--- a/f.txt" in description["diff"]
    new = describe_prepared(_prepare(adapter, path="n.txt", content="hi\n").as_payload())
    assert "--- /dev/null" in new["diff"] and "+hi" in new["diff"]


@pytest.mark.django_db
def test_delete_file_end_to_end_with_compensation(actions_root, approval_key, approver_principal):
    # Given a file, a plan deleting it, then a write that cannot be dispatched
    (actions_root / "keep.txt").write_text("precious")
    (actions_root / "nodir").mkdir()  # there when staged, removed before the commit
    txn_id = stage_and_approve(
        [delete_op("keep.txt", key="d"), write_op("nodir/x.txt", "y", key="w", depends_on=["d"])],
        approver_principal,
    )
    (actions_root / "nodir").rmdir()
    result = services.commit(transaction_id=txn_id, principal=approver_principal)
    # Then the deletion was undone and verified
    assert result.transaction.state == "compensated"
    assert (actions_root / "keep.txt").read_text() == "precious"
    assert (
        ActionOperation.objects.get(transaction_id=txn_id, operation_key="d").state == "compensated"
    )
