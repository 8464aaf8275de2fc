"""What a suite declares about itself: parameters, check tolerances, supported frameworks.

Read by the host (planning, `harness list`, validation) and by the job (defaults), so it
must stay standard-library only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

ParamValue = Union[int, float, str, bool]

SMOKE_REPEAT = 3
SMOKE_WARMUP = 0

_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _bound(value: float) -> str:
    """A range's end as the user types it: 2147483647, not 2.14748e+09 (which reads as a rounder limit)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


class SpecError(ValueError):
    """A parameter value or name that the suite does not accept (message names the fix)."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # one of int, float, str, bool
    default: ParamValue
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None

    def describe_range(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.type == "bool":
            return "true or false"
        parts = []
        if self.min is not None:
            parts.append(f">= {_bound(self.min)}")
        if self.max is not None:
            parts.append(f"<= {_bound(self.max)}")
        kind = "an integer" if self.type == "int" else "a number" if self.type == "float" else "text"
        return kind + (" " + " and ".join(parts) if parts else "")

    def parse(self, raw: str) -> ParamValue:
        """Turn command-line text into a checked value."""
        text = raw.strip()
        value: ParamValue
        try:
            if self.type in ("int", "float") and not text.isascii():
                raise ValueError(text)  # int() reads other scripts' digits ("٣٢" is 32): only 0-9 here
            if self.type == "int":
                value = int(text)
            elif self.type == "float":
                value = float(text)
            elif self.type == "bool":
                if text.lower() in _TRUE:
                    value = True
                elif text.lower() in _FALSE:
                    value = False
                else:
                    raise ValueError(text)
            else:
                value = text
        except ValueError:
            raise SpecError(f"parameter {self.name}={raw!r} is not valid: expected {self.describe_range()}") from None
        return self.check(value)

    def check(self, value: Any) -> ParamValue:
        """Validate an already-typed value (from JSON or a default)."""
        expected = _TYPES[self.type]
        if self.type == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
            raise SpecError(f"parameter {self.name}={value!r} is not valid: expected {self.describe_range()}")
        if self.type == "float" and value != value:  # NaN
            raise SpecError(f"parameter {self.name} must be a number, not NaN")
        if self.choices and value not in self.choices:
            raise SpecError(f"parameter {self.name}={value!r} is not valid: expected {self.describe_range()}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            too_low = self.min is not None and value < self.min
            too_high = self.max is not None and value > self.max
            if too_low or too_high:
                raise SpecError(f"parameter {self.name}={value!r} is out of range: expected {self.describe_range()}")
        return value  # type: ignore[return-value]


@dataclass(frozen=True)
class CheckSpec:
    """A check value every framework reports, and how it passes.

    `limit`: the absolute value must not exceed it (e.g. a residual).
    `rtol`/`atol`: agreement with the reference framework's value, elementwise:
    |v - base| <= atol + rtol * |base|.
    `frameworks`: the frameworks that report it (None: every one the suite runs);
    `required`: False only for a check whose presence depends on the parameters. The gate
    fails an ok job that leaves out a required check: a check nobody reports passes nothing.
    """

    name: str
    help: str
    limit: float | None = None
    rtol: float | None = None
    atol: float = 0.0
    frameworks: tuple[str, ...] | None = None
    required: bool = True

    def required_of(self, framework: str) -> bool:
        return self.required and (self.frameworks is None or framework in self.frameworks)

    def as_record(self) -> dict[str, Any]:
        return {"limit": self.limit, "rtol": self.rtol, "atol": self.atol}


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    description: str
    frameworks: tuple[str, ...]
    params: tuple[Param, ...] = ()
    checks: tuple[CheckSpec, ...] = ()
    # frameworks that are named on purpose but cannot run this workload: a skip, with the reason
    unsupported: dict[str, str] = field(default_factory=dict)
    repeat: int = 5
    warmup: int = 1
    timeout_s: float = 1800.0
    x64: bool = False
    hidden: bool = False
    # Whether `--precision tf32|bf16` means anything here: the work is float32 matmuls/convolutions.
    precision_axis: bool = False
    # The smallest parameters that still run the real path: tests, `harness run --smoke` and
    # `harness selftest` use them (with SMOKE_REPEAT steady samples), declared once, here.
    smoke: dict[str, ParamValue] = field(default_factory=dict)
    # The metric names its implementations report (any framework's), where they do not depend on
    # the parameters: `harness bisect --metric` is checked against them before it builds anything.
    # Empty: not declared (e.g. names that carry a parameter's value); bisect checks after its first job.
    metrics: tuple[str, ...] = ()
    # Metric name -> the name its share of the datasheet peak goes by where it has one of its own
    # (gpt's train step: "MFU", model FLOPs utilisation): `harness describe` and the table say it.
    peak_shares: dict[str, str] = field(default_factory=dict)
    # What the values must satisfy together (e.g. a width that the head count divides): the problem
    # and its fix in one line, or None. Checked with every resolve, so the host refuses before any job.
    constraint: Callable[[dict[str, ParamValue]], str | None] | None = None
    # Values one parameter sets for others (a preset's model shape), applied after the constraint, so
    # that the resolved parameters (the plan, the result, the report's header) say what really ran.
    derive: Callable[[dict[str, ParamValue]], dict[str, ParamValue]] | None = None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        valid = ", ".join(p.name for p in self.params) or "none"
        raise SpecError(f"unknown parameter {name!r} for suite {self.name}; valid: {valid}")

    def check_spec(self, name: str) -> CheckSpec | None:
        return next((c for c in self.checks if c.name == name), None)

    def defaults(self) -> dict[str, ParamValue]:
        return {p.name: p.default for p in self.params}

    def resolve(self, given: dict[str, Any]) -> dict[str, ParamValue]:
        """Defaults overlaid with validated given values."""
        values = self.defaults()
        for name, value in given.items():
            values[name] = self.param(name).check(value)
        problem = self.constraint(values) if self.constraint is not None else None
        if problem:
            raise SpecError(f"suite {self.name}: {problem}")
        if self.derive is not None:
            values.update(self.derive(values))
        return values

    @property
    def all_frameworks(self) -> tuple[str, ...]:
        return self.frameworks + tuple(f for f in self.unsupported if f not in self.frameworks)
