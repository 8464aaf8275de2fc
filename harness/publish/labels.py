"""Short names for where and with what a result was measured: its machine and its framework version.

The history groups points by these, so a new machine or a framework upgrade starts a series of
its own instead of hiding inside one line. The environment is free-form JSON from the job: every
field is looked up defensively and made inert.
"""

from __future__ import annotations

from harness.core.result_types import Result
from harness.core.stack_facts import FRAMEWORKS
from harness.core.stack_facts.facts import as_dict
from harness.store.run_folder import Run
from harness.text.escape import plain


def machine(result: Result) -> str:
    """`AMD EPYC 7B13 (2 cores)`, or the GPU's name for a GPU job."""
    env = as_dict(result.get("environment"))
    device = as_dict(env.get("device"))
    if result["device"] == "gpu" and device.get("name"):
        return plain(device["name"])
    cpu = as_dict(as_dict(env.get("machine")).get("cpu"))
    model = plain(cpu.get("model") or "unknown CPU")
    # The machine's own cores, not those a job was pinned to (--threads/--cpus): one machine, one series.
    cores = cpu.get("logical_cores")
    if not isinstance(cores, int) or isinstance(cores, bool):
        cores = cpu.get("usable_cores")
    return f"{model} ({plain(cores)} cores)" if isinstance(cores, int) and not isinstance(cores, bool) else model


def version(result: Result) -> str:
    """`jax 0.4.30`: the framework's own package and version, else every version recorded."""
    versions = {str(k): v for k, v in as_dict(as_dict(result.get("environment")).get("versions")).items() if v}
    framework = result["framework"]
    declared = FRAMEWORKS.get(framework)  # its package (torch for pytorch), from its stack's declaration
    package = framework if framework in versions or declared is None else declared.package
    if package in versions:
        return plain(f"{package} {versions[package]}")
    return plain(", ".join(f"{k} {v}" for k, v in versions.items())) or "version unknown"


def jobs(run: Run) -> str:
    """`numpy ok, jax FAILED (out of memory)`: every job's status, the first line of its reason."""
    parts = []
    for fw, result in run.results.items():
        reason = (result.get("reason") or "").strip().split("\n")[0]
        status = result["status"] if result["status"] == "ok" else result["status"].upper()
        parts.append(f"{fw} {status}" + (f" ({reason})" if reason and result["status"] != "ok" else ""))
    return plain(", ".join(parts)) or "no job produced a valid result"


def _distinct(values: list[str]) -> str:
    return "; ".join(dict.fromkeys(values)) or "-"


def machines(run: Run) -> str:
    return _distinct([machine(r) for r in run.results.values()])


def versions(run: Run) -> str:
    return _distinct([version(r) for r in run.results.values() if r["status"] == "ok"])
