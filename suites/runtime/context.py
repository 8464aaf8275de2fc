"""The one timing contract every suite uses.

`measure` times the first call (trace, compile, autotune) on its own, then runs `warmup`
untimed calls, then `repeat` timed calls. Every call, timed or not, ends with the
framework's synchronisation on its output, so asynchronous dispatch never leaks work
into the next sample. After every timed call a device-wide barrier, outside the clock,
proves that nothing was left running (runtime/syncguard.py); a metric whose samples left
work behind is recorded as `sync: escaped` and the host never prints it as a number.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suites.contract import marks
from suites.contract.frameworks import Barrier
from suites.contract.spec import SuiteSpec
from suites.contract.stats import summarize
from suites.runtime import contention, profiling, syncguard

Sync = Callable[[Any], None]


def _no_sync(out: Any) -> None:
    """Deliberately nothing (see `measure(synchronise=False)`)."""


def _uncounted() -> int | None:
    return None


def _finite(value: Any, what: str) -> Any:
    if isinstance(value, (list, tuple)):
        return [_finite(v, what) for v in value]
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} is {number}, not a finite number")
    return number


ClockState = tuple[float | None, int | None]  # a GPU's (SM clock MHz, NVML clock-event reasons) after a sample


@dataclass
class Readings:
    """What the process got around each timed sample, read outside its clock (runtime/contention.py):
    `before[i]` and `after[i]` bracket sample i; `gpu[i]`, on GPU jobs whose meter reads it, the
    GPU's clock state just after sample i. `measure` takes them, and so does a loop that times
    itself (runtime/training.py), handing them to `record_time`."""

    before: list[contention.Reading] = field(default_factory=list)
    after: list[contention.Reading] = field(default_factory=list)
    gpu: list[ClockState] = field(default_factory=list)
    # Readings around no sample (a loop's first, compiling epoch): they join the job's timeline, so a
    # short sample's window reaches back over them as over an earlier metric's (runtime/contention.py).
    context: list[contention.Reading] = field(default_factory=list)

    def start(self) -> None:
        """Just before a sample's clock starts."""
        self.before.append(contention.read(before=True))

    def stop(self) -> None:
        """Just after a sample's clock stopped."""
        self.after.append(contention.read(before=False))

    def clock(self, clock_state: Callable[[], ClockState] | None) -> None:
        """After `stop`: the GPU's clock state, where the energy meter reads it (None: no GPU)."""
        if clock_state is not None:
            self.gpu.append(clock_state())


class Context:
    """Handed to a suite's `run(ctx)`: parameters, device, and the measurement API."""

    def __init__(
        self,
        spec: SuiteSpec,
        framework: str,
        params: dict[str, Any],
        *,
        repeat: int,
        warmup: int,
        device: Any,
        device_kind: str,
        sync: Sync,
        data_dir: Path | None = None,
        artifacts_dir: Path | None = None,
        result_path: Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
        barrier: Barrier | None = None,
        holds_work: Callable[[Any], bool] | None = None,
        sync_check: bool = True,
        energy_meter: Callable[[], Any] | None = None,
        precision: str = "fp32",
        compile_counter: Callable[[], Callable[[], int | None]] | None = None,
        profiler: Callable[[], profiling.Profiler] | None = None,
        profile_steps: int = 0,
    ) -> None:
        self.spec = spec
        self.framework = framework
        self.params = params
        self.repeat = repeat
        self.warmup = warmup
        self.device = device
        self.device_kind = device_kind
        # `--precision` (contract/settings.py): training loops read it to compute in bf16 for real.
        self.precision = precision
        self.sync = sync
        self.data_dir = data_dir  # read-only datasets (`harness data`); suites never download
        self.artifacts_dir = artifacts_dir  # optional extra files written next to the result
        self.result_path = result_path  # only the fault-injection suite touches it
        self._clock = clock
        # None: a synchronous framework (NumPy, PyTorch on the CPU), where nothing can escape.
        self.barrier = barrier
        self.sync_check = sync_check  # False only to measure the barrier's own cost (benchmarks/)
        self._holds_work = holds_work
        # GPU jobs: a factory of nvml.EnergyMeter, entered before a clock starts and left after
        # it stops (suites/runtime/nvml.py); None where there is no GPU energy to read.
        self.energy_meter = energy_meter
        # The framework's running count of compilations (None: it compiles nothing we can count),
        # built at the first `measure`: its canary compilation is not free, and training loops
        # that never call `measure` count their own.
        self._compile_counter = compile_counter
        self._compilations: Callable[[], int | None] | None = None
        # `--profile`: steps recorded under the framework's profiler after each time metric's
        # samples (0: none); `profiler` builds the framework's (None: it has none).
        self.profile_steps = profile_steps
        self._profiler = profiler
        self.profiles: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.notes: list[str] = []
        # Training suites: which data the numbers came from (name, revision, fingerprint) and the
        # time-to-target outcome; written to the result's `dataset` and `training` fields.
        self.dataset: dict[str, Any] | None = None
        self.training: dict[str, Any] = {}
        # A data-parallel job's figures (runtime/data_parallel.py), written by rank 0 only.
        self.parallel: dict[str, Any] | None = None
        # `mode=infer`/`generate` (runtime/inference.py): which metrics are the latency, its percentiles
        # and the throughput sweep, so the host never parses metric names.
        self.inference: dict[str, Any] | None = None
        # Every contention reading of this job, from its start: short metrics' windows reach back into it.
        self._timeline: list[contention.Reading] = [contention.STARTED, contention.read(before=False)]

    def _timed(self, fn: Callable[[], Any], sync: Sync) -> tuple[float, Any]:
        start = self._clock()
        out = fn()
        sync(out)
        return self._clock() - start, out

    def probe_escape(self) -> syncguard.Probe | None:
        """The device-wide barrier pair, run after a sample's clock stopped (None: synchronous)."""
        if self.barrier is None or not self.sync_check:
            return None
        return syncguard.probe(self.barrier, self._clock)

    def sync_record(
        self,
        samples: Sequence[float],
        probes: Sequence[syncguard.Probe | None],
        first: tuple[float, syncguard.Probe | None] | None = None,
    ) -> dict[str, Any]:
        """The `sync` field of a time metric: its state and the barrier evidence.

        `samples`: raw durations (before per-call scaling) that `probes` followed, in order;
        `first`: (first-call duration, its probe), checked by the same rule.
        """
        if not self.sync_check:
            return {"state": syncguard.UNCHECKED, "why": "sync-escape check switched off (HARNESS_SYNC_CHECK=off)"}
        if self.barrier is None:
            return syncguard.synchronous_verdict("synchronous framework: no work can outlive the call")
        checked = [p for p in probes if p is not None]
        if len(checked) != len(samples):
            return {"state": syncguard.UNCHECKED, "why": f"{len(checked)} barrier probes for {len(samples)} samples"}
        record = syncguard.verdict(samples, checked)
        if first is not None and first[1] is not None:
            first_verdict = syncguard.verdict([first[0]], [first[1]])
            record["first_call_excess_s"] = first_verdict["excess_median_s"]
            if first_verdict["state"] == syncguard.ESCAPED and record["state"] == syncguard.OK:
                record["state"] = syncguard.ESCAPED
                record["why"] = "the first call left work running after its clock stopped"
        return record

    def sample_marks(self, samples: Sequence[float], probes: Sequence[syncguard.Probe | None]) -> dict[str, list[int]]:
        """The `marks` field of a time metric: reason -> indices into `samples`, non-empty lists only.

        Empty wherever `sync_record` has no per-sample evidence (check off, synchronous framework,
        a probe missing), so a mark is always something a barrier saw, never a guess.
        """
        if not self.sync_check or self.barrier is None:
            return {}
        checked = [p for p in probes if p is not None]
        if len(checked) != len(samples):
            return {}
        found = {marks.ESCAPED: syncguard.escaped_samples(samples, checked)}
        return {reason: indices for reason, indices in found.items() if indices}

    def meter(self) -> AbstractContextManager[Any]:
        """An energy meter for one region (a no-op without a GPU); its `reading` after the block."""
        return self.energy_meter() if self.energy_meter is not None else nullcontext()

    def _loop_energy(self, name: str, meter: Any, calls: float) -> None:
        reading = getattr(meter, "reading", None)
        if reading is None:
            return
        if reading.joules is None:
            self.note(f"energy per call of {name}: no figure ({reading.reason})")
            return
        self.value(
            f"energy per call: {name}",
            reading.joules / calls,
            unit="J",
            better="lower",
            description=f"GPU energy of the {int(calls)} timed calls / {int(calls)} (NVML {reading.method}); "
            "the whole board, idle draw and the barrier checks between samples included",
        )

    def _counter(self) -> Callable[[], int | None]:
        """The job's compilation counter, built once; a framework without one counts None."""
        if self._compilations is None:
            self._compilations = self._compile_counter() if self._compile_counter is not None else _uncounted
        return self._compilations

    def compile_count(self) -> Callable[[], int | None]:
        """The job's running count of compilations (None: not countable), for a loop that times
        itself and has no counter of its own (suites/mistakes)."""
        return self._counter()

    def _returns_nothing(self, out: Any) -> bool:
        return self._holds_work is not None and not self._holds_work(out)

    def measure(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        flops: float | None = None,
        bytes_moved: float | None = None,
        repeat: int | None = None,
        warmup: int | None = None,
        per: float | None = None,
        description: str = "",
        dtype: str | None = None,
        synchronise: bool = True,
        compiles: bool = False,
    ) -> Any:
        """Time `fn`; returns its last output.

        `per`: divide each sample by this (e.g. the loop count of a timed loop) so the
        metric reads "seconds per call". `flops`: floating-point operations of one call
        (after `per`), from which achieved FLOP/s is derived; `dtype` says which peak it is
        held against. `synchronise=False` exists only so tests can prove the plausibility
        lint catches the classic mistake; the metric records that it was not synchronised.
        `compiles=True` declares a metric that times compilation on purpose (a seed's retrace,
        reproduced to show its cost): its compiling samples are counted but not marked.
        Undeclared, a sample inside whose clock the framework compiled is marked `compiled`.
        """
        repeat = self.repeat if repeat is None else repeat
        warmup = self.warmup if warmup is None else warmup
        scale = 1.0 / per if per else 1.0
        sync = self.sync if synchronise else _no_sync
        gc.collect()
        first, out = self._timed(fn, sync)
        first_probe = self.probe_escape()
        warnings = [syncguard.NO_ARRAY_WARNING] if self._returns_nothing(out) else []
        for _ in range(warmup):
            sync(fn())
        raw: list[float] = []
        probes: list[syncguard.Probe | None] = []
        readings = Readings()
        count = self._counter()
        compiled: list[int | None] = []  # compilations inside each sample's clock (None: not observable)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a collection inside one sample is noise another framework doesn't pay
        try:
            with self.meter() as meter:  # entered and left outside every sample's clock
                clock_state = getattr(meter, "clock_state", None)  # GPU jobs: NVML's SM clock and reasons
                for _ in range(repeat):
                    readings.start()  # outside the clock, like the probe
                    ahead = count()  # read outside the clock too
                    elapsed, out = self._timed(fn, sync)
                    behind = count()
                    readings.stop()
                    compiled.append(None if ahead is None or behind is None else behind - ahead)
                    readings.clock(clock_state)
                    probes.append(self.probe_escape())  # outside the clock
                    raw.append(elapsed)
        finally:
            if gc_was_enabled:
                gc.enable()
        samples = [elapsed * scale for elapsed in raw]
        found_marks = self.sample_marks(raw, probes)  # raw and scaled samples share their order
        guarded = self._guard_fields(name, len(raw), readings, compiled, compiles, found_marks)
        self.metrics.append(
            {
                "name": name,
                "kind": "time",
                "unit": "s",
                "better": "lower",
                "description": description,
                "first_call": first * scale,
                "warmup": warmup,
                "samples": samples,
                "stats": summarize(samples),
                "flops": flops,
                "bytes": bytes_moved,
                "dtype": dtype,
                "synchronised": synchronise,
                "sync": self.sync_record(raw, probes, (first, first_probe)),
                "marks": found_marks,
                "contention": guarded["contention"],
                "warnings": warnings,
                "steady_compilations": guarded["steady_compilations"],
                "compiles": compiles,
            }
        )
        self._finished()
        self._loop_energy(name, meter, repeat * (per or 1))
        if synchronise and not compiles:  # a profile of what the samples timed, never of a planted mistake
            self.profile(name, fn, steps_per_sample=1.0 / per if per else 1.0, sync=sync)
        return out

    def profile(
        self,
        name: str,
        step: Callable[[], Any] | None,
        *,
        steps_per_sample: float,
        sync: Sync | None = None,
        unavailable: str | None = None,
        programs: Callable[[], list[str]] | None = None,
    ) -> None:
        """With `--profile`: `profile_steps` more calls of `step`, after the time metric `name`'s samples
        and outside them, under the framework's profiler (runtime/profiling.py). `steps_per_sample`: how
        many calls of `step` make one of the metric's samples (1 / `per` for `measure`, the batches of an
        epoch for a training loop), so the host can hold a profiled step against the timed median.
        A profiler that fails costs the profile, never the job: its entry says why, as does
        `unavailable` (with `step` None), where the way this loop runs has no step to profile.
        `programs`: JAX, the optimised HLO text of the step's compiled programs (runtime/hlo_ops.py)."""
        if not self.profile_steps:
            return
        entry: dict[str, Any] = {"metric": name, "steps_per_sample": steps_per_sample, "device_kind": self.device_kind}
        if unavailable is not None or step is None:
            entry["error"] = unavailable or "no step to profile"
        elif self._profiler is None:
            entry["error"] = f"{self.framework} has no profiler the harness reads"
        elif self.artifacts_dir is None:
            entry["error"] = "this job has no artefact folder to keep the trace in"
        else:
            gc_was_enabled = gc.isenabled()
            gc.disable()  # as in the timed samples
            try:
                entry.update(
                    profiling.capture(
                        self._profiler(),
                        step,
                        sync or self.sync,
                        steps=self.profile_steps,
                        folder=self.artifacts_dir,
                        metric=name,
                        taken={p["trace"] for p in self.profiles if "trace" in p},
                        programs=programs,
                    )
                )
            except Exception as error:  # the job's numbers are already recorded and stand without it
                entry["error"] = f"{type(error).__name__}: {error}"[:500]
            finally:
                if gc_was_enabled:
                    gc.enable()
        self.profiles.append(entry)
        if "error" in entry:  # the entry says why, and so does `show --profile`: no note per metric
            self.progress(f"profile of {name}: none ({entry['error']})")
        else:
            self.progress(f"profile of {name}: {entry['steps']} steps, trace {entry['trace']}")

    def _guard_fields(
        self,
        name: str,
        n: int,
        readings: Readings | None,
        compiled: Sequence[int | None] | None,
        compiles: bool,
        found_marks: dict[str, list[int]],
    ) -> dict[str, Any]:
        """What the host's guards read of a time metric of `n` samples, the same for `measure` and
        `record_time`: `contention` from `readings` (and the CONTENDED and THROTTLED marks it finds),
        `steady_compilations` and `compiles` from `compiled` (each sample's compilations inside its
        clock, None where not observable) with the COMPILED mark. `found_marks` is added to in place.
        A field left out (None argument) is left out of the result."""
        fields: dict[str, Any] = {}
        if readings is not None:
            if len(readings.before) != n or len(readings.after) != n:
                raise ValueError(
                    f"metric {name}: {len(readings.before)}/{len(readings.after)} contention readings for {n} samples"
                )
            gpu = readings.gpu if len(readings.gpu) == n else None
            self._timeline.extend(readings.context)
            seen = contention.record(readings.before, readings.after, gpu, self._timeline)
            self._timeline.extend(r for pair in zip(readings.before, readings.after, strict=True) for r in pair)
            for reason in (marks.CONTENDED, marks.THROTTLED):
                if seen.get(reason):
                    found_marks[reason] = list(seen[reason])
            fields["contention"] = seen
        if compiled is not None:
            if len(compiled) != n:
                raise ValueError(f"metric {name}: {len(compiled)} compilation counts for {n} samples")
            recompiled = [i for i, k in enumerate(compiled) if k]
            if recompiled and not compiles:  # the steady state compiled: these samples timed a compiler, not the work
                found_marks[marks.COMPILED] = recompiled
            observed = all(k is not None for k in compiled)
            # Compilations inside the steady samples' clocks, all together (null: not countable).
            fields["steady_compilations"] = sum(k or 0 for k in compiled) if observed else None
            fields["compiles"] = compiles  # declared: times compilation on purpose
        return fields

    def record_time(
        self,
        name: str,
        *,
        first_call: float,
        samples: Sequence[float],
        flops: float | None = None,
        bytes_moved: float | None = None,
        dtype: str | None = None,
        description: str = "",
        probes: Sequence[syncguard.Probe | None] | None = None,
        first_probe: syncguard.Probe | None = None,
        variant: str | None = None,
        readings: Readings | None = None,
        compiled: Sequence[int | None] | None = None,
        compiles: bool = False,
    ) -> None:
        """A time metric measured by the suite itself (e.g. training epochs, see runtime/training.py).

        For loops that do not fit `measure`: the suite must have ended every sample with the
        framework's synchronisation, and keeps the first (compiling) call out of `samples`.
        `probes`: `probe_escape()` after each sample's clock stopped, in order; without them an
        asynchronous framework's metric is recorded as `sync: unchecked`. `variant`: how this
        framework ran it (e.g. jit, eager), shown beside the metric's name in every table.
        `readings`: taken around each sample's clock, outside it (`Readings.start`/`stop`), as
        `measure` takes them: the metric's `contention` and its contended and throttled marks.
        `compiled`: the compilations inside each sample's clock (None: not observable), whence
        `steady_compilations` and the `compiled` mark, unless `compiles` declares a metric that
        times compilation on purpose. Sample i of each list belongs to `samples[i]`.
        """
        values = _finite(list(samples), f"metric {name}")
        if not values:
            raise ValueError(f"metric {name}: a time metric needs at least one steady sample")
        found_marks = self.sample_marks(values, list(probes or []))
        guarded = self._guard_fields(name, len(values), readings, compiled, compiles, found_marks)
        self.metrics.append(
            {
                "name": name,
                "kind": "time",
                "unit": "s",
                "better": "lower",
                "description": description,
                "first_call": _finite(first_call, f"metric {name} first call"),
                "warmup": 0,
                "samples": values,
                "stats": summarize(values),
                "flops": flops,
                "bytes": bytes_moved,
                "dtype": dtype,
                "synchronised": True,
                "sync": self.sync_record(values, list(probes or []), (float(first_call), first_probe)),
                "marks": found_marks,
                "warnings": [],
                "variant": variant,
                **guarded,
            }
        )
        self._finished()

    def value(
        self,
        name: str,
        samples: float | Sequence[float],
        *,
        unit: str,
        better: str = "higher",
        description: str = "",
        derived_from: str | Sequence[str] | None = None,
    ) -> None:
        """A non-time metric (throughput, accuracy, iterations, memory).

        `derived_from`: the time metric(s) of this job whose samples it was computed from (samples/s
        from epoch seconds); the host then keeps it out of every ratio whenever it keeps a source out
        (contended, recompiled, escaped, ...). Each must have been recorded already.
        """
        values = [samples] if isinstance(samples, (int, float)) else list(samples)
        values = _finite(values, f"metric {name}")
        record: dict[str, Any] = {
            "name": name,
            "kind": "value",
            "unit": unit,
            "better": better,
            "description": description,
            "first_call": None,
            "warmup": 0,
            "samples": values,
            "stats": summarize(values),
            "flops": None,
        }
        if derived_from is not None:
            sources = [derived_from] if isinstance(derived_from, str) else list(derived_from)
            timed = {m["name"] for m in self.metrics if m["kind"] == "time"}
            missing = [source for source in sources if source not in timed]
            if not sources or missing:
                raise ValueError(f"metric {name}: derived from {missing or 'nothing'}, not a time metric of this job")
            record["derived_from"] = derived_from if isinstance(derived_from, str) else sources
        self.metrics.append(record)
        self._finished()

    def _finished(self) -> None:
        """One live line as each metric is recorded: a long suite (xla at N=5000 takes minutes per
        metric) shows where it is in the job's log and on the terminal, not only at the end."""
        metric = self.metrics[-1]
        stats = metric["stats"]
        unit = f" {metric['unit']}" if metric["unit"] else ""
        text = f"{metric['name']} done: median {stats['median']:.6g}{unit} (n={stats['n']})"
        if metric.get("first_call") is not None:
            text += f", first call {metric['first_call']:.6g} s"
        self.progress(text)

    def check(self, name: str, value: float | Sequence[float]) -> None:
        """A check value compared across frameworks with the tolerance the suite declares."""
        declared = self.spec.check_spec(name)
        if declared is None:
            raise KeyError(f"suite {self.spec.name} declares no check named {name!r}")
        record = {"name": name, "value": _finite(value, f"check {name}"), "help": declared.help}
        record.update(declared.as_record())
        self.checks.append(record)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def progress(self, text: str) -> None:
        """A line shown live while the job runs (and kept in its stdout log)."""
        print(f"[{self.spec.name}/{self.framework}] {text}", flush=True)

    def artifact_path(self, name: str) -> Path:
        """Where to write an optional artefact (model summary, HLO text); the folder is created."""
        if self.artifacts_dir is None:
            raise RuntimeError("this job has no artefact folder")
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        return self.artifacts_dir / name
