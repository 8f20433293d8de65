"""Fixtures for the guarded-actions tests: a rooted filesystem, a key, people with grants."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.scopes import Scope
from tests.factories import authorizing_evidence

APPROVAL_KEY = "k" * 40
SCOPE = "acme:alice:proj"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def grant(user, scope: str, role: str) -> ScopeGrant:
    parsed = Scope.parse(scope)
    return ScopeGrant.objects.create(
        user=user,
        scope=str(parsed),
        scope_tenant=parsed.tenant,
        scope_user=parsed.user,
        scope_project=parsed.project,
        role=role,
    )


def authority_evidence(ref: str = "msg-1") -> dict:
    """Evidence citing a stored user message (authorizing evidence must resolve, issue 10)."""
    return authorizing_evidence(ref)


@pytest.fixture(autouse=True)
def _authorizing_messages(authorizing_messages) -> None:
    """The user messages the standard evidence cites exist in every database test here."""


def write_op(path: str, content: str, key: str = "w1", **extra) -> dict:
    return {
        "key": key,
        "adapter": "filesystem",
        "operation": "write_text",
        "arguments": {"path": path, "content": content},
        "evidence": [authority_evidence()],
        **extra,
    }


def delete_op(path: str, key: str = "d1", **extra) -> dict:
    return {
        "key": key,
        "adapter": "filesystem",
        "operation": "delete_file",
        "arguments": {"path": path},
        "evidence": [authority_evidence()],
        **extra,
    }


@pytest.fixture
def actions_root(tmp_path: Path, settings) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(root)
    return root


@pytest.fixture
def approval_key(settings) -> str:
    settings.AETNAWEB_APPROVAL_KEY = APPROVAL_KEY
    settings.AETNAWEB_APPROVAL_KEY_FILE = ""
    return APPROVAL_KEY


@pytest.fixture
def approver(django_user_model):
    user = django_user_model.objects.create_user(username="ada", password="pw-ada-approver-1")
    grant(user, "acme:*:*", Role.APPROVER)
    return user


@pytest.fixture
def approver_principal(approver) -> access.Principal:
    return access.operator_principal(approver)


@pytest.fixture
def agent() -> access.Principal:
    """The in-process agent side: stages as the trusted caller labelled ``agent``."""
    return access.system_principal("agent")


@pytest.fixture
def scripted(actions_root: Path):
    """The scripted test adapter, registered for one test."""
    from actions.adapters import registered_adapter
    from tests.actions.fakes import ScriptedAdapter

    with registered_adapter("scripted", lambda: ScriptedAdapter(actions_root)):
        yield actions_root


def stage_and_approve(operations: list, principal: access.Principal, **kwargs) -> str:
    from actions import services

    patch = services.stage(
        scope=kwargs.pop("scope", SCOPE),
        operations=operations,
        principal=kwargs.pop("principal", access.SYSTEM),
        **kwargs,
    )
    services.approve(transaction_id=patch.transaction_id, principal=principal)
    return patch.transaction_id


def audit_dump(subject: str = SCOPE) -> str:
    """Every stored byte of a subject's audit rows, for "no content leaked" checks."""
    from audit.models import AuditEvent

    rows = AuditEvent.objects.filter(subject_id=subject).order_by("sequence")
    return "\n".join(
        "|".join(
            str(value)
            for value in (
                row.event_id,
                row.event_type,
                row.actor,
                row.session_id,
                row.turn_id,
                row.record_id,
                row.payload,
            )
        )
        for row in rows
    )


def event_types(transaction_id: str) -> list[str]:
    from audit.models import AuditEvent

    return list(
        AuditEvent.objects.filter(record_id=transaction_id)
        .order_by("sequence")
        .values_list("event_type", flat=True)
    )


def table_counts() -> dict[str, int]:
    from actions import models
    from audit.models import AuditEvent

    return {
        "transactions": models.ActionTransaction.objects.count(),
        "operations": models.ActionOperation.objects.count(),
        "dependencies": models.ActionDependency.objects.count(),
        "evidence": models.ActionEvidence.objects.count(),
        "approvals": models.ActionApproval.objects.count(),
        "attempts": models.ActionAttempt.objects.count(),
        "payloads": models.ActionPayload.objects.count(),
        "receipts": models.ActionReceipt.objects.count(),
        "audit": AuditEvent.objects.count(),
    }


def child_database_url() -> str:
    """A DATABASE_URL for a child process that must use this test run's database."""
    from django.db import connection

    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    return (
        f"postgres://{settings_dict['USER']}:{settings_dict['PASSWORD']}@"
        f"{settings_dict['HOST'] or '127.0.0.1'}:{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"
    )
