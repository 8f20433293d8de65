"""What an agent proposes: operations, their evidence, and the guard policy (A3).

These are validated value types. Construction refuses bad input with
:class:`~actions.errors.ActionInputError` (a ``ValueError``), so a proposal
that reaches the engine is already well-formed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actions import formats
from actions.errors import ActionInputError, ActionPolicyViolation
from audit.canonical import digest

_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}", re.ASCII)


@dataclass(frozen=True)
class EvidenceRef:
    """A pointer to something that informed or authorized an operation (EV-1..EV-4)."""

    kind: str
    ref_id: str
    digest: str
    relation: str = formats.INFORMED_BY
    trust_tier: str = formats.DEFAULT_TRUST_TIER
    attested: bool = False

    def __post_init__(self) -> None:
        if self.relation not in formats.RELATIONS:
            raise ActionInputError(
                f"evidence relation must be 'informed_by' or 'authorized_by', not {self.relation!r}"
            )
        for name in ("kind", "ref_id", "digest"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ActionInputError(f"evidence {name} must be a non-empty string")
        if not _SHA256_HEX.fullmatch(self.digest):
            raise ActionInputError(
                "evidence digest must be a SHA-256 hex digest (64 hexadecimal characters)"
            )
        if not isinstance(self.trust_tier, str) or not self.trust_tier:
            raise ActionInputError("evidence trust_tier must be a non-empty string")
        if not isinstance(self.attested, bool):
            raise ActionInputError("evidence attested must be true or false")

    @classmethod
    def from_value(cls, value: EvidenceRef | Mapping[str, Any]) -> EvidenceRef:
        if isinstance(value, EvidenceRef):
            return value
        if not isinstance(value, Mapping):
            raise ActionInputError("each evidence entry must be an object")
        unknown = set(value) - {"kind", "ref_id", "digest", "relation", "trust_tier", "attested"}
        if unknown:
            raise ActionInputError(f"unknown evidence fields: {sorted(unknown)}")
        return cls(
            kind=value.get("kind", ""),
            ref_id=value.get("ref_id", ""),
            digest=value.get("digest", ""),
            relation=value.get("relation", formats.INFORMED_BY),
            trust_tier=value.get("trust_tier", formats.DEFAULT_TRUST_TIER),
            attested=value.get("attested", False),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ref_id": self.ref_id,
            "digest": self.digest,
            "relation": self.relation,
            "trust_tier": self.trust_tier,
            "attested": self.attested,
        }


@dataclass(frozen=True)
class OperationProposal:
    """One proposed operation (OP-1): ``depends_on`` names other operations' keys."""

    key: str
    adapter: str
    operation: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    evidence: tuple[EvidenceRef, ...] = ()
    depends_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("key", "adapter", "operation"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ActionInputError(f"operation {name} must be a non-empty string")
        if not isinstance(self.arguments, Mapping):
            raise ActionInputError(f"operation {self.key!r}: arguments must be an object")
        if not all(isinstance(item, EvidenceRef) for item in self.evidence):
            raise ActionInputError(f"operation {self.key!r}: evidence must be EvidenceRef values")
        if not all(isinstance(item, str) and item for item in self.depends_on):
            raise ActionInputError(f"operation {self.key!r}: depends_on must list operation keys")

    @classmethod
    def from_value(cls, value: OperationProposal | Mapping[str, Any]) -> OperationProposal:
        """Accept the value type or its JSON form (what the API and the command receive)."""
        if isinstance(value, OperationProposal):
            return value
        if not isinstance(value, Mapping):
            raise ActionInputError("each operation must be an object")
        unknown = set(value) - {
            "key",
            "adapter",
            "operation",
            "arguments",
            "evidence",
            "depends_on",
        }
        if unknown:
            raise ActionInputError(f"unknown operation fields: {sorted(unknown)}")
        evidence = value.get("evidence") or ()
        depends_on = value.get("depends_on") or ()
        arguments = value.get("arguments")
        if arguments is None:
            arguments = {}
        if isinstance(evidence, (str, bytes)) or not isinstance(evidence, Sequence):
            raise ActionInputError("operation evidence must be a list")
        if isinstance(depends_on, (str, bytes)) or not isinstance(depends_on, Sequence):
            raise ActionInputError("operation depends_on must be a list of keys")
        return cls(
            key=value.get("key", ""),
            adapter=value.get("adapter", ""),
            operation=value.get("operation", ""),
            arguments=arguments,
            evidence=tuple(EvidenceRef.from_value(item) for item in evidence),
            depends_on=tuple(depends_on),
        )


@dataclass(frozen=True)
class GuardPolicy:
    """PO-1: which evidence may authorize a mutation."""

    trusted_tiers: frozenset[str] = frozenset({"trusted_user", "user_confirmed"})
    require_attested_authority: bool = True
    require_authority_in_enforce: bool = True

    @property
    def policy_hash(self) -> str:
        """PO-1, byte-identical to the published ``GuardPolicy.digest``.

        The published policy (aetnamem ``aetnamem/actions/policy.py``) hashes
        the keys ``trusted_authority_tiers``, ``require_attested_authority``
        and ``require_authority_for_enforce``; our attribute names differ, the
        hashed names must not. The published tiers are a tuple in declared
        order; ours are a set, so they are hashed sorted, which is the
        published default order ("trusted_user", "user_confirmed").
        """
        return digest(
            {
                "trusted_authority_tiers": sorted(self.trusted_tiers),
                "require_attested_authority": self.require_attested_authority,
                "require_authority_for_enforce": self.require_authority_in_enforce,
            }
        )

    def check(
        self, *, mode: str, key: str, effect_class: str, evidence: Sequence[EvidenceRef]
    ) -> None:
        """PO-2, in order; raise :class:`ActionPolicyViolation` on the first failure."""
        if effect_class == formats.UNKNOWN_BLOCKED:
            raise ActionPolicyViolation(f"operation {key!r}: unknown effects fail closed")
        authority = [item for item in evidence if item.relation == formats.AUTHORIZED_BY]
        for item in authority:
            if item.trust_tier not in self.trusted_tiers:
                raise ActionPolicyViolation(
                    f"operation {key!r}: evidence {item.kind}:{item.ref_id} with trust tier "
                    f"{item.trust_tier!r} may inform but cannot authorize an action"
                )
        if self.require_attested_authority:
            for item in authority:
                if not item.attested:
                    raise ActionPolicyViolation(
                        f"operation {key!r}: authorizing evidence {item.kind}:{item.ref_id} "
                        "is not host-attested"
                    )
        if (
            mode == formats.MODE_ENFORCE
            and self.require_authority_in_enforce
            and effect_class != formats.READ_ONLY
            and not authority
        ):
            raise ActionPolicyViolation(
                f"operation {key!r}: enforced mutations require authorized_by evidence "
                "(informed_by evidence is not enough)"
            )


DEFAULT_POLICY = GuardPolicy()
