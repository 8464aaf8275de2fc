"""Older result versions, brought up to the current one before validation.

One function per version step; `migrate` chains them, so a reader (and every renderer behind
it) only ever sees the current version. The job side writes the current version
(suites/runtime/result.py): a harness reads its own and every older version, never a newer one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suites.runtime.result import SCHEMA_VERSION

OLDEST = 1


def v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 1 left `dataset` and `training` out where they do not apply, the only top-level
    fields that could be absent; version 2 writes every field, null where it does not apply, so a
    missing field is always a broken file."""
    return {**doc, "dataset": doc.get("dataset"), "training": doc.get("training"), "schema_version": 2}


STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: v1_to_v2}


def version_problem(version: Any) -> str | None:
    """Why a document of this schema_version cannot be read, or None."""
    if isinstance(version, int) and not isinstance(version, bool) and OLDEST <= version <= SCHEMA_VERSION:
        return None
    shown = repr(version)[:40] if isinstance(version, (int, str)) and not isinstance(version, bool) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return (
            f"schema_version is {version}, newer than this harness reads ({OLDEST} to {SCHEMA_VERSION}); "
            "upgrade the harness to read it"
        )
    return f"schema_version is {shown or 'missing or not a whole number'}; this harness reads versions {OLDEST} to {SCHEMA_VERSION}"


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` at the current version (a new dict where anything changed; the input is left alone).
    The caller has checked `version_problem(doc["schema_version"])`."""
    while doc["schema_version"] < SCHEMA_VERSION:
        doc = STEPS[doc["schema_version"]](doc)
    return doc
