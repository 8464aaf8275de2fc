"""Resource limits from the command line (`--memory 2g`, `--cpus 1.5`), shared by all backends."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.text.escape import plain

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
MAX_MEMORY = 2**50  # 1 PiB: more is a typo, and past 2**63 Docker and setrlimit overflow
MIN_CPUS, MAX_CPUS = 0.01, 4096.0  # Docker's smallest CPU quota; more cores than any machine has


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = None
    cpus: float | None = None


def parse_memory(text: str) -> int:
    match = re.fullmatch(r"\s*(\d{1,20}(?:\.\d{1,20})?)\s*([bkmgt]?)i?b?\s*", text.lower())
    if not match:
        raise HarnessError(f"--memory {plain(text)!r} is not a size; use e.g. 512m or 4g")
    amount = float(match.group(1)) * _UNITS[match.group(2)]
    if amount > MAX_MEMORY:
        raise HarnessError(f"--memory {plain(text)!r} is more than 1 PiB; give the limit a job should really have")
    value = int(amount)
    if value < 6 * 2**20:  # Docker refuses less than 6 MB; a job needs more anyway
        raise HarnessError(f"--memory {plain(text)!r} is too small; give at least 6m")
    return value


def make_limits(memory: str | None, cpus: float | None) -> Limits:
    if cpus is not None and not (math.isfinite(cpus) and MIN_CPUS <= cpus <= MAX_CPUS):
        raise HarnessError(f"--cpus {cpus:g} must be a number of CPUs from {MIN_CPUS:g} to {MAX_CPUS:g}")
    return Limits(memory_bytes=parse_memory(memory) if memory is not None else None, cpus=cpus)
