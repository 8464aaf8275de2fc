"""Every number-to-text rule of the reports, in one place.

One rule per kind of number, so the same ratio never reads `1.23x` in one table and `1.234` in
another:

- times: auto-scaled to s/ms/us/ns, 3 significant digits (`fmt_time`); a spread is shown in the
  unit of the value it spreads around (`scale_from`);
- other values: 4 significant digits plus their unit (`fmt_value`);
- ratios and their intervals: 3 significant digits (`fmt_ratio`, `fmt_interval`), the same in the
  run table, `compare` and the exports;
- rates (FLOP/s, B/s) in giga units, 4 significant digits (`fmt_giga`);
- byte sizes: binary units, B/KiB/MiB/GiB/TiB (`fmt_bytes`), for images, wheelhouses and data;
- p-values: 3 significant digits (`fmt_p`); percentages: 4 (`fmt_percent`); losses: 3, trailing
  zeros kept (`fmt_loss`, `1.80`); shares of a peak
  and interval coverages as whole percents (`fmt_share`); relative changes to one decimal
  (`fmt_change`); relative differences of check values to 2 significant digits (`fmt_rel_diff`);
  a check value in a cell: 6 significant digits, a list of more than six counted (`fmt_check_value`).
"""

from __future__ import annotations

from typing import Any

_TIME_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def time_unit(seconds: float) -> tuple[float, str]:
    for scale, unit in _TIME_SCALES:
        if abs(seconds) >= scale:
            return scale, unit
    return _TIME_SCALES[-1]


def fmt_time(seconds: float, scale_from: float | None = None) -> str:
    scale, unit = time_unit(seconds if scale_from is None else scale_from)
    return f"{seconds / scale:.3g} {unit}"


def fmt_value(value: float, unit: str) -> str:
    if unit == "s":
        return fmt_time(value)
    text = f"{value:.4g}"
    return f"{text} {unit}" if unit else text


def _three(value: float) -> str:
    """3 significant digits, trailing zeros kept (`1.00`, `0.0500`), no dangling point (`123`)."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:#.3g}"


def fmt_ratio(ratio: float) -> str:
    """`1.23x`: how many times the baseline (or run A) this is."""
    return f"{_three(ratio)}x"


def fmt_geomean(ratio: float | None) -> str:
    """A geometric mean of ratios, or why there is none (every metric excluded from comparison)."""
    return "none (no time metric left after exclusions)" if ratio is None else fmt_ratio(ratio)


def fmt_interval(low: float, high: float, coverage: str | None = None) -> str:
    """`[1.19-1.27]`, or `[1.19-1.27 56%]` when the interval covers less than the nominal 95 %."""
    return f"[{_three(low)}-{_three(high)}" + (f" {coverage}" if coverage else "") + "]"


def fmt_giga(value: float) -> str:
    """A rate in giga units (GFLOP/s, GB/s) without the unit: `1234`, `0.5678`."""
    return f"{value / 1e9:.4g}"


def fmt_bytes(size: float) -> str:
    """`512 B`, `1.5 KiB`, `6.3 GiB`: binary units, like `du -h` and the data manifests."""
    for unit in _BYTE_UNITS[:-1]:
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} {_BYTE_UNITS[-1]}"


def fmt_share(fraction: float) -> str:
    """A fraction as a whole percentage: `42%` (of peak, interval coverage)."""
    return f"{fraction:.0%}"


def fmt_change(fraction: float) -> str:
    """A relative change, one decimal: `10.0%` (compare's verdicts)."""
    return f"{fraction:.1%}"


def fmt_rel_diff(value: float) -> str:
    """How far two frameworks' check values are apart, relatively: `3.1e-07`."""
    return f"{value:.2g}"


def fmt_p(p: float) -> str:
    return f"{p:.3g}"


def fmt_percent(value: float) -> str:
    return f"{value:.4g} %"


def fmt_loss(value: float) -> str:
    """A validation or target loss, unitless: `1.80` (a target of 1.8 and a best of 1.80 read alike)."""
    return f"{value:#.3g}"


def fmt_number(value: float) -> str:
    """A bare measured number (check values, limits): 4 significant digits."""
    return f"{value:.4g}"


def fmt_check_value(value: Any) -> str:
    """A check's value in a cell (the run table's, the data-parallel gate's): a short list in full, a long
    one counted."""
    if isinstance(value, list):
        flat = value if not any(isinstance(v, list) for v in value) else []
        return f"[{len(value)} values]" if not flat or len(flat) > 6 else "[" + ", ".join(map(fmt_number, flat)) + "]"
    return f"{value:.6g}"
