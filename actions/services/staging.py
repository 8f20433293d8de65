"""Stage (A4): record an exact, hashed world patch after every operation prepares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction as db_transaction

from actions import formats
from actions.adapters import (
    ActionAdapter,
    PreparationContext,
    PreparedOperation,
    get_adapter,
)
from actions.errors import (
    ActionError,
    ActionInputError,
    ActionPolicyViolation,
)
from actions.models import (
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionTransaction,
)
from actions.proposals import DEFAULT_POLICY, GuardPolicy, OperationProposal
from actions.selectors import resolve_authority
from actions.services._ledger import (
    _actor_label,
    _context_value,
    _event,
    _store_payload,
    _turn_value,
)
from actions.services.results import WorldPatch
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import CanonicalJSONError, digest
from audit.chain import utc_now_iso


def _order_by_dependencies(proposals: list[OperationProposal]) -> list[OperationProposal]:
    """P-2: a stable topological sort; caller order wherever dependencies allow."""
    remaining = list(proposals)
    placed: set[str] = set()
    ordered: list[OperationProposal] = []
    while remaining:
        for index, proposal in enumerate(remaining):
            if all(dep in placed for dep in proposal.depends_on):
                ordered.append(proposal)
                placed.add(proposal.key)
                del remaining[index]
                break
        else:
            raise ActionInputError(
                "the dependency graph contains a cycle and cannot be ordered: "
                f"{[proposal.key for proposal in remaining]}"
            )
    return ordered


def _parse_operations(operations: Any) -> list[OperationProposal]:
    if isinstance(operations, (str, bytes, Mapping)) or not isinstance(operations, Iterable):
        raise ActionInputError("operations must be a list of operation objects")
    proposals = [OperationProposal.from_value(item) for item in operations]
    if not proposals:
        raise ActionInputError("a world patch needs at least one operation")
    keys = [proposal.key for proposal in proposals]
    duplicated = sorted({key for key in keys if keys.count(key) > 1})
    if duplicated:
        raise ActionInputError(f"operation keys must be unique; duplicated: {duplicated}")
    unknown = sorted({dep for p in proposals for dep in p.depends_on} - set(keys))
    if unknown:
        raise ActionInputError(f"unknown operation dependencies: {unknown}")
    return _order_by_dependencies(proposals)


def _require_resolved_authority(subject: Any, proposal: OperationProposal) -> None:
    """Enforce mode: every ``authorized_by`` item must resolve to stored memory, or nothing is staged.

    A claimed trust tier and ``attested`` flag alone are only the agent's word;
    the approver must be shown a message or record that really says it.
    Observe and preview keep unresolved claims, shown as unverified.
    """
    for item in proposal.evidence:
        if item.relation != formats.AUTHORIZED_BY:
            continue
        authority = resolve_authority(
            subject,
            kind=item.kind,
            ref_id=item.ref_id,
            digest_value=item.digest,
            trust_tier=item.trust_tier,
        )
        if not authority.resolved:
            raise ActionPolicyViolation(
                f"operation {proposal.key!r}: authorizing evidence {item.kind}:{item.ref_id} "
                f"does not resolve: {authority.summary}"
            )


@dataclass(frozen=True, slots=True)
class _PreparedStep:
    """One operation after its adapter prepared it: what is written and what is hashed."""

    proposal: OperationProposal
    prepared: PreparedOperation
    hashed: dict[str, Any]
    digests: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Plan:
    """Everything a plan's rows and its ``action.proposed`` event are written from."""

    subject: Scope
    actor_id: str
    mode: str
    state: str
    policy_hash: str
    plan_hash: str
    body: dict[str, Any]
    steps: list[_PreparedStep]
    session_id: str | None
    turn_id: str | None
    created_at: str


@storable_text_arguments
def stage(
    *,
    scope: Any,
    operations: Any,
    mode: str = formats.MODE_ENFORCE,
    session_id: str | None = None,
    turn_id: str | int | None = None,
    principal: Principal,
    actor: str | None = None,
    policy: GuardPolicy | None = None,
) -> WorldPatch:
    """Record an exact, hashed plan; nothing is written unless every operation prepares and passes policy.

    Enforce mode waits for approval; observe and preview are recorded as
    ``staged`` and can never execute. Observe records the patch and its
    evidence only; preview and enforce also keep each adapter's prepared
    payload (the content and before-image the reviewer's diff is built from).
    Returns the WorldPatch (P-10).
    """
    subject = access.require(principal, access.STAGE, scope)
    actor_id = _actor_label(principal, actor, "agent")
    _require_staging_mode(mode)
    ordered = _parse_operations(operations)
    session_value = _context_value("session_id", session_id)
    turn_value = _turn_value(turn_id)
    policy = policy or DEFAULT_POLICY

    # P-3: IDs exist before any adapter is called.
    transaction_id = formats.new_transaction_id()
    steps = _prepare_steps(
        ordered,
        transaction_id=transaction_id,
        subject=subject,
        actor_id=actor_id,
        mode=mode,
        policy=policy,
    )
    plan = _hashed_plan(
        transaction_id,
        subject=subject,
        actor_id=actor_id,
        mode=mode,
        policy=policy,
        steps=steps,
        session_id=session_value,
        turn_id=turn_value,
    )
    _record_plan(plan, principal)
    return WorldPatch(
        transaction_id=transaction_id,
        subject_id=str(subject),
        mode=mode,
        state=plan.state,
        plan_version=formats.PLAN_VERSION,
        plan_hash=plan.plan_hash,
        operations=tuple(plan.body["operations"]),
        created_at=plan.created_at,
    )


def _require_staging_mode(mode: str) -> None:
    if mode not in formats.MODES:
        raise ActionInputError(f"unknown mode {mode!r}; use one of {', '.join(formats.MODES)}")
    if mode == formats.MODE_OFF:
        raise ActionInputError("guarded actions are disabled in off mode")


def _hashed_plan(
    transaction_id: str,
    *,
    subject: Scope,
    actor_id: str,
    mode: str,
    policy: GuardPolicy,
    steps: list[_PreparedStep],
    session_id: str | None,
    turn_id: str | None,
) -> _Plan:
    """The world-patch body (F-1) of the prepared steps, its hash, and what is recorded with it."""
    body = formats.plan_body(
        transaction_id=transaction_id,
        subject_id=str(subject),
        actor_id=actor_id,
        mode=mode,
        plan_version=formats.PLAN_VERSION,
        policy_hash=policy.policy_hash,
        operations=[step.hashed for step in steps],
    )
    return _Plan(
        subject=subject,
        actor_id=actor_id,
        mode=mode,
        state=formats.AWAITING_APPROVAL if mode == formats.MODE_ENFORCE else formats.STAGED,
        policy_hash=policy.policy_hash,
        plan_hash=formats.plan_hash(body),
        body=body,
        steps=steps,
        session_id=session_id,
        turn_id=turn_id,
        created_at=utc_now_iso(),
    )


def _prepare_steps(
    ordered: list[OperationProposal],
    *,
    transaction_id: str,
    subject: Scope,
    actor_id: str,
    mode: str,
    policy: GuardPolicy,
) -> list[_PreparedStep]:
    """Every operation prepared, checked and hashed, in dependency order (P-3: IDs first)."""
    operation_ids = {proposal.key: formats.new_operation_id() for proposal in ordered}
    return [
        _prepare_step(
            proposal,
            ordinal=ordinal,
            operation_ids=operation_ids,
            context=PreparationContext(
                transaction_id=transaction_id,
                operation_id=operation_ids[proposal.key],
                subject_id=str(subject),
                actor_id=actor_id,
            ),
            subject=subject,
            mode=mode,
            policy=policy,
        )
        for ordinal, proposal in enumerate(ordered)
    ]


def _prepare_step(
    proposal: OperationProposal,
    *,
    ordinal: int,
    operation_ids: dict[str, str],
    context: PreparationContext,
    subject: Scope,
    mode: str,
    policy: GuardPolicy,
) -> _PreparedStep:
    """Let the adapter prepare one operation, check it against policy, and hash it (P-4)."""
    adapter = get_adapter(proposal.adapter)
    prepared = _prepared_by(adapter, proposal, context)
    policy.check(
        mode=mode,
        key=proposal.key,
        effect_class=prepared.effect_class,
        evidence=proposal.evidence,
    )
    if mode == formats.MODE_ENFORCE:
        _require_resolved_authority(subject, proposal)
    try:
        digests = {
            "manifest_digest": digest(adapter.manifest()),
            "arguments_digest": digest(prepared.arguments),
            "preview_digest": digest(prepared.preview),
            "precondition_digest": digest(prepared.preconditions),
        }
    except CanonicalJSONError as exc:
        raise ActionInputError(f"operation {proposal.key!r}: {exc}") from exc
    hashed = formats.plan_operation(
        operation_id=operation_ids[proposal.key],
        key=proposal.key,
        ordinal=ordinal,
        adapter=proposal.adapter,
        operation=proposal.operation,
        effect_class=prepared.effect_class,
        depends_on=[operation_ids[dep] for dep in set(proposal.depends_on)],
        evidence=[item.as_dict() for item in proposal.evidence],
        **digests,
    )
    return _PreparedStep(proposal=proposal, prepared=prepared, hashed=hashed, digests=digests)


def _prepared_by(
    adapter: ActionAdapter, proposal: OperationProposal, context: PreparationContext
) -> PreparedOperation:
    """The adapter's prepared operation, refused unless it is the one proposed."""
    try:
        prepared = adapter.prepare(proposal, context)
    except ActionError:
        raise
    except OSError as exc:
        raise ActionInputError(
            f"operation {proposal.key!r}: the {proposal.adapter} adapter could not read "
            f"its target: {exc.strerror or exc}"
        ) from exc
    if prepared.adapter != proposal.adapter or prepared.operation != proposal.operation:
        raise ActionInputError(
            f"operation {proposal.key!r}: mismatched prepared operation "
            f"{prepared.adapter}.{prepared.operation}"
        )
    if prepared.effect_class not in formats.EFFECT_CLASSES:
        raise ActionInputError(
            f"operation {proposal.key!r}: unknown effect class {prepared.effect_class!r}"
        )
    return prepared


@db_transaction.atomic
def _record_plan(plan: _Plan, principal: Principal) -> None:
    """Write the transaction, its operations, links, evidence and payloads, then ``action.proposed``."""
    transaction_id = plan.body["transaction_id"]
    txn = ActionTransaction.objects.create(
        id=transaction_id,
        subject_id=str(plan.subject),
        scope_tenant=plan.subject.tenant,
        scope_user=plan.subject.user,
        scope_project=plan.subject.project,
        actor_id=plan.actor_id,
        proposer_kind=principal.kind,
        # The person accountable for the proposal: the operator, or the agent token's owner.
        proposed_by_user_id=principal.owner_id if principal.is_token else principal.user_id,
        proposed_by_token_id=principal.token_id,
        mode=plan.mode,
        state=plan.state,
        plan_version=formats.PLAN_VERSION,
        plan_hash=plan.plan_hash,
        policy_hash=plan.policy_hash,
        session_id=plan.session_id,
        turn_id=plan.turn_id,
        created_at=plan.created_at,
        updated_at=plan.created_at,
    )
    for step in plan.steps:
        _record_operation(txn, step, plan.created_at)
    evidence_rows: list[dict[str, Any]] = []
    for step in plan.steps:
        evidence_rows.extend(_record_links_and_evidence(txn, step, plan.mode))
    _event(
        txn,
        "action.proposed",
        plan.actor_id,
        {
            "transaction_id": transaction_id,
            "format": formats.WORLD_PATCH_FORMAT,
            "mode": plan.mode,
            "state": plan.state,
            "plan_hash": plan.plan_hash,
            "policy_hash": plan.policy_hash,
            "operations": [
                {key: value for key, value in hashed.items() if key != "evidence"}
                for hashed in plan.body["operations"]
            ],
            "evidence": evidence_rows,
        },
        session_id=plan.session_id,
        turn_id=plan.turn_id,
    )


def _record_operation(txn: ActionTransaction, step: _PreparedStep, now: str) -> None:
    """One ``action_operation`` row with its idempotency and compensation keys (P-6)."""
    operation_id = step.hashed["id"]
    key = formats.idempotency_key(
        transaction_id=txn.id,
        operation_id=operation_id,
        adapter=step.proposal.adapter,
        operation=step.proposal.operation,
        arguments_digest=step.digests["arguments_digest"],
    )
    ActionOperation.objects.create(
        id=operation_id,
        transaction=txn,
        operation_key=step.proposal.key,
        ordinal=step.hashed["ordinal"],
        adapter=step.proposal.adapter,
        operation=step.proposal.operation,
        effect_class=step.prepared.effect_class,
        idempotency_key=key,
        compensation_key=key + ":compensate",
        state=formats.OP_STAGED,
        selected=True,
        created_at=now,
        updated_at=now,
        **step.digests,
    )


def _record_links_and_evidence(
    txn: ActionTransaction, step: _PreparedStep, mode: str
) -> list[dict[str, Any]]:
    """An operation's dependency links, evidence rows and (outside observe) prepared payload.

    Returns the evidence rows as the ``action.proposed`` event lists them.
    """
    operation_id = step.hashed["id"]
    for depends_on in step.hashed["depends_on"]:
        ActionDependency.objects.create(
            operation_id=operation_id, depends_on_operation_id=depends_on
        )
    rows: list[dict[str, Any]] = []
    for item in step.proposal.evidence:
        evidence_id = formats.new_evidence_id()
        ActionEvidence.objects.create(
            id=evidence_id,
            transaction_id=txn.id,
            operation_id=operation_id,
            evidence_kind=item.kind,
            ref_id=item.ref_id,
            digest=item.digest,
            relation=item.relation,
            trust_tier=item.trust_tier,
            attested=item.attested,
        )
        rows.append({"id": evidence_id, "operation_id": operation_id, **item.as_dict()})
    if mode != formats.MODE_OBSERVE:
        _store_payload(txn, operation_id, formats.PAYLOAD_PREPARED, step.prepared.as_payload())
    return rows
