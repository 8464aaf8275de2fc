"""Which machine measured a result, read from the result's own record (never from the host reading it).

A noise floor, a drift allowance or a history series belongs to the machine that produced the
numbers. The host running `harness compare` or `harness history` may be a laptop reading a cloud
GPU's run folders, so its own hardware says nothing about them: the identity comes from what each
job recorded (suites/contract/machine.py, NVML), the same facts `calibration.fingerprint` keys the
host's ceilings by: CPU model, logical cores, architecture, memory, device, GPU names, threads.

Everything here is read from disk: a missing or odd field is part of the identity as `None`,
never a crash, and the text shown to a user is escaped by the caller's medium.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.core.result_types import Result


def field_at(doc: Any, *path: str) -> Any:
    """doc[path[0]][path[1]]..., or None where a level is missing or not an object."""
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def _scalar(value: Any) -> str | int | float | None:
    """A fact as it may enter the identity: a short scalar, else unknown."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value
    return value[:200] if isinstance(value, str) else None


def _gpu_names(result: Result) -> list[str]:
    gpus = field_at(result, "environment", "nvml", "gpus")
    if not isinstance(gpus, list):
        return []
    names = [_scalar(g.get("name")) for g in gpus[:64] if isinstance(g, dict)]
    return sorted(str(n) for n in names if n is not None)


def facts(result: Result) -> dict[str, Any]:
    """The facts that must be equal for two results to come from one machine (as far as records tell)."""
    device = _scalar(result.get("device"))
    return {
        "cpu": _scalar(field_at(result, "environment", "machine", "cpu", "model")),
        "logical_cores": _scalar(field_at(result, "environment", "machine", "cpu", "logical_cores")),
        "arch": _scalar(field_at(result, "environment", "machine", "machine")),
        "memory_bytes": _scalar(field_at(result, "environment", "machine", "memory_bytes")),
        "device": device,
        "gpus": _gpu_names(result) if device == "gpu" else [],
        "threads": _scalar(field_at(result, "settings", "threads")),
    }


def fingerprint(result: Result) -> str:
    """16 hex digits naming the machine (and device, threads) that measured `result`."""
    return hashlib.sha256(json.dumps(facts(result), sort_keys=True).encode()).hexdigest()[:16]


def differences(a: Result, b: Result) -> list[str]:
    """`cpu X vs Y`: each machine fact that differs between two results (raw text: escape it to show)."""
    fa, fb = facts(a), facts(b)
    return [f"{name} {fa[name]} vs {fb[name]}" for name in fa if fa[name] != fb[name]]


def threads(result: Result) -> int | None:
    """The threads the job was asked to use (`--threads`), None for the framework's own default."""
    value = field_at(result, "settings", "threads")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def identity(result: Result) -> str:
    """The machine and threads behind a number, as one key: a history series never spans two of these."""
    return json.dumps({"threads": threads(result), "machine": fingerprint(result)}, sort_keys=True)


def name(result: Result) -> str:
    """`AMD EPYC 7B13 (8 cores)`, `2x NVIDIA H100 80GB HBM3`: the machine in a few words (raw text)."""
    fact = facts(result)
    if fact["device"] == "gpu":
        gpus = fact["gpus"] or [str(n) for n in [_scalar(field_at(result, "environment", "device", "name"))] if n]
        if gpus:
            counts = {gpu: gpus.count(gpu) for gpu in gpus}
            return ", ".join(f"{count}x {gpu}" if count > 1 else gpu for gpu, count in counts.items())
    cpu = str(fact["cpu"] or "unknown CPU")
    cores = fact["logical_cores"]
    return f"{cpu} ({cores} cores)" if isinstance(cores, int) else cpu


def label(result: Result) -> str:
    """`machine AMD EPYC 7B13 (8 cores), 4 threads`: what tells two series of one workload apart
    (raw text, at most about 100 characters: escape it for the medium that shows it)."""
    count = threads(result)
    shown = "default threads" if count is None else f"{count} thread{'s' if count != 1 else ''}"
    text = name(result)
    return f"machine {text if len(text) <= 80 else text[:79] + '…'}, {shown}"


def labels(by_identity: dict[str, Result]) -> dict[str, str]:
    """`label` of one result per `identity`, with the fingerprint's first 8 digits added where two
    machines read alike (same CPU model and cores, different memory): two series, two labels."""
    found = {key: label(result) for key, result in by_identity.items()}
    shared = {text for text in found.values() if list(found.values()).count(text) > 1}
    return {
        key: f"{text} [{fingerprint(by_identity[key])[:8]}]" if text in shared else text for key, text in found.items()
    }
