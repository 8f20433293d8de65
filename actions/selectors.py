"""Every read of guarded actions the outside uses, with visibility built in.

A selector never returns a transaction the principal may not see: lists are
filtered with :func:`aetnaweb.access.scope_q` on the scope columns (exact
equalities, never a prefix match), and a single transaction out of reach
raises :class:`~aetnaweb.access.AccessDenied` (a 404 to views and the API).
Lists are paginated by key (``created_at``, ``id``), never by OFFSET.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Count, Q

from actions import formats
from actions.adapters import describe
from actions.approvals import configured_authority
from actions.details import (
    ApprovalDetail,
    AttemptDetail,
    DetailPermissions,
    OperationDetail,
    ResolutionDetail,
    TransactionDetail,
)
from actions.errors import ActionError
from actions.limits import MAX_PAGE
from actions.models import (
    ActionApproval,
    ActionAttempt,
    ActionDependency,
    ActionEvidence,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionResolution,
    ActionTransaction,
)
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from audit.canonical import digest, sha256_text
from memory.models import Episode, Record, SourceType, Status, TrustTier

ATTENTION_STATES = formats.ATTENTION_STATES
PREPARED = formats.PAYLOAD_PREPARED


@dataclass(frozen=True)
class TransactionPage:
    """One page of transactions, newest first; pass ``next_after`` back as ``after``."""

    items: list[dict[str, Any]] = field(default_factory=list)
    next_after: str | None = None


def _visible(principal: Principal, capability: str = access.READ) -> Q:
    return access.scope_q(principal, capability, prefix="scope_", canonical_field="subject_id")


def _summary(txn: ActionTransaction, principal: Principal | None = None) -> dict[str, Any]:
    item = txn.as_dict()
    item["is_terminal"] = txn.is_terminal
    if principal is not None:
        item["self_proposed"] = txn.proposed_by(principal)
    return item


VERBS = {"write_text": "write", "delete_file": "delete"}


def _one_line(ops: list[tuple[str, str, str | None]]) -> str:
    """ "write RELEASE_NOTES.md in demo/apollo": what a plan does, as a pull request title.

    ``ops`` are (adapter, operation, path or None when the payload was purged).
    """
    if not ops:
        return "an empty plan"
    if any(adapter != "filesystem" for adapter, _, _ in ops):
        kinds = sorted({f"{adapter}.{operation}" for adapter, operation, _ in ops})
        count = f"{len(ops)} operations" if len(ops) > 1 else "1 operation"
        return f"{count}: {', '.join(kinds)}"
    folders = {path.rpartition("/")[0] for _, _, path in ops if path is not None}
    where = ""
    if len(folders) == 1 and None not in {path for _, _, path in ops}:
        folder = folders.pop()
        where = f" in {folder}" if folder else " at the root"
    elif len(folders) > 1:
        where = f" in {len(folders)} folders"
    if len(ops) == 1:
        _, operation, path = ops[0]
        verb = VERBS.get(operation, operation)
        name = path.rpartition("/")[2] if path else "a file (payload purged)"
        return f"{verb} {name}{where}"
    counts: dict[str, int] = {}
    for _, operation, _ in ops:
        verb = VERBS.get(operation, operation)
        counts[verb] = counts.get(verb, 0) + 1
    parts = [f"{verb} {n} file{'s' if n != 1 else ''}" for verb, n in counts.items()]
    return " and ".join(parts) + where


def _payload_path(row: ActionPayload | None) -> str | None:
    if row is None or row.purged_at:
        return None
    try:
        path = (json.loads(row.payload).get("arguments") or {}).get("path")
    except (ValueError, AttributeError):
        return None
    return path if isinstance(path, str) and path else None


def plan_summaries(transaction_ids: list[str]) -> dict[str, str]:
    """A one-line summary per transaction (two queries for any number of them)."""
    if not transaction_ids:
        return {}
    ops: dict[str, list[ActionOperation]] = defaultdict(list)
    for op in ActionOperation.objects.filter(transaction_id__in=transaction_ids).order_by(
        "transaction_id", "ordinal"
    ):
        ops[op.transaction_id].append(op)
    paths: dict[str, str] = {}
    for operation_id, text, purged_at in ActionPayload.objects.filter(
        transaction_id__in=transaction_ids, kind=formats.PAYLOAD_PREPARED
    ).values_list("operation_id", "payload", "purged_at"):
        if purged_at:
            continue
        try:
            path = (json.loads(text).get("arguments") or {}).get("path")
        except (ValueError, AttributeError):
            continue
        if isinstance(path, str) and path:
            paths[operation_id] = path
    return {
        txn_id: _one_line([(op.adapter, op.operation, paths.get(op.id)) for op in ops[txn_id]])
        for txn_id in transaction_ids
    }


def _with_summaries(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    summaries = plan_summaries([item["transaction_id"] for item in items])
    for item in items:
        item["summary"] = summaries.get(item["transaction_id"], "")
    return items


def list_transactions(
    principal: Principal,
    *,
    scope: Any = None,
    states: Iterable[str] | None = None,
    after: str | None = None,
    limit: int = 50,
    proposer: str | None = None,
    adapter: str | None = None,
    created_from: date | None = None,
    created_until: date | None = None,
) -> TransactionPage:
    """Visible transactions, newest first, optionally within a scope subtree and some states,
    by one proposer (any letter case), using one adapter, created within UTC days
    (``created_until`` inclusive).

    ``after`` is the ``next_after`` of the previous page (a transaction ID).
    """
    limit = max(1, min(int(limit), MAX_PAGE))
    query = ActionTransaction.objects.filter(_visible(principal))
    if proposer:
        query = query.filter(actor_id__iexact=proposer)
    if adapter:
        query = query.filter(
            id__in=ActionOperation.objects.filter(adapter=adapter).values("transaction_id")
        )
    # created_at is ISO-8601 UTC text (C-2): a day's bounds compare as text.
    if created_from is not None:
        query = query.filter(created_at__gte=created_from.isoformat())
    if created_until is not None:
        query = query.filter(created_at__lt=(created_until + timedelta(days=1)).isoformat())
    if scope is not None:
        query = query.filter(**Scope.parse(scope).subtree_filter("scope_"))
    if states is not None:
        wanted = [state for state in states if state in formats.TRANSACTION_STATES]
        query = query.filter(state__in=wanted)
    if after:
        anchor = (
            ActionTransaction.objects.filter(pk=after).values_list("created_at", flat=True).first()
        )
        if anchor is None:
            return TransactionPage()
        query = query.filter(Q(created_at__lt=anchor) | Q(created_at=anchor, id__lt=after))
    rows = list(query.order_by("-created_at", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return TransactionPage(
        items=_with_summaries([_summary(txn, principal) for txn in rows]),
        next_after=rows[-1].id if more and rows else None,
    )


def _payloads(transaction_id: str) -> dict[tuple[str, str], ActionPayload]:
    return {
        (row.operation_id, row.kind): row
        for row in ActionPayload.objects.filter(transaction_id=transaction_id)
    }


def _operation_view(
    op: ActionOperation,
    payloads: dict[tuple[str, str], ActionPayload],
    depends_on: list[str],
    evidence: list[dict[str, Any]],
) -> OperationDetail:
    prepared_row = payloads.get((op.id, formats.PAYLOAD_PREPARED))
    preview: dict[str, Any] | None = None
    description: dict[str, Any] = {"target": "", "diff": ""}
    payload_state = "absent"
    # Whether the content shown (diff, preview) is exactly what the plan hash binds:
    # the stored payload re-digests to the operation's hashed digests.
    payload_bound: bool | None = None
    if prepared_row is not None:
        payload_state = "purged" if prepared_row.purged_at else "kept"
        if not prepared_row.purged_at:
            prepared = json.loads(prepared_row.payload)
            preview = prepared.get("preview")
            description = describe(op.adapter, prepared)
            payload_bound = (
                digest(prepared.get("arguments")) == op.arguments_digest
                and digest(prepared.get("preview")) == op.preview_digest
                and digest(prepared.get("preconditions")) == op.precondition_digest
            )
    return OperationDetail(
        operation_id=op.id,
        key=op.operation_key,
        ordinal=op.ordinal,
        adapter=op.adapter,
        operation=op.operation,
        effect_class=op.effect_class,
        state=op.state,
        arguments_digest=op.arguments_digest,
        preview_digest=op.preview_digest,
        precondition_digest=op.precondition_digest,
        manifest_digest=op.manifest_digest,
        idempotency_key=op.idempotency_key,
        result_digest=op.result_digest,
        compensation_digest=op.compensation_digest,
        depends_on=tuple(depends_on),
        preview=preview,
        target=description["target"],
        diff=description["diff"],
        payload=payload_state,
        payload_bound=payload_bound,
        authorized_by=tuple(e for e in evidence if e["relation"] == formats.AUTHORIZED_BY),
        informed_by=tuple(e for e in evidence if e["relation"] == formats.INFORMED_BY),
    )


def _evidence_item(row: ActionEvidence) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.evidence_kind,
        "ref_id": row.ref_id,
        "digest": row.digest,
        "relation": row.relation,
        "trust_tier": row.trust_tier,
        "attested": row.attested,
    }


def _plan_body(txn: ActionTransaction, op_views: list[OperationDetail]) -> dict[str, Any]:
    """The exact world-patch body (F-1) rebuilt from the rows already loaded for the page."""
    return formats.plan_body(
        transaction_id=txn.id,
        subject_id=txn.subject_id,
        actor_id=txn.actor_id,
        mode=txn.mode,
        plan_version=txn.plan_version,
        policy_hash=txn.policy_hash,
        operations=[
            formats.plan_operation(
                operation_id=op.operation_id,
                key=op.key,
                ordinal=op.ordinal,
                adapter=op.adapter,
                operation=op.operation,
                effect_class=op.effect_class,
                arguments_digest=op.arguments_digest,
                preview_digest=op.preview_digest,
                precondition_digest=op.precondition_digest,
                manifest_digest=op.manifest_digest,
                depends_on=list(op.depends_on),
                evidence=[*op.authorized_by, *op.informed_by],
            )
            for op in op_views
        ],
    )


def visible_transaction(
    principal: Principal, transaction_id: str, capability: str = access.READ
) -> dict[str, Any]:
    """One transaction's summary if ``principal`` holds ``capability`` on its scope, else ``AccessDenied``.

    One query; for views that must refuse (404) before touching a service.
    """
    txn = ActionTransaction.objects.filter(pk=transaction_id).first()
    if txn is None or not access.may(principal, capability, txn.subject_id):
        raise access.AccessDenied(f"no guarded-action transaction {transaction_id!r} for you")
    return _summary(txn, principal)


def transaction_detail(principal: Principal, transaction_id: str) -> TransactionDetail:
    """Everything a reviewer needs about one transaction, or ``AccessDenied`` (404).

    Operations carry their preview and, for a file write whose payload is
    kept, a unified diff of the approved before/after text, and whether that
    payload re-digests to the hashed plan (``payload_bound``). ``plan`` is the
    exact hashed world-patch body and ``plan_matches_hash`` says it hashes to
    the stored plan hash.
    """
    txn = ActionTransaction.objects.filter(pk=transaction_id).first()
    if txn is None or not access.may(principal, access.READ, txn.subject_id):
        raise access.AccessDenied(f"no visible guarded-action transaction {transaction_id!r}")
    operations = list(ActionOperation.objects.filter(transaction_id=txn.id).order_by("ordinal"))
    payloads = _payloads(txn.id)
    now = datetime.now(UTC)
    receipt_row = (
        ActionReceipt.objects.filter(transaction_id=txn.id).order_by("-created_at", "-id").first()
    )
    self_proposed = txn.proposed_by(principal)
    resolution = ActionResolution.objects.filter(transaction_id=txn.id).first()
    approval_enabled = _approval_enabled()
    authorizing: dict[str, Authority] = {}
    op_views = _operation_views(txn, operations, payloads, resolved=authorizing)
    plan = _plan_body(txn, op_views)
    return TransactionDetail(
        transaction=_summary(txn, principal),
        abort_reason=txn.abort_reason,
        plan=plan,
        plan_matches_hash=formats.plan_hash(plan) == txn.plan_hash,
        operations=tuple(op_views),
        evidence=_evidence(op_views),
        approvals=_approvals(txn.id, now),
        attempts=_attempts(txn.id),
        receipt=json.loads(receipt_row.receipt_json) if receipt_row else None,
        payloads_purged=bool(payloads) and all(row.purged_at for row in payloads.values()),
        attention=tuple(_attention_text(txn, operations, payloads))
        if txn.state in ATTENTION_STATES
        else (),
        permissions=_detail_permissions(
            principal,
            txn,
            self_proposed=self_proposed,
            approval_enabled=approval_enabled,
            resolved=resolution is not None,
        ),
        self_proposed=self_proposed,
        approval_enabled=approval_enabled,
        resolution=ResolutionDetail.of(resolution) if resolution else None,
        summary=_one_line(
            [
                (op.adapter, op.operation, _payload_path(payloads.get((op.id, PREPARED))))
                for op in operations
            ]
        ),
        authorizing=authorizing,
    )


def _evidence(op_views: list[Any]) -> dict[str, list[Any]]:
    """The plan's evidence over all its operations: what authorized it, what informed it."""
    return {
        "authorized_by": [item for op in op_views for item in op.authorized_by],
        "informed_by": [item for op in op_views for item in op.informed_by],
    }


def _approvals(transaction_id: str, now: datetime) -> tuple[ApprovalDetail, ...]:
    rows = ActionApproval.objects.filter(transaction_id=transaction_id).order_by("created_at")
    return tuple(ApprovalDetail.of(row, now) for row in rows)


def _attempts(transaction_id: str) -> tuple[AttemptDetail, ...]:
    """Every execute and compensate attempt, in the order they started."""
    rows = ActionAttempt.objects.filter(transaction_id=transaction_id)
    return tuple(AttemptDetail.of(row) for row in rows.order_by("started_at", "id"))


def _approval_enabled() -> bool:
    """Whether an approval key is configured (a broken one counts as none: the page says so)."""
    try:
        return configured_authority(required=False) is not None
    except ActionError:
        return False


def _operation_views(
    txn: ActionTransaction,
    operations: list[ActionOperation],
    payloads: dict[tuple[str, str], ActionPayload],
    *,
    resolved: dict[str, Authority] | None = None,
) -> list[OperationDetail]:
    """Each operation with its dependencies, evidence and preview; authority resolved now.

    ``resolved`` (when given) is filled with each resolved claim's :class:`Authority`, by ref_id.
    """
    op_ids = [op.id for op in operations]
    depends: dict[str, list[str]] = defaultdict(list)
    for operation_id, depends_on in ActionDependency.objects.filter(
        operation_id__in=op_ids
    ).values_list("operation_id", "depends_on_operation_id"):
        depends[operation_id].append(depends_on)
    evidence: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in ActionEvidence.objects.filter(operation_id__in=op_ids):
        evidence[row.operation_id].append(_evidence_item(row))
    authorized = [
        item
        for op in operations
        for item in evidence[op.id]
        if item["relation"] == formats.AUTHORIZED_BY
    ]
    # Resolved now, on every view: the approver sees what each claim points at
    # today (a message forgotten since staging no longer authorizes anything).
    for item, authority in zip(
        authorized, resolve_authorities(txn.subject_id, authorized), strict=True
    ):
        item["authority"] = authority.as_dict()
        if resolved is not None and authority.resolved:
            resolved[item["ref_id"]] = authority
    return [
        _operation_view(op, payloads, sorted(depends[op.id]), evidence[op.id]) for op in operations
    ]


def _detail_permissions(
    principal: Principal,
    txn: ActionTransaction,
    *,
    self_proposed: bool,
    approval_enabled: bool,
    resolved: bool,
) -> DetailPermissions:
    """Which buttons the page offers; the services check each again when it is pressed."""
    may_approve = access.may(principal, access.APPROVE, txn.subject_id)
    return DetailPermissions(
        approve=may_approve
        and principal.is_operator
        and not self_proposed
        and approval_enabled
        and txn.state == formats.AWAITING_APPROVAL,
        deny=may_approve and txn.state in formats.ABORTABLE_STATES,
        commit=may_approve
        and approval_enabled
        and txn.state == formats.APPROVED
        and txn.mode == formats.MODE_ENFORCE,
        abort=may_approve and txn.state in formats.ABORTABLE_STATES,
        recover=may_approve and txn.state in formats.INTERRUPTED_STATES,
        resolve=may_approve and txn.state in ATTENTION_STATES and not resolved,
        purge=may_approve and txn.is_terminal,
        verify=may_approve or access.may(principal, access.AUDIT, txn.subject_id),
    )


def approval_queue(principal: Principal) -> list[dict[str, Any]]:
    """Plans awaiting approval on scopes where ``principal`` may APPROVE, oldest first."""
    rows = list(
        ActionTransaction.objects.filter(
            _visible(principal, access.APPROVE), state=formats.AWAITING_APPROVAL
        ).order_by("created_at", "id")[:MAX_PAGE]
    )
    items = []
    counts = dict(
        ActionOperation.objects.filter(transaction_id__in=[row.id for row in rows])
        .values("transaction_id")
        .annotate(n=Count("id"))
        .order_by()
        .values_list("transaction_id", "n")
    )
    for txn in rows:
        item = _summary(txn, principal)
        item["operation_count"] = counts.get(txn.id, 0)
        items.append(item)
    return _with_summaries(items)


# Argument names that say where an operation acts, in the order a person looks for them.
_TARGET_ARGUMENTS = ("target", "url", "path", "to", "name")


def _operation_target(op: ActionOperation, payloads: dict[tuple[str, str], ActionPayload]) -> str:
    """The operation in words: "demo_webhook post to https://…", not a Python dict's repr."""
    row = payloads.get((op.id, formats.PAYLOAD_PREPARED))
    if row is not None and not row.purged_at:
        payload = json.loads(row.payload)
        if op.adapter == "filesystem":
            target = describe(op.adapter, payload).get("target")
            if target:
                return f"{op.adapter} {op.operation} on {target}"
        arguments = payload.get("arguments") or {}
        sensitive = set(payload.get("sensitive_fields") or ())
        for name in _TARGET_ARGUMENTS:
            value = arguments.get(name)
            if isinstance(value, str) and value and name not in sensitive:
                return f"{op.adapter} {op.operation} to {value}"
    return f"{op.adapter} {op.operation} ({op.operation_key})"


def _attention_text(
    txn: ActionTransaction,
    operations: list[ActionOperation],
    payloads: dict[tuple[str, str], ActionPayload],
) -> list[str]:
    """Plain-language checks for a person, derived from the operations' final states."""
    lines: list[str] = []
    for op in operations:
        what = _operation_target(op, payloads)
        if op.state == formats.OP_UNCERTAIN:
            lines.append(
                f"Check whether {what} happened: the run stopped without knowing. "
                "If it did, decide whether to keep it or undo it by hand; nothing will retry it."
            )
        elif op.state == formats.OP_FAILED:
            lines.append(
                f"{what} was applied but could not be undone and verified: "
                "check it and restore the previous state by hand if needed."
            )
        elif op.state == formats.OP_VERIFIED:
            lines.append(f"{what} took effect and was verified; it was not undone.")
        elif op.state == formats.OP_COMPENSATED:
            lines.append(f"{what} was undone and the undo was verified.")
        elif op.state == formats.OP_STAGED:
            lines.append(f"{what} never started.")
    if txn.state == formats.RECOVERY_REQUIRED:
        lines.insert(
            0,
            "The process running this plan stopped mid-way; recovery fenced it. "
            "Nothing will be retried automatically.",
        )
    return lines


RESOLVED_FILTERS = ("open", "resolved", "all")


def attention_queue(
    principal: Principal, *, resolved: str = "open", within: Scope | None = None
) -> list[dict[str, Any]]:
    """Uncertain and recovery_required transactions the principal may see, newest first.

    ``resolved`` is ``open`` (no resolution recorded yet: the default),
    ``resolved`` or ``all``. Each item carries ``what_to_check`` (what a
    person should look at in the world) and its ``resolution``, if any.
    """
    if resolved not in RESOLVED_FILTERS:
        raise ValueError(f"resolved must be one of {', '.join(RESOLVED_FILTERS)}")
    queryset = ActionTransaction.objects.filter(_visible(principal), state__in=ATTENTION_STATES)
    if within is not None:
        queryset = queryset.filter(**within.subtree_filter("scope_"))
    if resolved == "open":
        queryset = queryset.filter(resolution__isnull=True)
    elif resolved == "resolved":
        queryset = queryset.filter(resolution__isnull=False)
    rows = list(queryset.select_related("resolution").order_by("-created_at", "-id")[:MAX_PAGE])
    ids = [row.id for row in rows]
    operations: dict[str, list[ActionOperation]] = defaultdict(list)
    for op in ActionOperation.objects.filter(transaction_id__in=ids).order_by("ordinal"):
        operations[op.transaction_id].append(op)
    payloads: dict[tuple[str, str], ActionPayload] = {
        (row.operation_id, row.kind): row
        for row in ActionPayload.objects.filter(
            transaction_id__in=ids, kind=formats.PAYLOAD_PREPARED
        )
    }
    items = []
    for txn in rows:
        item = _summary(txn, principal)
        item["what_to_check"] = _attention_text(txn, operations[txn.id], payloads)
        resolution = getattr(txn, "resolution", None)
        item["resolution"] = ResolutionDetail.of(resolution) if resolution else None
        item["may_resolve"] = resolution is None and access.may(
            principal, access.APPROVE, txn.subject_id
        )
        items.append(item)
    return _with_summaries(items)


def transactions_by_id_prefix(
    principal: Principal, prefix: str, *, limit: int = 20
) -> list[dict[str, Any]]:
    """Transactions whose ID starts with ``prefix`` (a whole ID: exactly it), visible only."""
    rows = ActionTransaction.objects.filter(_visible(principal))
    rows = rows.filter(pk=prefix) if len(prefix) == 36 else rows.filter(pk__startswith=prefix)
    return [
        _summary(row)
        for row in rows.order_by("id")[:limit]
        if access.may(principal, access.READ, row.subject_id)
    ]


def approvals_awaiting(principal: Principal) -> int:
    """Plans awaiting approval that this principal may approve: on a scope where they hold
    the approver role, and not proposed by them (separation of duties)."""
    if not principal.is_operator or not access.has_capability_anywhere(principal, access.APPROVE):
        return 0
    query = ActionTransaction.objects.filter(
        _visible(principal, access.APPROVE), state=formats.AWAITING_APPROVAL
    ).exclude(actor_id=principal.label)
    if principal.user_id is not None:
        query = query.exclude(proposed_by_user_id=principal.user_id)
    return query.count()


def counts_by_tenant(principal: Principal) -> dict[str, dict[str, int]]:
    """Per tenant: pending approvals, and uncertain and recovery_required transactions
    without a recorded resolution (one grouped query)."""
    wanted = (formats.AWAITING_APPROVAL, formats.UNCERTAIN, formats.RECOVERY_REQUIRED)
    rows = (
        ActionTransaction.objects.filter(_visible(principal), state__in=wanted)
        .filter(resolution__isnull=True)
        .values_list("scope_tenant", "state")
        .annotate(n=Count("id"))
        .order_by()
    )
    result: dict[str, dict[str, int]] = {}
    for tenant, state, count in rows:
        bucket = result.setdefault(
            tenant, {"pending_approvals": 0, "uncertain": 0, "recovery_required": 0}
        )
        key = "pending_approvals" if state == formats.AWAITING_APPROVAL else state
        bucket[key] += count
    return dict(sorted(result.items()))


# -- authorizing evidence: resolved against stored memory (issue 10) ---------------

EVIDENCE_KINDS_RESOLVED = ("episode", "record")


@dataclass(frozen=True)
class Authority:
    """What an ``authorized_by`` evidence item resolved to, or why it did not."""

    resolved: bool
    summary: str  # what it resolved to, or why not (shown to the approver)
    kind: str = ""
    ref_id: str = ""
    scope: str = ""
    # The cited message or record itself, for the approver to read on the plan page. Kept
    # out of as_dict(): the API answers with the verdict, and the client holds the text.
    text: str = ""
    at: datetime | None = None
    session_id: str = ""
    turn_id: str = ""
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "resolved": self.resolved,
            "summary": self.summary,
            "kind": self.kind,
            "ref_id": self.ref_id,
            "scope": self.scope,
        }


def _digest_matches(claimed: str, text: str) -> bool:
    try:
        return claimed.lower() == sha256_text(text)
    except UnicodeEncodeError:
        return False


class _Stored(NamedTuple):
    episodes: dict[str, Episode]
    records: dict[str, Record]


def _stored(subject: Scope, items: Iterable[Mapping[str, Any]]) -> _Stored:
    """The episodes and records ``items`` cite at ``subject``'s lineage: two queries in all."""
    visible = subject.visible_strings()
    episode_ids = [i["ref_id"] for i in items if i["kind"] == "episode"]
    record_ids = [i["ref_id"] for i in items if i["kind"] == "record"]
    episodes = Episode.objects.filter(episode_id__in=episode_ids, scope__in=visible)
    records = Record.objects.filter(record_id__in=record_ids, scope__in=visible)
    return _Stored(
        {e.episode_id: e for e in episodes} if episode_ids else {},
        {r.record_id: r for r in records} if record_ids else {},
    )


def resolve_authorities(
    subject: Scope | str, items: Sequence[Mapping[str, Any]]
) -> list[Authority]:
    """:func:`resolve_authority` for several items (``kind``, ``ref_id``, ``digest``,
    ``trust_tier`` each), with the stored rows fetched once."""
    parsed = Scope.parse(subject)
    stored = _stored(parsed, items)
    return [
        resolve_authority(
            parsed,
            kind=item["kind"],
            ref_id=item["ref_id"],
            digest_value=item["digest"],
            trust_tier=item["trust_tier"],
            stored=stored,
        )
        for item in items
    ]


class _Cited(NamedTuple):
    """What a cited episode or record holds: judged against the claim by resolve_authority."""

    trust_tier: str
    text: str
    scope: str
    what: str
    at: datetime | None = None
    session_id: str = ""
    turn_id: str = ""
    source: str = ""


def _cited_episode(stored: _Stored, ref_id: str, parsed: Scope) -> _Cited | Authority:
    episode = stored.episodes.get(ref_id)
    if episode is None:
        return Authority(False, f"no episode {ref_id} at {parsed} or its ancestors")
    if episode.purged_at is not None:
        return Authority(False, f"episode {ref_id} was forgotten (its text is purged)")
    tier: str = (
        TrustTier.TRUSTED_USER
        if episode.source_type == SourceType.USER_MESSAGE
        else TrustTier.UNTRUSTED_CONTENT
    )
    what = f"a {episode.get_source_type_display().lower()} at {episode.scope}"
    if episode.session_id:
        what += f", session {episode.session_id}"
    if episode.turn_id:
        what += f", turn {episode.turn_id}"
    return _Cited(
        tier,
        episode.text,
        episode.scope,
        what,
        at=episode.occurred_at or episode.created_at,
        session_id=episode.session_id,
        turn_id=episode.turn_id,
        source=episode.get_source_type_display(),
    )


def _cited_record(stored: _Stored, ref_id: str, parsed: Scope) -> _Cited | Authority:
    record = stored.records.get(ref_id)
    if record is None:
        return Authority(False, f"no record {ref_id} at {parsed} or its ancestors")
    if record.status != Status.ACTIVE:
        return Authority(False, f"record {ref_id} is {record.status}, not active")
    return _Cited(
        record.trust_tier,
        record.content,
        record.scope,
        f"an active record at {record.scope}",
        at=record.created_at,
        source="memory record",
    )


def resolve_authority(
    subject: Scope | str,
    *,
    kind: str,
    ref_id: str,
    digest_value: str,
    trust_tier: str,
    stored: _Stored | None = None,
) -> Authority:
    """Resolve a claimed authorizing evidence item to an episode or record the plan's scope reads.

    It resolves when ``kind`` is ``episode`` (an ``epi_…`` ID) or ``record``
    (an ``mem_…`` ID) stored at the plan's scope or an ancestor, not
    forgotten (and, for a record, active), whose SHA-256 of the stored text is
    ``digest_value`` and whose trust tier is the one claimed. Anything else is
    an unverified claim.
    """
    parsed = Scope.parse(subject)
    label = f"{kind}:{ref_id}"
    if kind not in EVIDENCE_KINDS_RESOLVED:
        return Authority(
            False,
            f"{label} is not a stored episode or record: authorizing evidence must cite an "
            f"episode (kind episode, an epi_ ID) or a record (kind record, a mem_ ID) of "
            f"{parsed} or its ancestors",
        )
    if stored is None:
        stored = _stored(parsed, [{"kind": kind, "ref_id": ref_id}])
    cited = (
        _cited_episode(stored, ref_id, parsed)
        if kind == "episode"
        else _cited_record(stored, ref_id, parsed)
    )
    if isinstance(cited, Authority):
        return cited
    stored_tier, text, scope, what = cited[:4]
    if not _digest_matches(digest_value, text):
        return Authority(
            False, f"the digest does not match {kind} {ref_id} (SHA-256 of its stored text)"
        )
    if trust_tier != stored_tier:
        return Authority(
            False, f"it claims trust tier {trust_tier} but {kind} {ref_id} is {stored_tier}"
        )
    return Authority(
        True,
        f"{kind} {ref_id}: {what}; digest and trust tier ({stored_tier}) match",
        kind,
        ref_id,
        scope,
        text=text,
        at=cited.at,
        session_id=cited.session_id,
        turn_id=cited.turn_id,
        source=cited.source,
    )
