"""The guards, found by convention: every module in this folder that defines `GUARD` is registered,
in the order the guards declare (`Guard.order`); adding a guard touches no central list.

`register` exists for guards defined elsewhere (a test plants one); `unregister` takes one back.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.judge.guards.base import Evidence, Guard, Hit, Key, Planted, ok_metrics, time_metrics

__all__ = ["Evidence", "Guard", "Hit", "Key", "Planted", "ok_metrics", "time_metrics", "register", "registered",
           "unregister", "by_name"]  # fmt: skip

_REGISTRY: dict[str, Guard] = {}


def register(guard: Guard) -> Guard:
    """Add a guard; a second guard of the same name is a programming error, not an override."""
    if guard.name in _REGISTRY and _REGISTRY[guard.name] is not guard:
        raise ValueError(f"a guard named {guard.name!r} is registered already")
    _REGISTRY[guard.name] = guard
    return guard


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        guard = getattr(module, "GUARD", None)
        if isinstance(guard, Guard):
            register(guard)


def registered(scope: str | None = None) -> tuple[Guard, ...]:
    """Every guard (or those of one scope), in their declared order."""
    found = sorted(_REGISTRY.values(), key=lambda g: (g.order, g.name))
    return tuple(g for g in found if scope is None or g.scope == scope)


def by_name(name: str) -> Guard | None:
    return _REGISTRY.get(name)


_discover()
