"""Where a profiled step's time goes: a job's trace cut into its step annotations and attributed to
the categories of harness/judge/breakdown.py by the rules of harness/judge/attribution_rules.py
(docs/method.md, "Profiles: where the step's time goes").

The sweep. Inside each step window, every lane (one thread, one device stream) is at each instant
running its deepest work event: events on one lane nest by time, and the deepest is the one that
started last and has not ended. An event's category is the first enclosing rule that matches it or
an ancestor, else its own name rule, else its nearest ancestor's, else its kind's fallback; work
that nothing names is unattributed. An instant's length is split equally among the lanes running
then; an instant where no lane runs work is overhead, named IDLE. Host lanes (a GPU's host, the
Python thread beside XLA:CPU's executor threads) count only at instants when no work lane runs:
the work then waits on the host. So the categories and the unattributed time add up to the steps'
time exactly, whatever the trace holds.

Each lane is one pass (a stack, its events in start order) that cuts it into segments, each one
event's; then one sort of every segment's ends and one sweep over them, keeping the count of
segments running (= lanes busy) and the integral of 1 / count: a segment's share is that integral
between its ends. O(n log n) in the number of events, never a scan of all lanes per instant.

A step much slower than the median (more than OUTLIER times: the first profiled step's retrace, a
pause) is left out of the shares and named in a note; the shares are those of the other steps'
total time, and the seconds are those shares of the median step, `step_s`.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.result_types import Metric, Result
from harness.judge.attribution_rules import IDLE, TABLES, Lanes, Rule, Table, family
from harness.judge.breakdown import CATEGORIES, OVERHEAD_BOUND, UNATTRIBUTED, Breakdown, Category, Operation
from harness.judge.guards.base import indices
from harness.judge.guards.contention import disturbed_samples, mostly_disturbed
from harness.store.run_folder import Run
from harness.store.traces import Contents, Event, Pid, Trace, job_folder, read_ops, read_trace
from harness.text.escape import plain
from suites.contract.profiles import STEP

OUTLIER = 2.0  # a step longer than this many median steps is left out of the shares
UNATTRIBUTED_BOUND = 0.2  # beyond this share of unexplained work, the breakdown is marked
STEP_MISMATCH = 0.5  # the trace's median step against the result's recorded step times
MAX_STEPS = 1000  # step annotations in one trace (a profile records at most 50)
TOP = 5  # operations named per category

_WORK, _HOST, _CONTEXT = 0, 1, 2


class ProfileError(HarnessError):
    """A trace that cannot be attributed (no step annotation, overlapping steps); one line."""


@dataclass(frozen=True)
class Attribution:
    """One trace, attributed: microseconds over the kept steps, by category and by operation."""

    windows: tuple[tuple[float, float], ...]  # every step annotation (start, end), in time order
    kept: tuple[int, ...]  # the indices of the windows the shares describe
    totals: Mapping[str, float]  # category key or UNATTRIBUTED -> microseconds, summed over the kept steps
    operations: Mapping[str, Mapping[str, float]]  # category key or UNATTRIBUTED -> operation -> microseconds

    @property
    def step_us(self) -> float:
        return statistics.median(end - start for start, end in self.windows)


@dataclass(frozen=True)
class Profiles:
    """Every breakdown of a run and every profile that could not become one (one plain line each)."""

    breakdowns: tuple[Breakdown, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)


# -- The sweep ------------------------------------------------------------------------------------


_MISSING = object()
# What the table decides about one kind of event (its lane, name and XLA op), cached: a trace
# repeats a few hundred names. (tier, own category, fallback category, own enclosing category, name)
Kind = tuple[int, str | None, str | None, str | None, str]
# One selected event on its lane: (start, -length, position in the trace, kind, link value).
Item = tuple[float, float, int, Kind, str | None]
Label = tuple[int, str, str]  # a segment's (tier, category or UNATTRIBUTED, operation)


class _Classifier:
    """The table's decisions about one trace's events."""

    def __init__(self, trace: Trace, table: Table, contents: Contents | None = None) -> None:
        self.trace, self.table, self.contents = trace, table, contents or {}
        self._lanes: dict[tuple[Pid, Pid, str, bool], tuple[int, Lanes] | None] = {}

    def kind(self, event: Event, hlo_op: str | None, module: str | None) -> Kind | None:
        table = self.table
        if table.transparent.fullmatch(event.name):
            return None
        key = (event.pid, event.tid, event.cat, hlo_op is not None)
        if key not in self._lanes:
            self._lanes[key] = self._select(event, hlo_op is not None)
        if (chosen := self._lanes[key]) is None:
            return None
        tier, lane = chosen
        own = None
        if tier != _CONTEXT:
            own = self._by_contents(lane, event.name, hlo_op, module)
            for value in (event.name, *(hlo_op if field == "hlo_op" else event.arg(field) for field in lane.fields)):
                if own is None and value is not None:
                    own = _first(lane.rules, self._key(value), module)
        enclosing = _first(table.enclosing, event.name, None) if table.enclosing else None
        return tier, own, lane.default, enclosing, event.name

    def _by_contents(self, lane: Lanes, name: str, hlo_op: str | None, module: str | None) -> str | None:
        """The category of what an XLA operation runs, when the profile's sidecar says (else None)."""
        if not lane.contents or hlo_op is None or module is None:
            return None
        opcodes = self.contents.get(module, {}).get(hlo_op)
        if not opcodes or (lane.by_name is not None and lane.by_name.fullmatch(self._key(name))):
            return None
        return next((rule.category for rule in lane.contents if any(rule.name.fullmatch(op) for op in opcodes)), None)

    def _select(self, event: Event, has_op: bool) -> tuple[int, Lanes] | None:
        process, thread = self.trace.process(event.pid), self.trace.thread(event.pid, event.tid)
        for tier, group in ((_WORK, self.table.work), (_CONTEXT, self.table.context), (_HOST, self.table.host)):
            for lane in group:
                if (
                    (lane.cat is None or lane.cat.fullmatch(event.cat))
                    and (lane.arg is None or has_op)
                    and (lane.process is None or lane.process.fullmatch(process))
                    and (lane.thread is None or lane.thread.fullmatch(thread))
                ):
                    return tier, lane
        return None

    def _key(self, name: str) -> str:
        return self.table.strip.sub("", name) if self.table.strip is not None else name


def _first(rules: Iterable[Rule], name: str, module: str | None) -> str | None:
    for rule in rules:
        if rule.name.fullmatch(name) and (
            rule.module is None or (module is not None and rule.module.fullmatch(module))
        ):
            return rule.category
    return None


def step_windows(trace: Trace, table: Table) -> tuple[tuple[float, float], ...]:
    """The step annotations (start, end) in time order; overlapping ones are refused."""
    lane = table.steps
    found = sorted(
        (event.ts, event.end)
        for event in trace.events
        if event.name == STEP
        and (lane.cat is None or lane.cat.fullmatch(event.cat))
        and (lane.process is None or lane.process.fullmatch(trace.process(event.pid)))
    )
    if not found:
        raise ProfileError(f"{plain(trace.path)}: holds no {STEP!r} annotation, so no step to attribute")
    if len(found) > MAX_STEPS:
        raise ProfileError(f"{plain(trace.path)}: {len(found)} step annotations is more than a profile records")
    for (_, end), (start, _) in zip(found, found[1:], strict=False):
        if start < end:
            raise ProfileError(f"{plain(trace.path)}: its {STEP!r} annotations overlap; not one step after another")
    return tuple(found)


def attribute(trace: Trace, table: Table, contents: Contents | None = None) -> Attribution:
    """The kept steps' time, by category and operation (module docstring). `contents`: what each XLA
    operation runs (the profile's `ops` sidecar), which names an operation before its name does."""
    windows = step_windows(trace, table)
    median = statistics.median(end - start for start, end in windows)
    kept = tuple(i for i, (start, end) in enumerate(windows) if end - start <= OUTLIER * median)
    spans = [windows[i] for i in kept]
    lanes = _select(_Classifier(trace, table, contents), spans[0][0], spans[-1][1])
    # Host lanes first: a device kernel may take its enclosing category from its launch (table.link).
    order = sorted(lanes, key=lambda key: not any(item[3][0] == _HOST for item in lanes[key]))
    linked: dict[str, str] = {}
    marks: list[Mark] = []
    labels: list[Label] = []
    for key in order:
        items = lanes[key]
        items.sort()  # by start, then longest first (the parent), then trace order: `seq` is unique
        _segments(items, _classify(items, linked), spans[0][0], spans[-1][1], marks, labels)
    return _price(windows, kept, spans, marks, labels)


def _select(classifier: _Classifier, lo: float, hi: float) -> dict[tuple[Pid, Pid], list[Item]]:
    """Each lane's events inside [lo, hi), work and context alike (ancestry needs both)."""
    trace, table = classifier.trace, classifier.table
    kinds: dict[tuple[Pid, Pid, str, str, str | None, str | None], Kind | None] = {}
    lanes: dict[tuple[Pid, Pid], list[Item]] = defaultdict(list)
    link_work, link_host = table.link or ("", "")
    for seq, event in enumerate(trace.events):
        ts, dur, args = event.ts, event.dur, event.args
        if ts >= hi or ts + dur <= lo:
            continue
        op = module = link = None
        for name, value in args:
            if name == "hlo_op":
                op = value
            elif name == "hlo_module":
                module = value
            elif name in (link_work, link_host):
                link = value
        key = (event.pid, event.tid, event.cat, event.name, op, module)
        if (kind := kinds.get(key, _MISSING)) is _MISSING:
            kind = kinds[key] = classifier.kind(event, op, module)
        if kind is not None:
            lanes[(event.pid, event.tid)].append((ts, -dur, seq, kind, link))  # type: ignore[arg-type]
    return lanes


def _classify(items: list[Item], linked: dict[str, str]) -> list[str | None]:
    """Each item's category on one lane: enclosing, else own rule, else the nearest ancestor's, else its kind's."""
    categories: list[str | None] = []
    add = categories.append
    stack: list[tuple[float, str | None, str | None]] = []  # (end, enclosing, nearest named category)
    for ts, negative_dur, _, (tier, own, default, enclosing, _), link in items:
        while stack and stack[-1][0] <= ts:
            stack.pop()
        _, parent_enclosing, parent_named = stack[-1] if stack else (0.0, None, None)
        enclosing = enclosing or parent_enclosing
        if enclosing is None and link is not None and tier == _WORK:
            enclosing = linked.get(link)
        if tier == _CONTEXT:
            add(None)
            stack.append((ts - negative_dur, enclosing, parent_named))
            continue
        named = own or parent_named
        add(enclosing or named or default)
        if tier == _HOST and link is not None and enclosing is not None:
            linked[link] = enclosing
        stack.append((ts - negative_dur, enclosing, named))
    return categories


_END: Item = (math.inf, 0.0, -1, (_WORK, None, None, None, ""), None)  # past every item: runs the lane out
# A segment's start or end, or a step window's (segment -1): (time, +1/-1, tier, segment).
Mark = tuple[float, int, int, int]


def _segments(
    items: list[Item], categories: list[str | None], lo: float, hi: float, marks: list[Mark], labels: list[Label]
) -> None:
    """One lane's time cut into segments, each its deepest running event (the latest started that
    has not ended: a child before its parent, and partial overlaps resolved the same way). A lane's
    segments never overlap, so the segments running at an instant are the lanes busy then."""
    stack: list[tuple[float, int, str | None, str]] = []  # (end, tier, category, name), in start order
    cur = lo
    mark, label = marks.append, labels.append
    for item, category in zip((*items, _END), (*categories, None), strict=True):
        ts, negative_dur, _, kind, _ = item
        tier = kind[0]
        if tier == _CONTEXT:
            continue
        limit = ts if ts < hi else hi
        while stack and cur < limit:
            end, running, running_category, name = stack[-1]
            if end <= cur:
                stack.pop()
                continue
            stop = end if end < limit else limit
            segment = len(labels)
            label((running, running_category or UNATTRIBUTED, name))
            mark((cur, 1, running, segment))
            mark((stop, -1, running, segment))
            cur = stop
            if end <= limit:
                stack.pop()
        if cur < limit:  # nothing runs from cur to limit
            cur = limit
        if item is _END:
            break
        end = ts - negative_dur
        stack.append((end if end < hi else hi, tier, category, kind[4]))


def _price(
    windows: tuple[tuple[float, float], ...],
    kept: tuple[int, ...],
    spans: list[tuple[float, float]],
    marks: list[Mark],
    labels: list[Label],
) -> Attribution:
    """Each segment's share of the kept steps: the integral over it of 1 / (work lanes busy then),
    inside the steps; a host segment's, of 1 / (host lanes busy) where no work lane is; what no lane
    covers is idle. One sweep over every segment's ends, in time order."""
    for start, end in spans:
        marks.append((start, 1, _CONTEXT, -1))  # the step windows, counted like a third tier
        marks.append((end, -1, _CONTEXT, -1))
    marks.sort()
    opened = [0.0] * len(labels)  # each segment's integral at its start
    shares: dict[Label, float] = defaultdict(float)
    working = hosting = inside = 0
    last = marks[0][0]
    work_sum = host_sum = idle = 0.0  # the integrals of each tier's rate up to `last`
    for t, delta, tier, segment in marks:
        if t != last:  # the counts now hold over [last, t)
            if inside > 0:
                if working > 0:
                    work_sum += (t - last) / working
                elif hosting > 0:
                    host_sum += (t - last) / hosting
                else:
                    idle += t - last
            last = t
        if tier == _WORK:
            working += delta
            integral = work_sum
        elif tier == _HOST:
            hosting += delta
            integral = host_sum
        else:
            inside += delta
            continue
        if delta > 0:
            opened[segment] = integral
        else:
            shares[labels[segment]] += integral - opened[segment]
    if idle > 0:
        shares[(_WORK, "overhead", IDLE)] += idle
    totals: dict[str, float] = defaultdict(float)
    operations: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (_, key, name), share in shares.items():
        if share > 0:
            totals[key] += share
            operations[key][name] += share
    return Attribution(
        windows=windows,
        kept=kept,
        totals=dict(totals),
        operations={key: dict(names) for key, names in operations.items()},
    )


# -- Breakdowns of a run --------------------------------------------------------------------------


def breakdown(run: Run, framework: str, entry: Mapping[str, Any]) -> Breakdown:
    """The breakdown of one `profiles` entry of `framework`'s result; ProfileError (one line) when the
    entry has no trace or its trace cannot be read or attributed."""
    where = f"{plain(framework)} / {plain(entry.get('metric'))}"
    if "error" in entry:
        raise ProfileError(f"{where}: no profile ({plain(entry['error'])})")
    profiler, trace_name, steps = entry.get("profiler"), entry.get("trace"), entry.get("steps")
    if not isinstance(trace_name, str) or not isinstance(profiler, str):
        raise ProfileError(f"{where}: the entry names no trace and no error")
    if (table := TABLES.get((family(profiler) or "", str(entry.get("device_kind"))))) is None:
        kind = plain(entry.get("device_kind"))
        raise ProfileError(f"{where}: profiler {plain(profiler)[:80]!r} on {kind} is not one the harness reads")
    try:
        folder, prefix = job_folder(run.path, entry.get("round"))
        contents, said = _contents(folder, framework, entry)
        trace = read_trace(folder, framework, trace_name)
        attribution = attribute(trace, table, contents)
    except HarnessError as error:
        raise ProfileError(f"{where}: {error}") from None
    found = _breakdown(framework, entry, trace, attribution, run.results[framework], steps)
    return replace(found, trace=prefix + found.trace, notes=(*found.notes, *said))


def _contents(folder: Path, framework: str, entry: Mapping[str, Any]) -> tuple[Contents | None, tuple[str, ...]]:
    """The entry's `ops` sidecar (JAX), or None and why not: without it, operations go by their names."""
    if "ops_error" in entry:
        why = plain(entry["ops_error"])[:160]
        return None, (
            f"what each XLA operation runs was not recorded ({why}): operations are named by their names only",
        )
    if not isinstance(entry.get("ops"), str):
        return None, ()
    try:
        return read_ops(folder, framework, entry["ops"]), ()
    except HarnessError as error:
        return None, (f"{error}: operations are named by their names only",)


def _breakdown(
    framework: str, entry: Mapping[str, Any], trace: Trace, attribution: Attribution, result: Result, steps: Any
) -> Breakdown:
    metric_name = str(entry["metric"])
    step_s = attribution.step_us * 1e-6
    total = math.fsum(attribution.totals.values())
    scale = step_s / total if total > 0 else 0.0
    categories = []
    for key, _ in CATEGORIES:
        us = attribution.totals.get(key, 0.0)
        top = _top(attribution.operations.get(key, {}), scale)
        categories.append(Category(key=key, seconds=us * scale, share=us / total if total > 0 else 0.0, top=top))
    unattributed_us = attribution.totals.get(UNATTRIBUTED, 0.0)
    metric = next((m for m in result["metrics"] if m["name"] == metric_name and m["kind"] == "time"), None)
    timed = _timed_step(metric, entry)
    notes = _notes(attribution, trace, scale)
    reasons = _reasons(attribution, entry, metric, timed, step_s, steps, unattributed_us, total)
    return Breakdown(
        framework=framework,
        metric=metric_name,
        device_kind=str(entry["device_kind"]),
        profiler=str(entry["profiler"]),
        steps=len(attribution.windows),
        step_s=step_s,
        timed_step_s=timed,
        categories=tuple(categories),
        unattributed_s=unattributed_us * scale,
        trace=trace.path,
        flag="; ".join(reasons) or None,
        notes=tuple(notes),
    )


def _top(operations: Mapping[str, float], scale: float) -> tuple[Operation, ...]:
    ranked = sorted(operations.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    return tuple(Operation(name=name, seconds=us * scale) for name, us in ranked)


def _timed_step(metric: Metric | None, entry: Mapping[str, Any]) -> float | None:
    if metric is None:
        return None
    median, per_sample = metric["stats"]["median"], entry.get("steps_per_sample")
    if not isinstance(per_sample, (int, float)) or per_sample <= 0 or not median > 0:
        return None
    return float(median) / float(per_sample)


def _reasons(
    attribution: Attribution,
    entry: Mapping[str, Any],
    metric: Metric | None,
    timed: float | None,
    step_s: float,
    steps: Any,
    unattributed_us: float,
    total: float,
) -> Iterator[str]:
    """Why the breakdown cannot be stood behind, each as its flag word and one clause."""
    if timed is not None and timed > 0 and abs(step_s / timed - 1) > OVERHEAD_BOUND:
        yield (
            f"OVERHEAD: the profiled step took {_over(step_s / timed - 1)} the timed step (bound "
            f"{100 * OVERHEAD_BOUND:.0f} %): its shares describe a {'slower' if step_s > timed else 'faster'} program"
        )
    if total > 0 and unattributed_us / total > UNATTRIBUTED_BOUND:
        names = ", ".join(plain(op.name) for op in _top(attribution.operations.get(UNATTRIBUTED, {}), 1.0)[:3])
        yield (
            f"UNATTRIBUTED: {100 * unattributed_us / total:.0f} % of the profiled step is work no rule names "
            f"({names}; bound {100 * UNATTRIBUTED_BOUND:.0f} %)"
        )
    if metric is not None:
        n = len(metric["samples"])
        disturbed = disturbed_samples(metric) | indices((metric.get("marks") or {}).get("contended"), n)
        if mostly_disturbed(len(disturbed), n):
            yield (
                f"CONTENDED: {len(disturbed)} of {n} timed samples were taken while the machine disturbed them: "
                "the profile ran on the same machine right after"
            )
    found = len(attribution.windows)
    if isinstance(steps, int) and found != steps:
        yield f"STEPS: the trace holds {found} step annotations, the result recorded {steps} profiled steps"
    walls = entry.get("step_s")
    if isinstance(walls, list) and walls and all(isinstance(w, (int, float)) for w in walls):
        recorded = statistics.median(walls)
        if recorded > 0 and abs(step_s / recorded - 1) > STEP_MISMATCH:
            yield f"STEPS: the trace's median step ({_ms(step_s)}) is not the result's recorded one ({_ms(recorded)})"


def _over(ratio: float) -> str:
    return f"+{100 * ratio:.0f} % over" if ratio >= 0 else f"{100 * -ratio:.0f} % less than"


def _ms(seconds: float) -> str:
    """A step's length as people read it: 0.403 ms, 46.5 ms, 1.91 s."""
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def _notes(attribution: Attribution, trace: Trace, scale: float) -> Iterator[str]:
    kept = set(attribution.kept)
    if left := [i for i in range(len(attribution.windows)) if i not in kept]:
        shown = ", ".join(
            f"step {i} ({_ms((attribution.windows[i][1] - attribution.windows[i][0]) * 1e-6)})" for i in left
        )
        yield (
            f"{shown} left out of the shares: longer than {OUTLIER:g} x the median step ({_ms(attribution.step_us * 1e-6)}), "
            "a retrace or a pause, not the steady step"
        )
    if unnamed := _top(attribution.operations.get(UNATTRIBUTED, {}), scale):
        listed = ", ".join(f"{plain(op.name)} ({op.seconds * 1e6:.3g} us)" for op in unnamed)
        yield f"unattributed (no rule names them): {listed}"
    if trace.dropped:
        yield f"{trace.dropped} trace events with an invalid time or name were ignored"


def profiles(run: Run) -> Profiles:
    """Every ok job's profiles, in the run's framework order; a profile that cannot be attributed is a
    problem line, never an exception, and never costs the others."""
    found: list[Breakdown] = []
    problems: list[str] = []
    for framework, result in run.results.items():
        if result["status"] != "ok":
            continue
        for entry in result.get("profiles") or []:
            try:
                found.append(breakdown(run, framework, entry))
            except HarnessError as error:
                problems.append(plain(str(error)))
            except (ValueError, TypeError, KeyError, OverflowError, RecursionError, MemoryError) as error:
                # A trace no check above foresaw must still cost only its own profile.
                where = f"{plain(framework)} / {plain(entry.get('metric'))}"
                problems.append(f"{where}: could not be attributed ({type(error).__name__}: {plain(error)[:120]})")
    return Profiles(breakdowns=tuple(found), problems=tuple(problems))


def breakdowns(run: Run) -> tuple[Breakdown, ...]:
    """Every breakdown of the run (`profiles` gives the problems too, from one reading)."""
    return profiles(run).breakdowns


def profile_problems(run: Run) -> list[str]:
    """One plain line per profile entry that has an error or whose trace could not be read."""
    return list(profiles(run).problems)
