"""A LangGraph ``BaseStore`` over aetnaweb (extra ``aetnaweb-client[langgraph]``).

A namespace is a scope: ``("acme", "alice", "proj")`` is ``acme:alice:proj``, so
every write lands at exactly one scope and a token only reaches its subtree.
``put(ns, key, value)`` remembers an explicit fact (``key`` and the value as
compact JSON) that supersedes the same key, keeping its history; ``get``
reads the active value of that key; ``search(ns, query=...)`` is recall (ranked,
audited, sees the scope's ancestors); ``delete`` forgets the key's lineage and
returns the deletion receipt's evidence to the audit chain.

``put(ns, key, value, ttl=minutes)`` sets the record's ``expires_at`` that
many minutes from now (or ``ttl_config={"default_ttl": minutes}`` for every
put): from then on ``get`` and ``search`` no longer return it, and the
server's retention run purges it with a deletion receipt. The time is fixed
at the put: a read does not extend it (``refresh_ttl`` has no effect), and a
put of the same key sets a new value with its own time.

A value's top-level scalar fields (string, number, bool, null, under keys
the engine accepts) are also stored as the record's metadata, so
``search(ns, filter={"customer_id": 42})`` is a metadata filter the server
runs inside recall's candidate queries (typed: 42 and "42" differ), never a
filter over a page already cut to ``limit``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from aetnaweb_client.client import Client
from aetnaweb_client.types import Record

KIND = "langgraph"
# The engine's metadata bounds (memory/limits.py on the server).
METADATA_KEY = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,63}")
METADATA_MAX_KEYS = 32
METADATA_MAX_BYTES = 4096
SAFE_INTEGER = 2**53 - 1


def _scalar(value: Any) -> bool:
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return abs(value) <= SAFE_INTEGER
    return isinstance(value, float) and math.isfinite(value)


def value_metadata(value: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``value`` kept as record metadata: scalars under valid keys, in order,
    while they fit the engine's bounds (a field that would not fit is left out)."""
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if len(kept) == METADATA_MAX_KEYS:
            break
        if not isinstance(key, str) or not METADATA_KEY.fullmatch(key) or not _scalar(item):
            continue
        trial = {**kept, key: item}
        if len(json.dumps(trial, separators=(",", ":"), sort_keys=True)) <= METADATA_MAX_BYTES:
            kept = trial
    return kept


def namespace_scope(namespace: tuple[str, ...]) -> str:
    """``("acme", "alice", "proj")`` -> ``acme:alice:proj``; anything else is refused."""
    if len(namespace) != 3 or not all(isinstance(part, str) and part for part in namespace):
        raise ValueError(
            "an aetnaweb namespace is a scope of exactly three parts "
            f"(tenant, user, project), e.g. ('acme', 'alice', 'proj'); got {namespace!r}"
        )
    if any(":" in part for part in namespace):
        raise ValueError(f"a namespace part may not contain ':' (got {namespace!r})")
    return ":".join(namespace)


def _scope_namespace(scope: str) -> tuple[str, ...]:
    return tuple(scope.split(":"))


def _split(content: str) -> tuple[str, dict[str, Any]]:
    """``"key: {json}"`` -> (key, value); plain remembered text -> (content, {"text": ...})."""
    key, sep, rest = content.partition(": ")
    if sep:
        try:
            value = json.loads(rest)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return key, value
    return content, {"text": content}


def _expiry(ttl: float | None) -> datetime | None:
    """LangGraph's ``ttl`` (minutes from now) as the record's ``expires_at``; None keeps it."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise ValueError(f"ttl must be a number of minutes, got {ttl!r}")
    if ttl <= 0:
        raise ValueError("ttl must be more than 0 minutes")
    return datetime.now(UTC) + timedelta(minutes=ttl)


def _lapsed(record: Record) -> bool:
    """A record whose ttl passed is gone for the store, as it is for recall."""
    expires_at = record.get("expires_at")
    return bool(expires_at) and _when(str(expires_at)) <= datetime.now(UTC)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


class AetnawebStore(BaseStore):
    """``AetnawebStore(Client(url, token=...))``: LangGraph long-term memory in aetnaweb.

    Values are JSON objects; keys are fact keys (case-insensitive, whitespace
    collapsed, as the engine normalises them). ``search`` needs a full
    three-part namespace and returns recall's ranked, scored items; without a
    query it lists the scope's active records, newest first.
    """

    supports_ttl = True

    def __init__(self, client: Client, *, ttl_config: TTLConfig | None = None) -> None:
        self.client = client
        self.ttl_config = ttl_config

    # -- BaseStore --------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The sync client in a worker thread: one code path, same behaviour.
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, op.value, op.ttl)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"unsupported store operation: {type(op).__name__}")

    # -- operations ----------------------------------------------------------------------

    def _active(self, scope: str, key: str) -> list[Record]:
        wanted = " ".join(key.split()).casefold()
        return [
            record
            for record in self.client.iter_records(scope, status="active", text=key.strip())
            if record["scope"] == scope
            and _split(record["content"])[0].casefold() == wanted
            and not _lapsed(record)
        ]

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        scope = namespace_scope(namespace)
        for record in self._active(scope, key):
            _, value = _split(record["content"])
            return Item(
                namespace=namespace,
                key=key,
                value=value,
                created_at=_when(record["created_at"]),
                updated_at=_when(record["updated_at"]),
            )
        return None

    def _put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any] | None,
        ttl: float | None = None,
    ) -> None:
        scope = namespace_scope(namespace)
        if value is None:
            ids = [record["record_id"] for record in self._active(scope, key)]
            if ids:
                preview = self.client.forget_preview(scope, record_ids=ids)
                # A delete is deliberate: the preview's count confirms it (required above 10).
                self.client.forget(
                    scope,
                    record_ids=ids,
                    expected_record_ids=preview["record_ids"],
                    confirm_count=preview["count"],
                )
            return
        encoded = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))
        self.client.remember(
            scope,
            key=key,
            value=encoded,
            kind=KIND,
            metadata=value_metadata(value),
            expires_at=_expiry(ttl),
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = namespace_scope(op.namespace_prefix)
        rows: list[tuple[str, str, float | None, Record | None]]
        wanted = dict(op.filter or {})
        # A filter the engine can index runs on the server, before the limit.
        server_filter = wanted if wanted and value_metadata(wanted) == wanted else None
        if op.query:
            found = self.client.recall(
                scope, op.query, limit=min(op.offset + op.limit, 50), metadata=server_filter
            )
            rows = [
                (c["scope"], c["content"], c["score"], None)
                for c in found["candidates"]
                if c["returned"]
            ]
        else:
            records = self.client.list_records(
                scope, status="active", limit=op.offset + op.limit, metadata=server_filter
            )
            rows = [(r["scope"], r["content"], None, r) for r in records["items"] if not _lapsed(r)]
        items = []
        for row_scope, content, score, record in rows[op.offset : op.offset + op.limit]:
            key, value = _split(content)
            # Re-checked on the value: a filter the server could not run (a nested
            # value, an odd key) still only returns matching items.
            if wanted and any(value.get(name) != want for name, want in wanted.items()):
                continue
            stamp = _when(record["created_at"]) if record else datetime.now().astimezone()
            items.append(
                SearchItem(
                    namespace=_scope_namespace(row_scope),
                    key=key,
                    value=value,
                    created_at=stamp,
                    updated_at=_when(record["updated_at"]) if record else stamp,
                    score=score,
                )
            )
        return items

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        # The scopes holding active records below the token's own scope, when it names one.
        token_scope = self.client.whoami()["scope"]
        if "*" in token_scope:
            raise ValueError(
                "list_namespaces needs a token bound to one scope (its records and those "
                f"below it are listed); this token's scope is {token_scope!r}"
            )
        seen: dict[tuple[str, ...], None] = {}
        for record in self.client.iter_records(
            token_scope, status="active", include_descendants=True
        ):
            seen[_scope_namespace(record["scope"])] = None
        found = list(seen)
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            size = len(path)
            if condition.match_type == "prefix":
                found = [ns for ns in found if _matches(ns[:size], path)]
            else:
                found = [ns for ns in found if _matches(ns[-size:], path)]
        if op.max_depth is not None:
            found = list(dict.fromkeys(ns[: op.max_depth] for ns in found))
        return sorted(found)[op.offset : op.offset + op.limit]


def _matches(part: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(part) == len(pattern) and all(
        p in ("*", s) for s, p in zip(part, pattern, strict=True)
    )
