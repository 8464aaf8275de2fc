"""Resource limits from the command line (`--memory 2g`, `--cpus 1.5`), shared by all backends."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import HarnessError

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = None
    cpus: float | None = None


def parse_memory(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)i?b?\s*", text.lower())
    if not match:
        raise HarnessError(f"--memory {text!r} is not a size; use e.g. 512m or 4g")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value < 6 * 2**20:  # Docker refuses less than 6 MB; a job needs more anyway
        raise HarnessError(f"--memory {text!r} is too small; give at least 6m")
    return value


def make_limits(memory: str | None, cpus: float | None) -> Limits:
    if cpus is not None and cpus <= 0:
        raise HarnessError(f"--cpus {cpus} must be a positive number of CPUs")
    return Limits(memory_bytes=parse_memory(memory) if memory is not None else None, cpus=cpus)
