"""Human-readable numbers: times auto-scaled to s/ms/us/ns, other values to 4 significant digits."""

from __future__ import annotations

_TIME_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


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
