"""The ``filesystem`` adapter: write or delete regular files under one root (A15, FS-*).

Every file operation walks from an open descriptor of the root, one path
component at a time, with ``O_NOFOLLOW``: a symbolic link anywhere on the path
is refused, and a directory swapped for a link between the check and the
write cannot redirect the write outside the root.
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import errno
import hashlib
import os
import posixpath
import secrets
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from actions import formats
from actions.adapters.base import Observation, PreparationContext, PreparedOperation
from actions.errors import ActionInputError, NotDispatched
from actions.proposals import OperationProposal

ADAPTER_NAME = "filesystem"
ADAPTER_VERSION = "1"
WRITE_TEXT = "write_text"
DELETE_FILE = "delete_file"
OPERATIONS = (WRITE_TEXT, DELETE_FILE)
NEW_FILE_MODE = 0o600

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

ABSENT: dict[str, Any] = {
    "exists": False,
    "kind": "absent",
    "sha256": None,
    "content_b64": None,
    "mode": None,
}


TEMP_SUFFIX = ".aetnaweb-tmp"


def public_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot without its content: what observations and receipts may hold (FS-3)."""
    return {key: snapshot.get(key) for key in ("exists", "kind", "sha256", "mode")}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FilesystemAdapter:
    """Rooted at an existing directory; only regular files, only relative paths."""

    name = ADAPTER_NAME
    version = ADAPTER_VERSION

    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise ActionInputError(
                f"filesystem adapter root is not a directory: {str(root)!r} "
                "(create it or set AETNAWEB_ACTIONS_ROOT)"
            )
        self.root = resolved

    def manifest(self) -> dict[str, Any]:
        # The absolute root is part of the manifest, so committing against a
        # different root counts as drift (CM-5).
        return {
            "adapter": self.name,
            "version": self.version,
            "root": str(self.root),
            "operations": list(OPERATIONS),
            "effect_class": formats.VERIFIED_COMPENSATABLE,
            "supports_idempotency": True,
            "supports_verification": True,
            "supports_verified_compensation": True,
        }

    # -- path rules (FS-2, FS-3) ----------------------------------------------

    def normalize_path(self, raw: Any) -> str:
        """The normalized relative path, or :class:`ActionInputError` naming the rule broken."""
        if not isinstance(raw, str) or not raw:
            raise ActionInputError("the filesystem adapter requires a relative path")
        if "\x00" in raw:
            raise ActionInputError("the filesystem adapter requires a relative path (no NUL)")
        pure = PurePosixPath(raw)
        if pure.is_absolute():
            raise ActionInputError(
                f"path {raw!r} must be relative to the configured root, not absolute"
            )
        parts = [part for part in pure.parts if part not in ("", ".")]
        if not parts:
            raise ActionInputError("the filesystem adapter requires a relative path to a file")
        if ".." in parts:
            # Refused even when it would stay inside the root (a//b/../c.txt):
            # the reviewer approves the path as written, and lexical
            # normalization past a directory that may not exist (or may be
            # swapped) would touch a file other than the one shown.
            lexical = posixpath.normpath("/".join(parts))
            if lexical == ".." or lexical.startswith("../"):
                raise ActionInputError(f"path {raw!r} escapes the configured root")
            raise ActionInputError(
                f"path {raw!r}: '..' segments are refused, even inside the root;"
                f" send the path without them ({lexical!r})"
            )
        current = self.root
        for index, part in enumerate(parts):
            current = current / part
            last = index == len(parts) - 1
            if current.is_symlink():
                if last:
                    raise ActionInputError(f"path {raw!r}: symbolic-link targets are not supported")
                raise ActionInputError(f"path {raw!r}: symbolic-link paths are not supported")
            if not last and current.exists() and not current.is_dir():
                raise ActionInputError(f"path {raw!r}: {part!r} is not a directory")
        target = self.root.joinpath(*parts)
        if not target.resolve(strict=False).is_relative_to(self.root):
            raise ActionInputError(f"path {raw!r} escapes the configured root")
        if target.exists() and not target.is_file():
            raise ActionInputError(
                f"path {raw!r}: the filesystem adapter supports regular files only"
            )
        return "/".join(parts)

    def _require_folder(self, relative: str) -> None:
        """Refuse at staging a write whose folder does not exist (this adapter never creates
        folders), instead of letting it be approved and fail "not dispatched" at commit."""
        folder = relative.rpartition("/")[0]
        if folder and not self.root.joinpath(*folder.split("/")).is_dir():
            raise ActionInputError(
                f"path {relative!r}: the folder {folder!r} does not exist under the actions "
                "root; the filesystem adapter writes files, never folders: create the folder "
                "first, then stage the plan again"
            )

    def _open_parent(self, relative: str) -> tuple[int, str]:
        """A descriptor of the target's parent, reached without following any link."""
        parts = relative.split("/")
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts[:-1]:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    @staticmethod
    def _snapshot_at(parent_fd: int, name: str) -> dict[str, Any]:
        try:
            info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return dict(ABSENT)
        if stat.S_ISLNK(info.st_mode):
            raise ActionInputError("symbolic-link targets are not supported")
        if not stat.S_ISREG(info.st_mode):
            raise ActionInputError("the filesystem adapter supports regular files only")
        fd = os.open(name, _READ_FLAGS, dir_fd=parent_fd)
        try:
            mode = os.fstat(fd).st_mode & 0o777
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        return {
            "exists": True,
            "kind": "file",
            "sha256": _sha256(data),
            "content_b64": base64.b64encode(data).decode("ascii"),
            "mode": mode,
        }

    def snapshot(self, relative: str) -> dict[str, Any]:
        """The full before-image (content included) of ``relative``; absent if its parent is."""
        try:
            parent_fd, name = self._open_parent(relative)
        except FileNotFoundError:
            return dict(ABSENT)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ActionInputError(
                    f"path {relative!r}: symbolic-link paths are not supported"
                ) from exc
            raise
        try:
            return self._snapshot_at(parent_fd, name)
        finally:
            os.close(parent_fd)

    @staticmethod
    def _atomic_write(parent_fd: int, name: str, data: bytes, mode: int, key: str) -> None:
        """Temporary file in the same directory, fsync, rename over the target, fsync the dir.

        The temporary name carries a tag of ``key`` (the attempt's idempotency
        or compensation key), so after a crash :meth:`leftovers` finds this
        operation's own temporary files and never another run's.
        """
        temp_name = f".{name[:100]}.{_temp_tag(key)}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        fd = os.open(
            temp_name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
            NEW_FILE_MODE,
            dir_fd=parent_fd,
        )
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(temp_name, dir_fd=parent_fd)
            raise
        os.close(fd)
        try:
            os.replace(temp_name, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except BaseException:
            os.unlink(temp_name, dir_fd=parent_fd)
            raise
        os.fsync(parent_fd)

    # -- the protocol -----------------------------------------------------------

    def prepare(
        self, proposal: OperationProposal, context: PreparationContext
    ) -> PreparedOperation:
        """FS-4: normalize, snapshot the before-image, and describe the after-state."""
        if proposal.operation not in OPERATIONS:
            raise ActionInputError(
                f"unsupported filesystem operation {proposal.operation!r} "
                f"(supported: {', '.join(OPERATIONS)})"
            )
        arguments = dict(proposal.arguments)
        allowed = {"path", "content"} if proposal.operation == WRITE_TEXT else {"path"}
        unknown = set(arguments) - allowed
        if unknown:
            raise ActionInputError(
                f"unknown arguments for filesystem {proposal.operation}: {sorted(unknown)}"
            )
        relative = self.normalize_path(arguments.get("path"))
        if proposal.operation == WRITE_TEXT:
            self._require_folder(relative)
        before = self.snapshot(relative)
        after_mode = before["mode"] if before["exists"] else NEW_FILE_MODE
        if proposal.operation == WRITE_TEXT:
            content = arguments.get("content")
            if not isinstance(content, str):
                raise ActionInputError("write_text requires string content")
            normalized = {"path": relative, "content": content}
            after_sha256: str | None = _sha256(content.encode("utf-8"))
            after_exists = True
            sensitive: tuple[str, ...] = ("content",)
        else:
            normalized = {"path": relative}
            after_sha256 = None
            after_exists = False
            sensitive = ()
        preview = {
            "path": relative,
            "before_sha256": before["sha256"],
            "after_sha256": after_sha256,
            "before_exists": before["exists"],
            "after_exists": after_exists,
            "after_mode": after_mode,
        }
        return PreparedOperation(
            adapter=self.name,
            operation=proposal.operation,
            arguments=normalized,
            preview=preview,
            preconditions=before,
            effect_class=formats.VERIFIED_COMPENSATABLE,
            sensitive_fields=sensitive,
        )

    def _observe(self, relative: str) -> dict[str, Any] | str:
        """The public snapshot now, or the reason it cannot be taken."""
        try:
            self.normalize_path(relative)
            return public_snapshot(self.snapshot(relative))
        except ActionInputError as exc:
            return str(exc)

    def revalidate(self, prepared: PreparedOperation) -> Observation:
        """FS-5: the target still matches the before-image (exists, sha256, kind, mode)."""
        relative = prepared.arguments["path"]
        observed = self._observe(relative)
        expected = public_snapshot(prepared.preconditions)
        if isinstance(observed, str):
            return Observation(False, "filesystem path check failed", {"path": relative})
        ok = observed == expected
        return Observation(
            ok,
            "" if ok else "filesystem precondition changed",
            {"path": relative, "expected": expected, "observed": observed},
        )

    def execute(self, prepared: PreparedOperation, idempotency_key: str) -> dict[str, Any]:
        """FS-6: write atomically or unlink; ``NotDispatched`` when nothing can have happened."""
        operation = prepared.operation
        if operation not in OPERATIONS:
            raise NotDispatched(f"unsupported filesystem operation {operation!r}")
        relative = prepared.arguments.get("path")
        try:
            relative = self.normalize_path(relative)
            parent_fd, name = self._open_parent(relative)
        except ActionInputError as exc:
            raise NotDispatched(str(exc)) from exc
        except FileNotFoundError as exc:
            raise NotDispatched(f"parent directory must already exist for {relative!r}") from exc
        except OSError as exc:
            raise NotDispatched(f"path check failed for {relative!r}: {exc.strerror}") from exc
        try:
            try:
                current = self._snapshot_at(parent_fd, name)
            except ActionInputError as exc:
                raise NotDispatched(str(exc)) from exc
            if operation == WRITE_TEXT:
                content = prepared.arguments.get("content")
                if not isinstance(content, str):
                    raise NotDispatched("write_text requires string content")
                data = content.encode("utf-8")
                changed = current["sha256"] != _sha256(data)
                if changed:
                    mode = current["mode"] if current["exists"] else NEW_FILE_MODE
                    self._atomic_write(parent_fd, name, data, mode, idempotency_key)
            else:
                try:
                    os.unlink(name, dir_fd=parent_fd)
                    changed = True
                except FileNotFoundError:
                    changed = False
            after = public_snapshot(self._snapshot_at(parent_fd, name))
        finally:
            os.close(parent_fd)
        return {
            "provider_request_id": idempotency_key,
            "operation": operation,
            "path": relative,
            "changed": changed,
            "after": after,
        }

    def _expected_after(self, prepared: PreparedOperation) -> dict[str, Any]:
        preview = prepared.preview
        if prepared.operation == WRITE_TEXT:
            return {
                "exists": True,
                "sha256": preview["after_sha256"],
                "mode": preview["after_mode"],
            }
        return {"exists": False, "sha256": None, "mode": None}

    def verify(self, prepared: PreparedOperation, receipt: dict[str, Any]) -> Observation:
        """FS-7: exists, sha256 and mode equal the preview's after-state."""
        relative = prepared.arguments["path"]
        observed = self._observe(relative)
        expected = self._expected_after(prepared)
        if isinstance(observed, str):
            return Observation(False, "filesystem path check failed", {"path": relative})
        actual = {key: observed[key] for key in expected}
        ok = actual == expected
        return Observation(
            ok,
            "" if ok else "filesystem postcondition not met",
            {"path": relative, "expected": expected, "observed": observed},
        )

    def compensate(
        self,
        prepared: PreparedOperation,
        execution_receipt: dict[str, Any],
        compensation_key: str,
    ) -> dict[str, Any]:
        """FS-8: restore the before-image, refusing if the file changed after execution."""
        relative = prepared.arguments["path"]
        observed = self._observe(relative)
        expected = self._expected_after(prepared)
        if isinstance(observed, str) or {key: observed[key] for key in expected} != expected:
            raise RuntimeError("refusing compensation because the file changed after execution")
        before = prepared.preconditions
        data = b""
        if before.get("exists"):
            encoded = before.get("content_b64")
            if not isinstance(encoded, str):
                raise RuntimeError("persisted before-image is unavailable")
            data = base64.b64decode(encoded)
            if _sha256(data) != before.get("sha256"):
                raise RuntimeError("persisted before-image is unavailable (digest mismatch)")
        parent_fd, name = self._open_parent(relative)
        try:
            if before.get("exists"):
                self._atomic_write(parent_fd, name, data, int(before["mode"]), compensation_key)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=parent_fd)
            after = public_snapshot(self._snapshot_at(parent_fd, name))
        finally:
            os.close(parent_fd)
        return {"provider_request_id": compensation_key, "path": relative, "after": after}

    def leftovers(
        self, prepared: PreparedOperation, keys: Sequence[str], *, remove: bool
    ) -> list[dict[str, Any]]:
        """Temporary files a crashed write of this operation left beside its target.

        A crash between creating the temporary file and renaming it leaves a
        hidden ``.<name>.<tag>.<random>.aetnaweb-tmp`` in the target folder
        (content the reviewer approved, never the target itself). Only files
        tagged with one of ``keys`` (this operation's idempotency and
        compensation keys) are considered, and with ``remove`` a regular file
        is unlinked; anything else (a link, a folder) is reported and kept.
        """
        relative = prepared.arguments.get("path")
        if not isinstance(relative, str):
            return []
        try:
            parent_fd, name = self._open_parent(self.normalize_path(relative))
        except (ActionInputError, OSError):
            return []  # the folder is gone or no longer safe to open: nothing to sweep
        prefixes = tuple(f".{name[:100]}.{_temp_tag(key)}." for key in keys)
        parent = posixpath.dirname(relative)
        found: list[dict[str, Any]] = []
        try:
            for entry in sorted(os.listdir(parent_fd)):
                if not (entry.startswith(prefixes) and entry.endswith(TEMP_SUFFIX)):
                    continue
                shown = posixpath.join(parent, entry) if parent else entry
                info = os.stat(entry, dir_fd=parent_fd, follow_symlinks=False)
                regular = stat.S_ISREG(info.st_mode)
                removed = False
                if remove and regular:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry, dir_fd=parent_fd)
                        removed = True
                found.append(
                    {
                        "path": shown,
                        "bytes": info.st_size,
                        "removed": removed,
                        "kept_because": None
                        if removed or not remove
                        else ("not a regular file" if not regular else "already gone"),
                    }
                )
            if any(item["removed"] for item in found):
                os.fsync(parent_fd)
        finally:
            os.close(parent_fd)
        return found

    def verify_compensation(
        self, prepared: PreparedOperation, compensation_receipt: dict[str, Any]
    ) -> Observation:
        """FS-9: exists, sha256, kind and mode equal the before-image."""
        relative = prepared.arguments["path"]
        observed = self._observe(relative)
        expected = public_snapshot(prepared.preconditions)
        if isinstance(observed, str):
            return Observation(False, "filesystem path check failed", {"path": relative})
        ok = observed == expected
        return Observation(
            ok,
            "" if ok else "filesystem state was not restored",
            {"path": relative, "expected": expected, "observed": observed},
        )


def _temp_tag(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def describe_prepared(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What a reviewer sees for a prepared filesystem operation: target and a unified diff.

    Computed from the stored payload only (no disk access), so it shows what was
    approved, not what the disk holds now.
    """
    arguments = payload.get("arguments") or {}
    before = payload.get("preconditions") or {}
    path = arguments.get("path", "")
    before_text = ""
    binary = False
    if before.get("content_b64"):
        raw = base64.b64decode(before["content_b64"])
        try:
            before_text = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary = True
    after_text = arguments.get("content", "") if payload.get("operation") == WRITE_TEXT else ""
    if binary:
        diff = f"Binary file {path} (sha256 {before.get('sha256')}) would be replaced\n"
    else:
        diff = "".join(
            difflib.unified_diff(
                before_text.splitlines(keepends=True),
                after_text.splitlines(keepends=True),
                fromfile=f"a/{path}" if before.get("exists") else "/dev/null",
                tofile=f"b/{path}" if payload.get("operation") == WRITE_TEXT else "/dev/null",
            )
        )
    return {"target": path, "diff": diff}
