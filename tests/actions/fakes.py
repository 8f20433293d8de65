"""Test adapters: a scripted key-value adapter and a lying filesystem compensator.

The scripted adapter keeps its world in ``<root>/kv.json`` and reads its
script from ``<root>/script.json`` on every call, so a test (or a child
process in the crash tests) steers it by writing one file:

- ``{"revalidate": "raise" | "fail" | "fail_after:N" | "barrier:N"}``
- ``{"execute": "raise" | "not_dispatched" | "keyboard" | "block"}``
- ``{"verify": "raise" | "fail"}``
- ``{"compensate": "noop" | "raise"}``

Every real execution appends a line to ``<root>/executions.log``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from actions.adapters import (
    FilesystemAdapter,
    Observation,
    PreparationContext,
    PreparedOperation,
    register_adapter,
)
from actions.errors import ActionInputError, NotDispatched
from actions.proposals import OperationProposal

WAIT_SECONDS = 60


class ScriptedAdapter:
    name = "scripted"
    version = "1"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    # -- the little world -------------------------------------------------------
    @property
    def store(self) -> Path:
        return self.root / "kv.json"

    def read(self) -> dict[str, Any]:
        return json.loads(self.store.read_text()) if self.store.exists() else {}

    def write(self, data: dict[str, Any]) -> None:
        self.store.write_text(json.dumps(data, sort_keys=True))

    def script(self) -> dict[str, str]:
        path = self.root / "script.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _wait_for(self, condition) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("scripted adapter waited too long")
            time.sleep(0.02)

    # -- the protocol -------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        return {"adapter": self.name, "version": self.version, "operations": ["set"]}

    def prepare(
        self, proposal: OperationProposal, context: PreparationContext
    ) -> PreparedOperation:
        if proposal.operation != "set":
            raise ActionInputError("scripted adapter only knows 'set'")
        key = proposal.arguments.get("key")
        value = proposal.arguments.get("value")
        effect_class = proposal.arguments.get("effect_class", "verified_compensatable")
        before = self.read().get(key)
        return PreparedOperation(
            adapter=self.name,
            operation="set",
            arguments={"key": key, "value": value},
            preview={"key": key, "before": before, "after": value},
            preconditions={"key": key, "before": before},
            effect_class=effect_class,
            sensitive_fields=("value",),
        )

    def revalidate(self, prepared: PreparedOperation) -> Observation:
        rule = self.script().get("revalidate", "")
        if rule == "raise":
            raise RuntimeError("revalidate exploded")
        if rule == "fail":
            return Observation(False, "scripted precondition changed", {})
        if rule.startswith("fail_after:"):
            counter = self.root / "revalidate.count"
            calls = int(counter.read_text()) + 1 if counter.exists() else 1
            counter.write_text(str(calls))
            if calls > int(rule.split(":")[1]):
                return Observation(False, "scripted precondition changed late", {})
        if rule.startswith("barrier:"):
            wanted = int(rule.split(":")[1])
            (self.root / f"ready-{os.getpid()}").write_text("ready")
            self._wait_for(lambda: len(list(self.root.glob("ready-*"))) >= wanted)
        current = self.read().get(prepared.arguments["key"])
        ok = current == prepared.preconditions["before"]
        return Observation(ok, "" if ok else "value changed", {"current": current})

    def execute(self, prepared: PreparedOperation, idempotency_key: str) -> dict[str, Any]:
        rule = self.script().get("execute", "")
        if rule == "raise":
            raise RuntimeError("execute exploded: secret-ish detail")
        if rule == "not_dispatched":
            raise NotDispatched("scripted: nothing was sent")
        if rule == "keyboard":
            raise KeyboardInterrupt
        if rule == "block":
            (self.root / "executing.marker").write_text(str(os.getpid()))
            self._wait_for(lambda: (self.root / "release").exists())
        data = self.read()
        data[prepared.arguments["key"]] = prepared.arguments["value"]
        self.write(data)
        with (self.root / "executions.log").open("a") as log:
            log.write(f"{os.getpid()} {idempotency_key}\n")
        return {"provider_request_id": idempotency_key, "key": prepared.arguments["key"]}

    def verify(self, prepared: PreparedOperation, receipt: dict[str, Any]) -> Observation:
        rule = self.script().get("verify", "")
        if rule == "raise":
            raise RuntimeError("verify exploded")
        if rule == "fail":
            return Observation(False, "scripted postcondition failed", {})
        current = self.read().get(prepared.arguments["key"])
        return Observation(current == prepared.arguments["value"], "", {"current": current})

    def compensate(
        self, prepared: PreparedOperation, execution_receipt: dict[str, Any], key: str
    ) -> dict[str, Any]:
        rule = self.script().get("compensate", "")
        if rule == "raise":
            raise RuntimeError("compensate exploded")
        if rule == "noop":
            return {"restored": True}
        data = self.read()
        before = prepared.preconditions["before"]
        if before is None:
            data.pop(prepared.arguments["key"], None)
        else:
            data[prepared.arguments["key"]] = before
        self.write(data)
        return {"restored": True, "provider_request_id": key}

    def verify_compensation(
        self, prepared: PreparedOperation, compensation_receipt: dict[str, Any]
    ) -> Observation:
        current = self.read().get(prepared.arguments["key"])
        return Observation(current == prepared.preconditions["before"], "", {"current": current})


class LyingFilesystemAdapter(FilesystemAdapter):
    """Claims to compensate without touching the disk (T-12): verification must catch it."""

    def compensate(self, prepared, execution_receipt, compensation_key):  # type: ignore[override]
        return {"provider_request_id": compensation_key, "restored": True}


class DriftedFilesystemAdapter(FilesystemAdapter):
    """Same adapter, new manifest version (T-7)."""

    version = "2"


class RaisingVerifyFilesystemAdapter(FilesystemAdapter):
    def verify(self, prepared, receipt):  # type: ignore[override]
        raise OSError("disk went away while verifying")


class RaisingRevalidateFilesystemAdapter(FilesystemAdapter):
    """Revalidate works in the pre-flight pass, then raises inside the loop (decision 1)."""

    calls = 0

    def revalidate(self, prepared):  # type: ignore[override]
        type(self).calls += 1
        if type(self).calls > 1:
            raise OSError("stat failed")
        return super().revalidate(prepared)


def register_scripted(root: str | os.PathLike[str]) -> None:
    """Used by child processes, which cannot share the parent's registry."""
    register_adapter("scripted", lambda: ScriptedAdapter(root))


def set_script(root: Path, **rules: str) -> None:
    (root / "script.json").write_text(json.dumps(rules))


def scripted_op(key: str, value: Any, *, op_key: str = "s1", depends_on=(), **arguments) -> dict:
    from tests.actions.conftest import authority_evidence

    return {
        "key": op_key,
        "adapter": "scripted",
        "operation": "set",
        "arguments": {"key": key, "value": value, **arguments},
        "evidence": [authority_evidence()],
        "depends_on": list(depends_on),
    }
