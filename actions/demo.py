"""Demo guarded actions for ``manage.py demo``, through the real services.

Five plans, one per state an operator should see:

- ``awaiting_approval``: the apollo assistant wants to rewrite the release
  notes (a file write whose diff the reviewer sees);
- ``committed``: a new runners file for zephyr, approved and committed, with
  its receipt;
- ``uncertain``: a file write followed by a webhook that timed out after
  sending, so nobody knows whether it landed; the write was undone;
- ``recovery_required``: a ledger export whose worker stopped mid-run and was
  fenced by ``recover``; nothing will be retried;
- ``aborted``: a plan a reviewer denied, with the reason kept on the row.

Approvals are signed with the configured key; when none is configured the
demo creates ``data/approval_key`` (0600) and signs with it, and ``make run``
points the server at that file. The two demo adapters (``demo_webhook``,
``demo_export``) exist only while the demo seeds: nothing an agent sends can
use them. Each plan is found by its session ID, so a second run changes
nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from actions import services
from actions.adapters import (
    Observation,
    PreparationContext,
    PreparedOperation,
    registered_adapter,
)
from actions.approvals import ApprovalAuthority, configured_authority, read_key_file
from actions.errors import ActionInputError, ConcurrentTransitionError
from actions.models import ActionTransaction
from actions.proposals import OperationProposal
from aetnaweb.access import SYSTEM, Principal, operator_principal, system_principal

SESSION_PREFIX = "demo-actions-"
DEMO_DIR = "demo"

RELEASE_NOTES_BEFORE = (
    "# apollo release notes\n\n## 2.4.0\n\n- Faster sync for large workspaces.\n"
    "- Fixed the login redirect loop.\n"
)
RELEASE_NOTES_AFTER = (
    "# apollo release notes\n\n## 2.4.1\n\n- Deploy window moved to Tuesdays 14:00 UTC.\n"
    "- Fixed a crash when the editor setting is missing.\n\n## 2.4.0\n\n"
    "- Faster sync for large workspaces.\n- Fixed the login redirect loop.\n"
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# What the users asked their agents, by chat turn: the demo records each as a
# real user message, so the plan's authorizing evidence resolves to it.
REQUESTS = {
    "chat:alice:apollo:turn-12": (
        "acme:alice:apollo",
        "Please update the apollo release notes for 2.4.1.",
    ),
    "chat:bob:zephyr:turn-4": (
        "acme:bob:zephyr",
        "Please add a runners file for zephyr with two runners.",
    ),
    "chat:alice:apollo:turn-15": (
        "acme:alice:apollo",
        "Please write the deploy checklist and ping the webhook.",
    ),
    "chat:carol:ledger:turn-8": (
        "globex:carol:ledger",
        "Please export the ledger for the auditors.",
    ),
    "chat:carol:ledger:turn-9": ("globex:carol:ledger", "Please clean up the old ledger export."),
}


def _said(ref: str) -> dict[str, Any]:
    """A request the user made in a chat turn, attested by the host: it may authorize.

    The request is stored as the user's message at the chat's scope (once), and
    the evidence cites that episode, so it resolves on the approval page.
    """
    from memory import services as memory_services
    from memory.models import Episode

    scope, text = REQUESTS[ref]
    turn = ref.rsplit(":", 1)[1]
    episode = Episode.objects.filter(scope=scope, session_id=ref, turn_id=turn).first()
    if episode is None:
        result = memory_services.remember(
            principal=SYSTEM, scope=scope, text=text, session_id=ref, turn_id=turn
        )
        episode_id = result.episode_id
    else:
        episode_id = episode.episode_id
    return {
        "kind": "episode",
        "ref_id": episode_id,
        "digest": _sha(text),
        "relation": "authorized_by",
        "trust_tier": "trusted_user",
        "attested": True,
    }


def _read(ref: str) -> dict[str, Any]:
    """Something the agent read: it may inform, never authorize."""
    return {"kind": "document", "ref_id": ref, "digest": _sha(ref)}


class _DemoAdapter:
    """A stand-in for a remote system: no real effect; subclasses script ``execute``."""

    name = "demo"
    version = "1"
    operation_name = "call"

    def manifest(self) -> dict[str, Any]:
        return {"adapter": self.name, "version": self.version, "demo_only": True}

    def prepare(
        self, proposal: OperationProposal, context: PreparationContext
    ) -> PreparedOperation:
        if proposal.operation != self.operation_name:
            raise ActionInputError(f"{self.name} only knows {self.operation_name!r}")
        return PreparedOperation(
            adapter=self.name,
            operation=proposal.operation,
            arguments=dict(proposal.arguments),
            preview={"target": proposal.arguments.get("target")},
            preconditions={"target": proposal.arguments.get("target")},
            effect_class="irreversible_staged",
        )

    def revalidate(self, prepared: PreparedOperation) -> Observation:
        return Observation(True)

    def verify(self, prepared: PreparedOperation, receipt: dict[str, Any]) -> Observation:
        return Observation(True)

    def compensate(
        self, prepared: PreparedOperation, execution_receipt: dict[str, Any], key: str
    ) -> dict[str, Any]:
        raise RuntimeError("a sent webhook cannot be unsent")

    def verify_compensation(
        self, prepared: PreparedOperation, compensation_receipt: dict[str, Any]
    ) -> Observation:
        return Observation(False, "not compensatable")


class DemoWebhookAdapter(_DemoAdapter):
    """Times out after the request left: the outcome is unknown (``uncertain``)."""

    name = "demo_webhook"
    operation_name = "post"

    def execute(self, prepared: PreparedOperation, idempotency_key: str) -> dict[str, Any]:
        raise TimeoutError("no response within 30 s after the request was sent")


class DemoExportAdapter(_DemoAdapter):
    """Its worker stops mid-run; the operator on duty fences the run with ``recover``."""

    name = "demo_export"
    operation_name = "export"

    def __init__(self, fence: Any) -> None:
        self._fence = fence

    def execute(self, prepared: PreparedOperation, idempotency_key: str) -> dict[str, Any]:
        # What a watchdog does when a worker stops answering: fence the run.
        # The run's late answer is then refused by the engine's own fence.
        self._fence()
        return {"provider_request_id": idempotency_key, "late": True}


@dataclass
class ActionsDemoSummary:
    created: list[str] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    key_note: str = ""

    def describe(self) -> str:
        if not self.created:
            return "actions demo: already present, nothing changed"
        states = ", ".join(f"{name} {state}" for name, state in self.states.items())
        return f"actions demo: {len(self.created)} plans ({states}){self.key_note}"


def _demo_authority(summary: ActionsDemoSummary) -> ApprovalAuthority:
    authority = configured_authority(required=False)
    if authority is not None:
        return authority
    path = Path(settings.DATA_DIR) / "approval_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    summary.key_note = (
        f"; no approval key was configured, so demo approvals are signed with {path} "
        f"(make run sets AETNAWEB_APPROVAL_KEY_FILE to it)"
    )
    return ApprovalAuthority(
        read_key_file(path), ttl_seconds=settings.AETNAWEB_APPROVAL_TTL_SECONDS
    )


def _operator(username: str) -> Principal:
    user = get_user_model().objects.get(username=username)
    return operator_principal(user)


def _root() -> Path:
    root = Path(settings.AETNAWEB_ACTIONS_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    for project in ("apollo", "zephyr", "ledger"):
        (root / DEMO_DIR / project).mkdir(parents=True, exist_ok=True)
    return root


def _exists(name: str) -> bool:
    return ActionTransaction.objects.filter(session_id=SESSION_PREFIX + name).exists()


def _stage(name: str, scope: str, actor: str, operations: list[dict[str, Any]]) -> str:
    patch = services.stage(
        scope=scope,
        operations=operations,
        session_id=SESSION_PREFIX + name,
        turn_id=1,
        principal=system_principal(),
        actor=actor,
    )
    return patch.transaction_id


def seed_demo() -> ActionsDemoSummary:
    """Create the demo plans that are missing; a second call changes nothing.

    Not one database transaction: commit must run outside one, so that each
    intent record is durable before its effect. Each plan is created
    completely or found by its session ID on the next run.
    """
    from access.demo import seed_users

    summary = ActionsDemoSummary()
    seed_users()  # the demo approvers (april on acme, gus on globex); idempotent
    root = _root()
    authority = _demo_authority(summary)
    april, gus = _operator("april"), _operator("gus")
    plans: list[tuple[str, Callable[[], None]]] = [
        ("release-notes", lambda: _seed_release_notes(root)),
        ("zephyr-runners", lambda: _seed_zephyr_runners(april, authority)),
        ("deploy-webhook", lambda: _seed_deploy_webhook(april, authority)),
        ("ledger-export", lambda: _seed_ledger_export(gus, authority)),
        ("payroll-cleanup", lambda: _seed_payroll_cleanup(gus)),
    ]
    for name, seed in plans:
        if not _exists(name):
            seed()
            summary.created.append(name)

    for txn in ActionTransaction.objects.filter(session_id__startswith=SESSION_PREFIX).order_by(
        "created_at"
    ):
        summary.states[(txn.session_id or "").removeprefix(SESSION_PREFIX)] = txn.state
    return summary


def _seed_release_notes(root: Path) -> None:
    """Awaiting approval: a release-notes rewrite the reviewer sees as a diff."""
    notes = root / DEMO_DIR / "apollo" / "RELEASE_NOTES.md"
    if not notes.exists():
        notes.write_text(RELEASE_NOTES_BEFORE)
    _stage(
        "release-notes",
        "acme:alice:apollo",
        "agent:apollo-assistant",
        [
            {
                "key": "notes",
                "adapter": "filesystem",
                "operation": "write_text",
                "arguments": {
                    "path": f"{DEMO_DIR}/apollo/RELEASE_NOTES.md",
                    "content": RELEASE_NOTES_AFTER,
                },
                "evidence": [
                    _said("chat:alice:apollo:turn-12"),
                    _read("doc:apollo:changelog-2.4.1"),
                ],
            }
        ],
    )


def _seed_zephyr_runners(april: Principal, authority: ApprovalAuthority) -> None:
    """Committed: a one-file change, approved and run."""
    txn_id = _stage(
        "zephyr-runners",
        "acme:bob:zephyr",
        "agent:zephyr-assistant",
        [
            {
                "key": "runners",
                "adapter": "filesystem",
                "operation": "write_text",
                "arguments": {
                    "path": f"{DEMO_DIR}/zephyr/runners.txt",
                    "content": "zephyr builds: arm64 runners (pool ci-arm-2)\n",
                },
                "evidence": [_said("chat:bob:zephyr:turn-4")],
            }
        ],
    )
    services.approve(transaction_id=txn_id, principal=april, authority=authority)
    services.commit(transaction_id=txn_id, principal=april, authority=authority)


def _seed_deploy_webhook(april: Principal, authority: ApprovalAuthority) -> None:
    """A file write and a webhook that depends on it, approved and run."""
    with registered_adapter("demo_webhook", DemoWebhookAdapter):
        txn_id = _stage(
            "deploy-webhook",
            "acme:alice:apollo",
            "agent:apollo-assistant",
            [
                {
                    "key": "window",
                    "adapter": "filesystem",
                    "operation": "write_text",
                    "arguments": {
                        "path": f"{DEMO_DIR}/apollo/deploy-window.txt",
                        "content": "Tuesdays 14:00 UTC\n",
                    },
                    "evidence": [_said("chat:alice:apollo:turn-15")],
                },
                {
                    "key": "notify",
                    "adapter": "demo_webhook",
                    "operation": "post",
                    "arguments": {"target": "https://hooks.example.org/apollo-deploys"},
                    "evidence": [_said("chat:alice:apollo:turn-15")],
                    "depends_on": ["window"],
                },
            ],
        )
        services.approve(transaction_id=txn_id, principal=april, authority=authority)
        services.commit(transaction_id=txn_id, principal=april, authority=authority)


def _seed_ledger_export(gus: Principal, authority: ApprovalAuthority) -> None:
    """Recovery required: an export whose run is fenced while it is still out."""
    txn_ref: dict[str, str] = {}

    def fence() -> None:
        services.recover(transaction_id=txn_ref["id"], principal=gus)

    with registered_adapter("demo_export", lambda: DemoExportAdapter(fence)):
        txn_ref["id"] = _stage(
            "ledger-export",
            "globex:carol:ledger",
            "agent:ledger-assistant",
            [
                {
                    "key": "export",
                    "adapter": "demo_export",
                    "operation": "export",
                    "arguments": {"target": "erp://globex/ledger/2026-Q1"},
                    "evidence": [_said("chat:carol:ledger:turn-8")],
                }
            ],
        )
        services.approve(transaction_id=txn_ref["id"], principal=gus, authority=authority)
        # The late answer of a fenced run is refused: that is the point.
        with contextlib.suppress(ConcurrentTransitionError):
            services.commit(transaction_id=txn_ref["id"], principal=gus, authority=authority)


def _seed_payroll_cleanup(gus: Principal) -> None:
    """Denied: a payroll-file deletion that forum advice suggested."""
    txn_id = _stage(
        "payroll-cleanup",
        "globex:carol:ledger",
        "agent:ledger-assistant",
        [
            {
                "key": "cleanup",
                "adapter": "filesystem",
                "operation": "delete_file",
                "arguments": {"path": f"{DEMO_DIR}/ledger/payroll-2025.csv"},
                "evidence": [_said("chat:carol:ledger:turn-9"), _read("web:forum-post-77")],
            }
        ],
    )
    services.deny(
        transaction_id=txn_id,
        reason="Payroll files are kept for seven years; do not delete.",
        principal=gus,
    )
