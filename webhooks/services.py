"""Every write of the webhooks app: endpoints, deliveries and their attempts.

Endpoints are managed by operators holding the admin role on the endpoint's
scope (or above it), like API tokens; each change is an audit event in that
scope's chain (IDs, host and digests only: never the secret, never the full
URL, which may embed a receiver's own token).

Deliveries are born after the commit of the evidence they announce
(:mod:`audit.subscribers`), one per matching endpoint, and sent by the task
queue (:func:`webhooks.tasks.deliver_webhook`). A failed attempt is retried
with exponential backoff (``run_after`` on the database backend; with the
``immediate`` backend, ``manage.py webhooks deliver-due`` sends what is due)
until ``AETNAWEB_WEBHOOKS_MAX_ATTEMPTS``, then the delivery reads ``failed``.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.tasks import default_task_backend
from django.urls import reverse
from django.utils import timezone

from aetnaweb.access import AccessDenied, Principal, audit_actor, may_administer
from aetnaweb.purges import ErasedSubtree
from aetnaweb.scopes import Scope, ScopeError
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.models import AuditEvent, VerificationRun
from audit.services import append_event
from webhooks import events as event_names
from webhooks import sender, signing, targets
from webhooks.models import WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

MAX_DESCRIPTION_LENGTH = 200
MAX_BACKOFF_SECONDS = 6 * 3600
MAX_ENDPOINTS_PER_SCOPE = 20
# A claimed attempt blocks others this long past its timeout; a worker that
# died mid-attempt leaves the delivery due again after it.
CLAIM_GRACE_SECONDS = 60
USER_AGENT = "aetnaweb-webhooks/1"


class WebhookError(ValueError):
    """A webhook request that cannot be honoured; ``field`` names the input at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class IssuedEndpoint:
    endpoint: WebhookEndpoint
    secret: str  # shown once; recomputable only with the server key


# -- endpoints ---------------------------------------------------------------------------


def _check_events(chosen: Any) -> list[str]:
    if isinstance(chosen, str) or not isinstance(chosen, list | tuple | set | frozenset):
        raise WebhookError("events must be a list of event names", field="events")
    picked = sorted(set(chosen))
    if not picked:
        raise WebhookError("choose at least one event", field="events")
    unknown = [name for name in picked if name not in event_names.SUBSCRIBABLE]
    if unknown:
        raise WebhookError(
            f"unknown events: {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(event_names.SUBSCRIBABLE)}",
            field="events",
        )
    return picked


def _check_url(url: Any) -> str:
    try:
        targets.check_at_registration(url)
    except targets.TargetRefused as exc:
        raise WebhookError(f"URL refused: {exc}", field="url") from exc
    return str(url)


def _check_description(description: Any) -> str:
    text = (description or "").strip() if isinstance(description, str | type(None)) else None
    if text is None or len(text) > MAX_DESCRIPTION_LENGTH:
        raise WebhookError(
            f"a description is text of at most {MAX_DESCRIPTION_LENGTH} characters",
            field="description",
        )
    return text


def _endpoint_payload(endpoint: WebhookEndpoint) -> dict[str, Any]:
    # The host says where events go; the full URL may embed the receiver's own token.
    return {
        "endpoint_id": endpoint.id,
        "host": targets.parse_target(endpoint.url).host,
        "url_sha256": sha256_text(endpoint.url),
        "events": list(endpoint.events),
        "active": endpoint.active,
    }


def _administered(principal: Principal, endpoint_id: Any) -> WebhookEndpoint:
    endpoint = (
        WebhookEndpoint.objects.select_for_update().filter(pk=endpoint_id).first()
        if isinstance(endpoint_id, str)
        else None
    )
    if endpoint is None or not may_administer(principal, endpoint.scope):
        raise AccessDenied(f"no webhook endpoint {endpoint_id!r}")
    return endpoint


@storable_text_arguments
@transaction.atomic
def create_endpoint(
    *,
    principal: Principal,
    url: str,
    scope: Scope | str,
    events: list[str],
    description: str = "",
) -> IssuedEndpoint:
    """Register ``url`` for ``events`` in ``scope``'s subtree; the secret is returned once.

    ``principal`` must hold the admin role on ``scope`` or above it; otherwise
    :class:`~aetnaweb.access.AccessDenied`, and nothing is written.
    """
    try:
        parsed = Scope.parse(scope)
    except ScopeError as exc:
        raise WebhookError(str(exc), field="scope") from exc
    if not may_administer(principal, parsed):
        raise AccessDenied(f"{principal.label} may not manage webhooks at {parsed}")
    checked_url = _check_url(url)
    chosen = _check_events(events)
    text = _check_description(description)
    if WebhookEndpoint.objects.filter(scope=str(parsed)).count() >= MAX_ENDPOINTS_PER_SCOPE:
        raise WebhookError(
            f"{parsed} already has {MAX_ENDPOINTS_PER_SCOPE} endpoints; delete one first",
            field="scope",
        )
    now = timezone.now()
    endpoint = WebhookEndpoint.objects.create(
        id=f"whe_{secrets.token_hex(8)}",
        url=checked_url,
        description=text,
        scope=str(parsed),
        scope_tenant=parsed.tenant,
        scope_user=parsed.user,
        scope_project=parsed.project,
        events=chosen,
        active=True,
        secret_salt=signing.new_salt(),
        created_by=audit_actor(principal),
        created_at=now,
        updated_at=now,
    )
    append_event(
        subject=parsed,
        event_type="webhook.endpoint_created",
        actor=audit_actor(principal),
        payload=_endpoint_payload(endpoint),
    )
    return IssuedEndpoint(endpoint, signing.endpoint_secret(endpoint.id, endpoint.secret_salt))


@storable_text_arguments
@transaction.atomic
def update_endpoint(
    *,
    principal: Principal,
    endpoint_id: str,
    url: str,
    events: list[str],
    description: str = "",
    active: bool = True,
) -> WebhookEndpoint:
    """Change an endpoint's URL, events, description or active flag (the secret stays)."""
    endpoint = _administered(principal, endpoint_id)
    endpoint.url = _check_url(url)
    endpoint.events = _check_events(events)
    endpoint.description = _check_description(description)
    endpoint.active = bool(active)
    endpoint.updated_at = timezone.now()
    endpoint.save()
    append_event(
        subject=endpoint.scope,
        event_type="webhook.endpoint_updated",
        actor=audit_actor(principal),
        payload=_endpoint_payload(endpoint),
    )
    return endpoint


@transaction.atomic
def rotate_secret(*, principal: Principal, endpoint_id: str) -> IssuedEndpoint:
    """Give the endpoint a new secret (returned once); the old one stops signing at once."""
    endpoint = _administered(principal, endpoint_id)
    endpoint.secret_salt = signing.new_salt()
    endpoint.updated_at = timezone.now()
    endpoint.save(update_fields=["secret_salt", "updated_at"])
    append_event(
        subject=endpoint.scope,
        event_type="webhook.secret_rotated",
        actor=audit_actor(principal),
        payload={"endpoint_id": endpoint.id},
    )
    return IssuedEndpoint(endpoint, signing.endpoint_secret(endpoint.id, endpoint.secret_salt))


@transaction.atomic
def delete_endpoint(*, principal: Principal, endpoint_id: str) -> None:
    """Delete an endpoint and its delivery history; pending deliveries are never sent."""
    endpoint = _administered(principal, endpoint_id)
    payload = _endpoint_payload(endpoint)
    payload["deliveries_deleted"] = endpoint.deliveries.count()
    endpoint.delete()
    append_event(
        subject=endpoint.scope,
        event_type="webhook.endpoint_deleted",
        actor=audit_actor(principal),
        payload=payload,
    )


# -- creating deliveries -----------------------------------------------------------------


def _link(name: str, *args: Any) -> str:
    path = reverse(name, args=args)
    base = settings.AETNAWEB_PUBLIC_URL
    return f"{base}{path}" if base else path


def _body(delivery_id: str, event_type: str, subject: str, data: dict[str, Any]) -> str:
    links = data.pop("links", {})
    return json.dumps(
        {
            "id": delivery_id,
            "type": event_type,
            "created_at": timezone.now().isoformat().replace("+00:00", "Z"),
            "scope": subject,
            "data": data,
            "links": links,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def _matching(subject: str, *event_types: str) -> list[WebhookEndpoint]:
    """Active endpoints covering ``subject`` that chose any of ``event_types``."""
    try:
        lineage = Scope.parse(subject).visible_strings()
    except ScopeError:
        return []
    # A subject's covering scopes are itself and its ancestors: one indexed IN.
    rows = WebhookEndpoint.objects.filter(scope__in=lineage, active=True)
    return [endpoint for endpoint in rows if any(name in endpoint.events for name in event_types)]


def _create_deliveries(
    matches: list[tuple[WebhookEndpoint, str, str, dict[str, Any]]],
) -> list[WebhookDelivery]:
    """Store one delivery per (endpoint, type, subject, data) and queue each after commit."""
    now = timezone.now()
    created = []
    with transaction.atomic():
        for endpoint, event_type, subject, data in matches:
            delivery_id = f"whd_{secrets.token_hex(8)}"
            created.append(
                WebhookDelivery.objects.create(
                    id=delivery_id,
                    endpoint=endpoint,
                    event_type=event_type,
                    subject=subject,
                    body=_body(delivery_id, event_type, subject, dict(data)),
                    next_attempt_at=now,
                    created_at=now,
                )
            )
        for delivery in created:
            transaction.on_commit(partial(_enqueue, delivery.pk), robust=True)
    return created


def _payload(event: AuditEvent) -> dict[str, Any]:
    try:
        payload = json.loads(event.payload)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _ids(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _replaced(superseded_ids: Any, by: Any) -> list[dict[str, str]]:
    return [{"record_id": old, "superseded_by": str(by)} for old in _ids(superseded_ids)]


def _announced_by_creation(record_id: str) -> set[str]:
    """What the creation event of ``record_id`` already announced as superseded."""
    creation = (
        AuditEvent.objects.filter(record_id=record_id, event_type="memory.record_created")
        .only("payload")
        .first()
    )
    return set(_ids(_payload(creation).get("superseded_ids"))) if creation else set()


def _superseded_by_event(event: AuditEvent, payload: dict[str, Any]) -> list[dict[str, str]]:
    """Each record the audit event retired, with the record that replaced it."""
    kind = event.event_type
    if kind in ("memory.record_created", "memory.record_promoted"):
        return _replaced(payload.get("superseded_ids"), payload.get("record_id"))
    if kind == "memory.record_corrected":
        by = payload.get("corrected_by")
        # The correction's own creation event already announced the slot holders it replaced.
        already = _announced_by_creation(by) if isinstance(by, str) else set()
        return [
            item
            for item in _replaced(payload.get("superseded_ids"), by)
            if item["record_id"] not in already
        ]
    if kind == "memory.consolidated":
        groups = [*payload.get("duplicates", []), *payload.get("fact_keys", [])]
        return [
            item
            for group in groups
            if isinstance(group, dict)
            for item in _replaced(group.get("superseded_ids"), group.get("kept"))
        ]
    return []


# What a memory change carries besides IDs: digests and counts, never content.
_DIGEST_FIELDS = ("digests", "content_sha256", "fact_key_sha256", "metadata_sha256")
_PURGE_DIGEST_FIELDS = ("selector_sha256", "utterance_sha256", "reference_sha256")


def _purged(payload: dict[str, Any]) -> dict[str, Any]:
    """Record and message IDs of a purge (a ``memory.forget`` event's ``purged_*``)."""
    records = _ids(payload.get("purged_record_ids"))
    episodes = _ids(payload.get("purged_episode_ids"))
    data: dict[str, Any] = {"record_ids": records, "episode_ids": episodes}
    data["count"] = payload.get("count") if isinstance(payload.get("count"), int) else len(records)
    for name in ("mode", *_PURGE_DIGEST_FIELDS):
        if isinstance(payload.get(name), str):
            data[name] = payload[name]
    return data


def memory_changes(event: AuditEvent) -> list[tuple[str, dict[str, Any]]]:
    """The memory-change webhook events an audit event makes, each with its data.

    IDs, the audit event's ID, hash and sequence, and digests: never content
    (a record's digests are salted with its own salt, destroyed when it is
    forgotten, docs/webhooks.md). An event that changed nothing makes none.
    """
    payload = _payload(event)
    base: dict[str, Any] = {
        "event_id": event.event_id,
        "sequence": event.sequence,
        "audit_event_type": event.event_type,
        "audit_event_hash": event.event_hash,
    }
    audit_link = _link("audit:event", event.event_id)
    changes: list[tuple[str, dict[str, Any]]] = []
    wanted = event_names.MEMORY_CHANGE_SOURCES.get(event.event_type, ())
    if event_names.RECORD_CREATED in wanted and isinstance(payload.get("record_id"), str):
        record_id = payload["record_id"]
        data = {**base, "record_id": record_id}
        if isinstance(payload.get("episode_id"), str):
            data["episode_id"] = payload["episode_id"]
        data.update({k: payload[k] for k in _DIGEST_FIELDS if isinstance(payload.get(k), str)})
        data["links"] = {
            "dashboard": _link("memory:record", record_id),
            "audit_event": audit_link,
        }
        changes.append((event_names.RECORD_CREATED, data))
    if event_names.RECORD_SUPERSEDED in wanted:
        superseded = _superseded_by_event(event, payload)
        if superseded:
            data = {
                **base,
                "record_ids": [item["record_id"] for item in superseded],
                "superseded": superseded,
                "links": {"audit_event": audit_link},
            }
            changes.append((event_names.RECORD_SUPERSEDED, data))
    if event_names.RECORD_FORGOTTEN in wanted:
        expired = payload.get("mode") == event_names.EXPIRED_MODE
        data = {**base, **_purged(payload)}
        data["links"] = {
            "receipt": _link("memory:receipt", event.event_id),
            "audit_event": audit_link,
        }
        name = event_names.RECORD_EXPIRED if expired else event_names.RECORD_FORGOTTEN
        changes.append((name, data))
    return changes


def on_audit_event(event: AuditEvent) -> None:
    """Subscriber (audit.subscribers): queue deliveries for a committed event."""
    names = event_names.MEMORY_CHANGE_SOURCES.get(event.event_type)
    if names is not None:
        # One indexed query on the write path; the payload is read only when someone listens.
        listening = _matching(event.subject_id, *names)
        matches = [
            (endpoint, name, event.subject_id, data)
            for name, data in (memory_changes(event) if listening else [])
            for endpoint in listening
            if name in endpoint.events
        ]
        if matches:
            _create_deliveries(matches)
        return
    data: dict[str, Any] = {"event_id": event.event_id, "sequence": event.sequence}
    if event.event_type == event_names.PLAN_PROPOSED:
        try:
            state = json.loads(event.payload).get("state")
        except (ValueError, AttributeError):
            state = None
        if state != event_names.AWAITING_APPROVAL:
            return  # a staged preview needs nobody's approval
    if event.event_type.startswith("action."):
        data["transaction_id"] = event.record_id
        data["links"] = {
            "dashboard": _link("actions:detail", event.record_id),
            "audit_event": _link("audit:event", event.event_id),
        }
    else:
        data["record_id"] = event.record_id
        data["links"] = {
            "dashboard": _link("memory:record", event.record_id),
            "review_queue": _link("memory:review"),
            "audit_event": _link("audit:event", event.event_id),
        }
    matches = [
        (endpoint, event.event_type, event.subject_id, data)
        for endpoint in _matching(event.subject_id, event.event_type)
    ]
    if matches:
        _create_deliveries(matches)


def on_failed_run(run: VerificationRun) -> None:
    """Subscriber: one delivery per endpoint whose subtree holds a chain the run found broken."""
    failed = [
        str(item.get("subject_id"))
        for item in run.failures
        if isinstance(item, dict) and isinstance(item.get("subject_id"), str)
    ]
    per_endpoint: dict[str, tuple[WebhookEndpoint, list[str]]] = {}
    for subject in failed:
        for endpoint in _matching(subject, event_names.VERIFICATION_FAILED):
            per_endpoint.setdefault(endpoint.id, (endpoint, []))[1].append(subject)
    matches = []
    for endpoint, subjects in per_endpoint.values():
        data = {
            "run_id": run.pk,
            "failed_subjects": subjects,
            "first_bad_sequence": run.first_bad_sequence,
            "links": {"dashboard": _link("audit:run", run.pk)},
        }
        matches.append((endpoint, event_names.VERIFICATION_FAILED, subjects[0], data))
    if matches:
        _create_deliveries(matches)


@transaction.atomic
def send_test_event(*, principal: Principal, endpoint_id: str) -> WebhookDelivery:
    """Queue a ``webhook.test`` delivery to the endpoint (active or not), signed like any other."""
    endpoint = _administered(principal, endpoint_id)
    data = {
        "endpoint_id": endpoint.id,
        "requested_by": audit_actor(principal),
        "links": {"dashboard": _link("webhooks:detail", endpoint.id)},
    }
    return _create_deliveries([(endpoint, event_names.TEST, endpoint.scope, data)])[0]


@transaction.atomic
def retry_delivery(*, principal: Principal, delivery_id: str) -> WebhookDelivery:
    """Make a pending or failed delivery due now and queue it (one more attempt if it had failed)."""
    delivery = (
        WebhookDelivery.objects.select_for_update()
        .select_related("endpoint")
        .filter(pk=delivery_id)
        .first()
        if isinstance(delivery_id, str)
        else None
    )
    if delivery is None or not may_administer(principal, delivery.endpoint.scope):
        raise AccessDenied(f"no webhook delivery {delivery_id!r}")
    if delivery.status == WebhookDelivery.Status.DELIVERED:
        raise WebhookError(f"delivery {delivery.id} was already delivered")
    delivery.status = WebhookDelivery.Status.PENDING
    delivery.next_attempt_at = timezone.now()
    delivery.save(update_fields=["status", "next_attempt_at"])
    transaction.on_commit(partial(_enqueue, delivery.pk), robust=True)
    return delivery


# -- sending -----------------------------------------------------------------------------


def backoff_seconds(attempts: int) -> int:
    """Wait after the ``attempts``-th failure: base, 2x base, 4x base, ... capped at 6 hours."""
    base = settings.AETNAWEB_WEBHOOKS_BACKOFF_SECONDS
    return int(min(base * 2 ** max(attempts - 1, 0), MAX_BACKOFF_SECONDS))


def _enqueue(delivery_id: str, *, at: Any = None) -> None:
    from webhooks.tasks import deliver_webhook  # tasks imports this module

    task = deliver_webhook
    if at is not None:
        if not default_task_backend.supports_defer:
            return  # no scheduled tasks here: `manage.py webhooks deliver-due` sends it
        task = task.using(run_after=at)
    try:
        task.enqueue(delivery_id)
    except Exception:
        # The row is committed and due: deliver-due (or "retry now") sends it later.
        logger.exception("webhook delivery %s could not be queued", delivery_id)


def _claim(delivery_id: str) -> WebhookDelivery | None:
    """Take the delivery if it is pending and due; None if another attempt has it or it is done."""
    now = timezone.now()
    lease = now + timedelta(
        seconds=settings.AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS * 2 + CLAIM_GRACE_SECONDS
    )
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now
    ).update(next_attempt_at=lease)
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)


def _attempt(delivery: WebhookDelivery) -> tuple[int | None, str, str]:
    """Send once: (HTTP status or None, error sentence, response excerpt)."""
    endpoint = delivery.endpoint
    try:
        target = targets.parse_target(endpoint.url)
        address = targets.checked_address(target)  # resolved and checked now, every time
    except targets.TargetRefused as exc:
        return None, f"refused: {exc}", ""
    body = delivery.body.encode("utf-8")
    secret = signing.endpoint_secret(endpoint.id, endpoint.secret_salt)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Webhook-Id": delivery.id,
        "Webhook-Event": delivery.event_type,
        signing.SIGNATURE_HEADER: signing.signature_header(secret, int(time.time()), body),
    }
    try:
        answer = sender.post(
            target, address, body, headers, timeout=settings.AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS
        )
    except TimeoutError:
        return None, "timed out", ""
    except OSError as exc:
        return None, f"could not connect: {type(exc).__name__}", ""
    if 200 <= answer.status < 300:
        return answer.status, "", answer.excerpt
    if 300 <= answer.status < 400:
        return answer.status, "redirects are not followed", answer.excerpt
    return answer.status, f"HTTP {answer.status}", answer.excerpt


def deliver(delivery_id: str) -> WebhookDelivery | None:
    """Make one attempt at a due delivery and record it; None when it was not due."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return None
    if not delivery.endpoint.active and delivery.event_type != event_names.TEST:
        status, error, excerpt = None, "the endpoint is disabled", ""
        give_up = True
    else:
        status, error, excerpt = _attempt(delivery)
        give_up = False
    now = timezone.now()
    delivery.attempts += 1
    delivery.last_attempt_at = now
    delivery.last_status_code = status
    delivery.last_error = error[:300]
    delivery.response_excerpt = excerpt[: sender.EXCERPT_CHARS]
    if not error:
        delivery.status = WebhookDelivery.Status.DELIVERED
        delivery.delivered_at = now
        delivery.next_attempt_at = None
    elif give_up or delivery.attempts >= settings.AETNAWEB_WEBHOOKS_MAX_ATTEMPTS:
        delivery.status = WebhookDelivery.Status.FAILED
        delivery.next_attempt_at = None
    else:
        delivery.next_attempt_at = now + timedelta(seconds=backoff_seconds(delivery.attempts))
    delivery.save(
        update_fields=[
            "attempts",
            "last_attempt_at",
            "last_status_code",
            "last_error",
            "response_excerpt",
            "status",
            "delivered_at",
            "next_attempt_at",
        ]
    )
    # Logged by ID and outcome only: no URL (it may hold a token), no body.
    logger.info(
        "webhook delivery %s attempt %s: %s",
        delivery.id,
        delivery.attempts,
        delivery.status if not error else f"{delivery.status} ({error})",
    )
    if delivery.status == WebhookDelivery.Status.PENDING:
        _enqueue(delivery.id, at=delivery.next_attempt_at)
    return delivery


def deliver_due(*, limit: int = 100) -> int:
    """Attempt every pending delivery whose time has come (cron, or the immediate backend)."""
    due = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now()
    ).order_by("next_attempt_at")
    count = 0
    for delivery_id in list(due.values_list("pk", flat=True)[:limit]):
        if deliver(delivery_id) is not None:
            count += 1
    return count


def erase_deliveries(erased: ErasedSubtree) -> int:
    """Delete every delivery about a scope the erased subtree covers; returns how many.

    Called inside a subject erasure's transaction (:mod:`aetnaweb.purges`):
    a delivery's body and the receiver's answer excerpt are copies about that
    person. A subject is stored as its canonical scope string, so coverage is
    decided segment-wise in Python (never a prefix match).
    """
    root = Scope.parse(erased.scope)
    doomed: list[str] = []
    for delivery_id, subject in WebhookDelivery.objects.values_list("id", "subject").iterator():
        try:
            covered = root.covers(Scope.parse(subject))
        except ScopeError:
            covered = False
        if covered:
            doomed.append(delivery_id)
    for start in range(0, len(doomed), 500):
        WebhookDelivery.objects.filter(id__in=doomed[start : start + 500]).delete()
    return len(doomed)
