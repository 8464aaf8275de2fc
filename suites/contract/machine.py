"""Host facts any job records, whatever its framework: Python, OS, CPU, cores."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpuinfo_field(name: str) -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(name):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def vector_extension() -> str | None:
    """The widest FMA-capable SIMD extension, which bounds FLOP/cycle."""
    flags = set((_cpuinfo_field("flags") or "").split())
    for name in ("avx512f", "avx2", "avx", "sse2"):
        if name in flags:
            return name
    if platform.machine() in ("aarch64", "arm64"):
        return "neon"
    return None


def clock_mhz() -> tuple[float | None, float | None]:
    """(reported MHz, maximum MHz if the kernel exposes it)."""
    reported = _cpuinfo_field("cpu MHz")
    maximum = None
    with contextlib.suppress(OSError, ValueError):  # not exposed in most VMs and containers
        maximum = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1000
    return (float(reported) if reported else None), maximum


def describe() -> dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        pages = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu": {
            "model": cpu_model(),
            "logical_cores": os.cpu_count(),
            "usable_cores": usable,
            "vector": vector_extension(),
            "mhz": clock_mhz()[0],
            "max_mhz": clock_mhz()[1],
        },
        "memory_bytes": pages,
        "in_container": Path("/.dockerenv").exists(),
    }
