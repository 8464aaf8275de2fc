"""What a profile says about one framework's steady step: time per step by category, reconciled with
the timed median of the same run (docs/method.md, "Profiles: where the step's time goes").

The object every medium renders (terminal, report, site, `compare --profile`); it is computed once
from the job's trace by harness/judge/attribution.py and never assembled by a renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The categories, in the order every medium shows them: (key, label). The same for every framework
# and device kind; the rules that map operation names onto them are data (judge/attribution_rules.py).
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("matmul", "matrix products and convolutions"),
    ("attention", "attention"),
    ("elementwise", "other fused/elementwise kernels"),
    ("reduction", "reductions and normalisation"),
    ("optimizer", "optimiser update"),
    ("collective", "collectives"),
    ("copy", "host-device copies"),
    ("compile", "compilation/retracing"),
    ("overhead", "framework overhead (Python, dispatch, idle compute)"),
)
LABELS = dict(CATEGORIES)
UNATTRIBUTED = "unattributed"  # inside the profiled step, explained by no rule

# The profiler's own cost, profiled step against the timed median, beyond which the breakdown is
# marked: its shares then describe a slower program than the one that was timed.
OVERHEAD_BOUND = 0.25


@dataclass(frozen=True)
class Operation:
    """One operation under the framework's own name (`aten::addmm`, `dot.3`), its time per step."""

    name: str
    seconds: float  # per profiled step


@dataclass(frozen=True)
class Category:
    key: str  # one of CATEGORIES
    seconds: float  # per profiled step
    share: float  # of the profiled step, 0..1
    top: tuple[Operation, ...] = ()  # the largest operations inside it, largest first


@dataclass(frozen=True)
class Breakdown:
    """One (framework, metric) profile, attributed.

    `step_s`: the median profiled step (wall clock, synchronised, profiler on); `timed_step_s`: the
    timed median of the same metric per step (None where the run has no such number);
    `categories`: every key of CATEGORIES, in that order (zeros included), their seconds summing with
    `unattributed_s` to `step_s`; `flag`: why the breakdown cannot be stood behind (None: it can).
    """

    framework: str
    metric: str
    device_kind: str
    profiler: str  # e.g. "torch.profiler 2.13.0"
    steps: int
    step_s: float
    timed_step_s: float | None
    categories: tuple[Category, ...]
    unattributed_s: float
    trace: str  # the trace file, relative to the run folder
    flag: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def overhead(self) -> float | None:
        """The profiler's own cost: profiled step / timed step - 1 (None: no timed step)."""
        if self.timed_step_s is None or self.timed_step_s <= 0:
            return None
        return self.step_s / self.timed_step_s - 1.0

    def seconds(self, key: str) -> float:
        if key == UNATTRIBUTED:
            return self.unattributed_s
        for category in self.categories:
            if category.key == key:
                return category.seconds
        raise KeyError(key)
