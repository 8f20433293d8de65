"""Adapter registry: which adapter handles an operation's ``adapter`` name.

Adapters are built on each lookup from a factory, so settings such as
``AETNAWEB_ACTIONS_ROOT`` are read at call time. Tests and the demo register
extra adapters with :func:`registered_adapter`; nothing registers an adapter
from a request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from actions.adapters.base import (
    ActionAdapter,
    Observation,
    PreparationContext,
    PreparedOperation,
)
from actions.adapters.filesystem import FilesystemAdapter, describe_prepared
from actions.errors import AdapterNotRegistered

AdapterFactory = Callable[[], ActionAdapter]


def _filesystem_factory() -> ActionAdapter:
    return FilesystemAdapter(settings.AETNAWEB_ACTIONS_ROOT)


_FACTORIES: dict[str, AdapterFactory] = {"filesystem": _filesystem_factory}


def register_adapter(name: str, factory: AdapterFactory) -> None:
    _FACTORIES[name] = factory


def unregister_adapter(name: str) -> None:
    _FACTORIES.pop(name, None)


def get_adapter(name: str) -> ActionAdapter:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise AdapterNotRegistered(f"no guarded-action adapter registered as {name!r}")
    return factory()


@contextmanager
def registered_adapter(name: str, factory: AdapterFactory) -> Iterator[None]:
    """Register ``factory`` under ``name`` for the duration of a block, then restore."""
    previous = _FACTORIES.get(name)
    _FACTORIES[name] = factory
    try:
        yield
    finally:
        if previous is None:
            _FACTORIES.pop(name, None)
        else:
            _FACTORIES[name] = previous


def describe(adapter: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """A reviewer-facing description of a prepared payload: ``{"target", "diff"}``."""
    if adapter == "filesystem":
        return describe_prepared(payload)
    arguments = payload.get("arguments") or {}
    sensitive = set(payload.get("sensitive_fields") or ())
    shown = {
        key: ("<sensitive>" if key in sensitive else value) for key, value in arguments.items()
    }
    return {"target": str(shown), "diff": ""}


__all__ = [
    "ActionAdapter",
    "AdapterFactory",
    "FilesystemAdapter",
    "Observation",
    "PreparationContext",
    "PreparedOperation",
    "describe",
    "get_adapter",
    "register_adapter",
    "registered_adapter",
    "unregister_adapter",
]
