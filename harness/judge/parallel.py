"""What a run's data-parallel jobs say, judged once (`judge`): every medium renders this object.

A data-parallel job (suites/contract/ranks.py, `devices` >= 1) times its N-way step and, interleaved in
the same process group, the 1-way step; rank 0 records both under the result's `parallel` block
(harness/core/parallel_types.py, checked by schema.py). Here, per framework:

- the figures, with the ones the host can work out again worked out again from the block's own inputs
  (efficiency from the two throughputs, exposed communication from the step and compute times, the
  straggler from every rank's compute time), because a figure is trusted for how it was made, not for
  who wrote it down; where the job's own field disagrees, a note says so;
- efficiency is a figure measured inside one job, never a verdict between runs: it is not tested for
  significance, and it is flagged (a guard's word beside it, not a clean number) when either step it
  divides was flagged or disturbed;
- the agreement gate (`gate_rows`): the 1-way step's checks against the N-way job's own checks of the
  same names, with the data-parallel tolerances (`parallel_checks()`): the N-way step must compute the
  1-way step's answer. A failed row fails the framework like a failed cross-framework check
  (judge/assessment.py merges the rows into the gate's failures), and so the run's exit status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.core.result_types import Check, Result
from harness.core.schema import missing_rounds
from harness.judge import guards
from harness.judge.guards.agreement import CheckRow, _shape, agrees, declared_checks, max_rel_diff, tolerance_text
from harness.judge.guards.contention import GUARD as CONTENTION
from harness.judge.guards.contention import disturbed_samples
from harness.store.run_folder import Run
from harness.text.numbers import fmt_rel_diff
from suites.contract.ranks import PARALLEL_CHECKS, STRAGGLER_RATIO, data_parallel, parallel_checks
from suites.contract.ranks import straggler as contract_straggler
from suites.contract.spec import CheckSpec

# The job's ordinary metrics beside the block (suites/runtime/data_parallel.py records them).
STEP_METRIC = "dp step"
SINGLE_METRIC = "dp step (1-way)"
# How far the job's own efficiency or exposed communication may be from the host's before a note says
# so: both come from the same medians, so only a different formula (or an edit) moves them this far.
RECOMPUTED_RTOL = 1e-3
BLOCK_ROW = "data-parallel block"  # the gate row of an ok data-parallel job that recorded no block
NO_CHECKS_ROW = "data-parallel checks"  # ... and of one whose N-way and 1-way steps recorded no check
Key = tuple[str, str]


@dataclass(frozen=True)
class Straggler:
    rank: int
    ratio: float  # its compute_s over the median of the other ranks'


@dataclass(frozen=True)
class RankRow:
    rank: int
    host: str  # from the file: every medium escapes it
    step_s: float
    compute_s: float
    allreduce_s: float | None
    straggler: bool


@dataclass(frozen=True)
class Figures:
    """One framework's data-parallel job, its figures judged (host-recomputed where it can)."""

    framework: str
    devices: int
    scaling: str
    collectives: str
    global_batch: int
    per_device_batch: int
    unit: str
    items_per_row: int
    steps_per_interval: int
    step_s: float
    single_step_s: float | None
    single_batch: int | None
    throughput: float
    single_throughput: float | None
    efficiency: float | None  # throughput / (devices x single_throughput), worked out here
    efficiency_flag: str | None  # the flag word shown in front of it (a guard's), None: a clean figure
    efficiency_why: str | None  # what the flag is about, in words
    compute_s: float
    exposed_comm_s: float | None  # step_s - compute_s, worked out here; None for one device
    overlap: float | None  # the job's: the share of the all-reduce hidden behind compute
    allreduce_bytes: int | None
    allreduce_s: float | None
    gradient_allreduce_s: float | None  # the gradients as the framework reduces them (per tensor, buckets)
    gradient_collectives: int | None
    algbw_Bps: float | None
    busbw_Bps: float | None
    peak_Bps: float | None
    ranks: tuple[RankRow, ...]
    straggler: Straggler | None  # the host's reading of ranks[].compute_s
    job_straggler: Straggler | None  # what the job named
    notes: tuple[str, ...] = ()  # where the job's own fields disagree with the host's reading

    @property
    def items(self) -> int:
        """Items (samples or tokens) in one N-way step."""
        return self.global_batch * self.items_per_row

    @property
    def peak_share(self) -> float | None:
        """Bus bandwidth as a share of the link's peak; None where the peak is unknown."""
        return None if self.busbw_Bps is None or self.peak_Bps is None else self.busbw_Bps / self.peak_Bps

    @property
    def over_peak(self) -> bool:
        """Bus bandwidth above the link's physical peak: a measurement bug, never a record."""
        return (share := self.peak_share) is not None and share > 1.0


@dataclass
class GateRow(CheckRow):
    """One 1-way-against-N-way check: `values` holds each framework's 1-way value, `nway` its N-way one,
    `rel_diff` how far apart they are, relatively; `reference` is None (each framework is held to itself)."""

    nway: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Parallel:
    """The run's data-parallel jobs, judged: figures per framework and the 1-way gate."""

    figures: tuple[Figures, ...]
    gate: tuple[GateRow, ...]
    missing: tuple[str, ...] = ()  # ok data-parallel jobs with no block (their gate row fails)

    def of(self, framework: str) -> Figures | None:
        return next((f for f in self.figures if f.framework == framework), None)

    @property
    def gate_passed(self) -> bool:
        return all(all(row.passed.values()) for row in self.gate)


def _ok_parallel(run: Run) -> dict[str, Result]:
    """The ok jobs of the run that ran the data-parallel loop, in run order."""
    # A parameter (a Scalar) may be null, which data_parallel reads as "not a count" too.
    return {fw: r for fw, r in run.results.items() if r["status"] == "ok" and data_parallel(r["params"])}


def gate_rows(run: Run) -> tuple[GateRow, ...]:
    """The 1-way gate: per data-parallel check, each framework's 1-way value against its N-way value.

    A framework fails a row when the two disagree beyond the check's tolerance, when one side lacks
    the value the other has, or (rows of their own) when an ok data-parallel job recorded no block or
    no checks at all: a gate with nothing to compare passes nothing. A job on one device has no 1-way
    step apart from its N-way one, and no row."""
    declared = declared_checks(run)
    # name -> the declared CheckSpec of each data-parallel check (the suite's, else the contract's)
    specs = {c.name: declared.get(c.name, c) for c in parallel_checks()}
    rows: dict[str, GateRow] = {}

    def row(name: str) -> GateRow:
        if name not in rows:
            spec = specs.get(name)
            tol = spec.as_record() if spec is not None else {"limit": None, "rtol": 0.0, "atol": 0.0}
            rows[name] = GateRow(name, spec.help if spec else "", tolerance_text({**tol, "limit": None}, "N-way"))
        return rows[name]

    for fw, result in _ok_parallel(run).items():
        block = result.get("parallel")
        if not isinstance(block, dict):
            gate = row(BLOCK_ROW)
            gate.passed[fw], gate.why[fw] = False, "an ok data-parallel job recorded no parallel block"
            continue
        if block["devices"] < 2:
            continue
        nway = {c["name"]: _round_one(c, result) for c in result["checks"] if c["name"] in PARALLEL_CHECKS}
        single = block.get("single")
        one_way = {c["name"]: c["value"] for c in single["checks"]} if isinstance(single, dict) else {}
        if not (names := [n for n in PARALLEL_CHECKS if n in nway or n in one_way]):
            gate = row(NO_CHECKS_ROW)
            gate.passed[fw], gate.why[fw] = False, "neither the N-way nor the 1-way step recorded a data-parallel check"
            continue
        for name in names:
            _judge_cell(row(name), fw, nway.get(name), one_way.get(name), specs.get(name), single is None)
    return tuple(rows[n] for n in (BLOCK_ROW, NO_CHECKS_ROW, *PARALLEL_CHECKS) if n in rows)


def _round_one(check: Check, result: Result) -> Any:
    """The N-way value the block's 1-way value is held to. Pooled rounds (harness/execute/rounds.py)
    keep round 1's block and every round's check values, in round order: round 1's value then, or None
    where round 1 left the check out (the cross-framework gate fails it already)."""
    rounds = result["settings"].get("rounds")
    if not (isinstance(rounds, int) and rounds >= 2 and isinstance(check["value"], list)):
        return check["value"]
    return None if 1 in missing_rounds(check) else check["value"][0]


def _judge_cell(gate: GateRow, fw: str, nway: Any, single: Any, spec: CheckSpec | None, no_single: bool) -> None:
    if nway is not None:
        gate.nway[fw] = nway
    if single is None:
        gate.passed[fw] = False
        gate.why[fw] = "no 1-way value (parallel.single is null)" if no_single else "no 1-way value"
        return
    gate.values[fw] = single
    if nway is None:
        gate.passed[fw], gate.why[fw] = False, "no N-way value to hold it to"
        return
    rtol = spec.rtol if spec is not None and spec.rtol is not None else 0.0
    atol = spec.atol if spec is not None else 0.0
    if _shape(single) != _shape(nway):
        gate.passed[fw], gate.why[fw] = False, "shape differs from the N-way value"
        gate.rel_diff[fw] = None
        return
    diff = gate.rel_diff[fw] = max_rel_diff(single, nway)
    gate.passed[fw] = agrees(single, nway, rtol, atol)
    if not gate.passed[fw]:
        gate.why[fw] = f"1-way differs from N-way by {fmt_rel_diff(diff)} (rtol {rtol:g})"


def straggler_of(compute: Sequence[float | Sequence[float]]) -> Straggler | None:
    """The straggler by the contract's one rule (suites/contract/ranks.py `straggler`, the job's too), from
    each rank's compute samples, or its one compute time where a rank recorded no samples."""
    rows = [[float(c)] if isinstance(c, (int, float)) else [float(v) for v in c] for c in compute]
    found = contract_straggler(rows)
    return Straggler(int(found["rank"]), float(found["ratio"])) if found is not None else None


def _straggler_note(host: Straggler | None, job: Straggler | None) -> str | None:
    if (host.rank if host else None) == (job.rank if job else None):
        return None
    said = f"the job named rank {job.rank} ({job.ratio:.2f}x)" if job else "the job named no straggler"
    if host is None:
        found = f"no rank's compute time is over {STRAGGLER_RATIO:g}x the others' median"
    else:
        found = f"rank {host.rank}'s compute time is {host.ratio:.2f}x the others' median"
    return f"straggler: {said}, but from ranks[].compute_s {found}; the host's reading is shown"


def _apart(a: float, b: float, scale: float) -> bool:
    return abs(a - b) > RECOMPUTED_RTOL * max(abs(scale), 1e-30)


def _efficiency_flag(fw: str, result: Result, flagged_by: Mapping[Key, str]) -> tuple[str | None, str | None]:
    """(flag word, why) when either step the efficiency divides was flagged by a guard or has contended
    samples; (None, None) for a clean figure."""
    metrics = {m["name"]: m for m in result["metrics"]}
    for name in (STEP_METRIC, SINGLE_METRIC):
        guard = guards.by_name(flagged_by[(fw, name)]) if (fw, name) in flagged_by else None
        if guard is not None:
            return guard.word, f"{name} is flagged {guard.word}"
    disturbed = [
        f"{name}: {len(found)} of {len(metrics[name]['samples'])} samples disturbed"
        for name in (STEP_METRIC, SINGLE_METRIC)
        if name in metrics and (found := disturbed_samples(metrics[name]))
    ]
    return (CONTENTION.word, "; ".join(disturbed)) if disturbed else (None, None)


def figures_of(fw: str, result: Result, flagged_by: Mapping[Key, str]) -> Figures | None:
    block = result.get("parallel")
    if not isinstance(block, dict):
        return None
    devices = block["devices"]
    single_throughput = block["single_throughput"]
    efficiency = block["throughput"] / (devices * single_throughput) if single_throughput else None
    exposed = block["step_s"] - block["compute_s"] if devices > 1 else None
    notes = []
    recorded_efficiency = block["efficiency"]
    if efficiency is not None and recorded_efficiency is not None and _apart(recorded_efficiency, efficiency, 1.0):
        notes.append(
            f"efficiency: the job recorded {recorded_efficiency:.4g}, its throughputs give {efficiency:.4g}; "
            "the host's figure is shown"
        )
    job_exposed = block["exposed_comm_s"]
    if exposed is not None and job_exposed is not None and _apart(job_exposed, exposed, block["step_s"]):
        notes.append(
            f"exposed communication: the job recorded {job_exposed:.4g} s, step minus compute is {exposed:.4g} s; "
            "the host's figure is shown"
        )
    host = straggler_of([r.get("compute_samples") or r["compute_s"] for r in block["ranks"]])
    recorded = block["straggler"]
    job = Straggler(recorded["rank"], recorded["ratio"]) if recorded is not None else None
    if note := _straggler_note(host, job):
        notes.append(note)
    rounds = result["settings"].get("rounds")
    if isinstance(rounds, int) and rounds >= 2:
        notes.append(f"figures of round 1 of {rounds}: the parallel block is one process's, not pooled")
    straggler = host.rank if host is not None else None
    flag, why = _efficiency_flag(fw, result, flagged_by) if efficiency is not None else (None, None)
    allreduce = block["allreduce"]
    return Figures(
        framework=fw,
        devices=devices,
        scaling=block["scaling"],
        collectives=block["collectives"],
        global_batch=block["global_batch"],
        per_device_batch=block["per_device_batch"],
        unit=block["unit"],
        items_per_row=block["items_per_row"],
        steps_per_interval=block["steps_per_interval"],
        step_s=block["step_s"],
        single_step_s=block["single_step_s"],
        single_batch=block["single_batch"],
        throughput=block["throughput"],
        single_throughput=single_throughput,
        efficiency=efficiency,
        efficiency_flag=flag,
        efficiency_why=why,
        compute_s=block["compute_s"],
        exposed_comm_s=exposed,
        overlap=block["overlap"],
        allreduce_bytes=allreduce["bytes"] if allreduce else None,
        allreduce_s=allreduce["seconds"] if allreduce else None,
        gradient_allreduce_s=allreduce["gradient_seconds"] if allreduce else None,
        gradient_collectives=allreduce["gradient_collectives"] if allreduce else None,
        algbw_Bps=allreduce["algbw_Bps"] if allreduce else None,
        busbw_Bps=allreduce["busbw_Bps"] if allreduce else None,
        peak_Bps=allreduce["peak_Bps"] if allreduce else None,
        ranks=tuple(
            RankRow(r["rank"], r["host"], r["step_s"], r["compute_s"], r["allreduce_s"], r["rank"] == straggler)
            for r in block["ranks"]
        ),
        straggler=host,
        job_straggler=job,
        notes=tuple(notes),
    )


def judge(run: Run, gate: Sequence[GateRow], flagged_by: Mapping[Key, str]) -> Parallel | None:
    """The run's data-parallel figures and gate, or None for a run with no data-parallel job.

    `gate`: `gate_rows(run)`, worked out before the guards (its failures join theirs); `flagged_by`:
    (framework, metric) -> the guard that flagged it, which flags an efficiency built on that metric."""
    if not (jobs := _ok_parallel(run)) and not any(isinstance(r.get("parallel"), dict) for r in run.results.values()):
        return None
    figures = [f for fw, r in jobs.items() if (f := figures_of(fw, r, flagged_by)) is not None]
    missing = tuple(fw for fw, r in jobs.items() if not isinstance(r.get("parallel"), dict))
    return Parallel(tuple(figures), tuple(gate), missing)
