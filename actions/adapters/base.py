"""The adapter protocol: how the engine talks to the world.

An adapter turns a proposal into an exact, hashable prepared operation and
then, on commit, rechecks the world, performs the effect, verifies it, and can
undo it and verify the undo. The engine records its intent before every
effect and never retries an ambiguous one, so an adapter only has to be
honest about what it observed:

- ``prepare`` reads the world (the before-image) and raises ``ValueError`` on
  bad input; it never changes anything.
- ``revalidate`` says whether the preconditions still hold.
- ``execute`` performs the effect. If it *knows* nothing happened (bad path,
  missing parent, unknown operation) it raises :class:`~actions.errors.NotDispatched`;
  any other exception is treated as an unknown outcome (``uncertain``).
- ``verify`` / ``verify_compensation`` observe the world after the fact.
- ``compensate`` undoes a verified effect; it must refuse (raise) rather than
  overwrite a change someone else made after execution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from actions.errors import ActionInputError
from actions.proposals import OperationProposal
from audit.canonical import digest


@dataclass(frozen=True)
class PreparationContext:
    """What ``prepare`` is told about the plan it is part of (P-4)."""

    transaction_id: str
    operation_id: str
    subject_id: str
    actor_id: str


@dataclass(frozen=True)
class PreparedOperation:
    """The exact operation the reviewer approves; stored as the ``prepared`` payload.

    ``arguments`` are normalized (e.g. a relative path made canonical),
    ``preview`` is what a reviewer is shown, ``preconditions`` include the
    before-image, and ``sensitive_fields`` name arguments that hold content.
    """

    adapter: str
    operation: str
    arguments: dict[str, Any]
    preview: dict[str, Any]
    preconditions: dict[str, Any]
    effect_class: str
    sensitive_fields: tuple[str, ...] = ()

    def as_payload(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "operation": self.operation,
            "arguments": self.arguments,
            "preview": self.preview,
            "preconditions": self.preconditions,
            "effect_class": self.effect_class,
            "sensitive_fields": list(self.sensitive_fields),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> PreparedOperation:
        try:
            return cls(
                adapter=payload["adapter"],
                operation=payload["operation"],
                arguments=dict(payload["arguments"]),
                preview=dict(payload["preview"]),
                preconditions=dict(payload["preconditions"]),
                effect_class=payload["effect_class"],
                sensitive_fields=tuple(payload.get("sensitive_fields", ())),
            )
        except (KeyError, TypeError) as exc:
            raise ActionInputError(f"stored prepared payload is malformed: missing {exc}") from exc


@dataclass(frozen=True)
class Observation:
    """What an adapter saw: ``ok`` plus details that are digested, never audited in clear."""

    ok: bool
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest({"ok": self.ok, "reason": self.reason, "details": self.details})


@runtime_checkable
class ActionAdapter(Protocol):
    name: str

    def manifest(self) -> dict[str, Any]:
        """A description whose digest is recorded at staging; any change is drift (CM-5)."""
        ...

    def prepare(
        self, proposal: OperationProposal, context: PreparationContext
    ) -> PreparedOperation: ...

    def revalidate(self, prepared: PreparedOperation) -> Observation: ...

    def execute(self, prepared: PreparedOperation, idempotency_key: str) -> dict[str, Any]: ...

    def verify(self, prepared: PreparedOperation, receipt: dict[str, Any]) -> Observation: ...

    def compensate(
        self,
        prepared: PreparedOperation,
        execution_receipt: dict[str, Any],
        compensation_key: str,
    ) -> dict[str, Any]: ...

    def verify_compensation(
        self, prepared: PreparedOperation, compensation_receipt: dict[str, Any]
    ) -> Observation: ...
