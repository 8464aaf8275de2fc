"""Interleaved rounds: run the frameworks round-robin K times (A B C A B C ...) and pool samples.

Drift on a shared machine (thermal, a neighbour's job) then hits every framework alike
instead of whichever happened to run last.
"""

from __future__ import annotations

import contextlib
import copy
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from harness.backends.base import Backend, serving
from harness.core.errors import HarnessError
from harness.core.result_types import Check, Metric, Result, Stats
from harness.core.safe_files import NoSpace, remove_tree
from harness.core.schema import MISSING_ROUNDS, PER_SAMPLE, InvalidResult, derived_sources, load_result, load_summary
from harness.execute.budget import Stop
from harness.execute.runner import FIRST, execute, sigterm_as_interrupt, warn
from harness.judge import inference, time_to_target
from harness.store.plan import MAX_ROUNDS as MAX_ROUNDS  # the rounds a run may ask for, named beside the plan
from harness.store.plan import Job, Plan
from harness.store.run_folder import (
    ROUNDS_DIR,
    SUMMARY_FILE,
    RunWriter,
    finished_round,
    mismatch,
    open_run_folder,
    round_folder,
    round_to_resume,
    writing,
)
from suites.contract.stats import summarize

# A side of a session whose budget ran out inside the first round, before this side began.
UNAFFORDED = "the budget could not buy a round of this side: the session stopped before it began"


def pool(docs: list[Result], run_id: str) -> Result:
    """One result from the same job's rounds: samples concatenated, first calls kept per round."""
    docs = time_to_target.drop_partial_metrics(docs)
    failed = next((d for d in docs if d["status"] != "ok"), None)
    if failed is not None:
        merged = copy.deepcopy(failed)
        merged["reason"] = f"round {docs.index(failed) + 1}: {failed['reason']}"
    else:
        merged = copy.deepcopy(docs[0])
        merged["environment"]["process"] = _pooled_process(docs)
        by_round = [{m["name"]: m for m in d["metrics"]} for d in docs]
        partial = [m["name"] for m in merged["metrics"] if not all(m["name"] in names for names in by_round)]
        # A value computed from a time metric goes with it (`derived_from`): the guards judge it by that one.
        partial += [
            m["name"] for m in merged["metrics"] if m["name"] not in partial and set(derived_sources(m)) & set(partial)
        ]
        merged["metrics"] = [m for m in merged["metrics"] if m["name"] not in partial]
        if partial:
            merged["notes"] = list(merged.get("notes", [])) + [f"not in every round, dropped: {', '.join(partial)}"]
        for metric in merged["metrics"]:
            same = [names[metric["name"]] for names in by_round]
            metric["samples"] = [s for m in same for s in m["samples"]]
            metric["stats"] = cast(Stats, summarize(metric["samples"]))
            # Where each process's samples begin and end: a timeline draws the round boundaries
            # from it, and the marks below are re-based onto the concatenation with it.
            metric["round_sizes"] = [len(m["samples"]) for m in same]
            if any("marks" in m for m in same):
                metric["marks"] = _pooled_marks(same, metric["round_sizes"])
            counts = [m.get("steady_compilations") for m in same]
            if any(k is not None for k in counts):  # every round's, or unknown
                metric["steady_compilations"] = None if None in counts else sum(k or 0 for k in counts)
            pooled_contention = _pooled_contention(same)
            if pooled_contention is None:
                metric.pop("contention", None)
            else:
                metric["contention"] = pooled_contention
            # One observation per round: what `compare` tests significance on (samples of one
            # process share its warm caches and its neighbours, so they are not independent).
            metric["round_medians"] = [m["stats"]["median"] for m in same]
            firsts = [first for m in same if (first := m.get("first_call")) is not None]
            metric["first_call"] = statistics.median(firsts) if firsts else None
            metric["first_calls"] = firsts
            states = [(m.get("sync") or {}).get("state") for m in same]
            if "escaped" in states:  # one escaped round taints the pooled samples
                metric["sync"] = next(m["sync"] for m in same if (m.get("sync") or {}).get("state") == "escaped")
        merged["checks"] = _pooled_checks(docs)
        if merged.get("inference") is not None:  # the sweep keeps the batches every round timed
            blocks = [cast(dict[str, Any] | None, d.get("inference")) for d in docs]
            merged["inference"] = inference.pooled_block(blocks, {m["name"] for m in merged["metrics"]})  # type: ignore[typeddict-unknown-key]
        merged["notes"] = list(merged.get("notes", [])) + [f"samples pooled from {len(docs)} interleaved rounds"]
        target = time_to_target.pool(docs)
        if target is not None:
            merged["training"] = dict(merged.get("training") or {}, target=target)
        # One learning curve per process, in round order (round 1's alone would hide the seeds' spread).
        curves = [c for d in docs for c in ((d.get("training") or {}).get("curves") or [])]
        if curves:
            merged["training"] = dict(merged.get("training") or {}, curves=curves)
        training = merged.get("training")
        if training is not None:
            merged["training"] = dict(training, **_pooled_training_flags(docs))
        # One profile per metric: the last round's that has one (a breakdown is a look inside a few
        # steps, not a statistic; every round's trace stays in its own folder).
        profiled = [d["profiles"] for d in docs if d.get("profiles")]
        if profiled:
            merged["profiles"] = copy.deepcopy(profiled[-1])
    merged["run_id"] = run_id
    merged["settings"] = dict(merged["settings"], rounds=len(docs))
    merged["duration_s"] = sum(d["duration_s"] or 0.0 for d in docs)
    return merged


def _pooled_checks(docs: list[Result]) -> list[Check]:
    """Every round's value of each check, in round order: the gate compares them all, so a round
    that disagrees fails even when round 1 agrees. A check some round left out names those rounds
    (`missing_rounds`), and the gate fails it: round 1's value never stands in for another round's."""
    first: dict[str, Check] = {}  # check name -> its record in the first round that reported it
    for doc in docs:
        for check in doc["checks"]:
            first.setdefault(check["name"], check)
    pooled = []
    for name, record in first.items():
        per_round = [next((c["value"] for c in d["checks"] if c["name"] == name), None) for d in docs]
        check = cast(Check, dict(copy.deepcopy(record), value=[v for v in per_round if v is not None]))
        missing = [number for number, value in enumerate(per_round, 1) if value is None]
        if missing:
            cast(dict[str, Any], check)[MISSING_ROUNDS] = missing
        pooled.append(check)
    return pooled


# What a round could not observe (suites/runtime/training.py): its metric is missing from that round
# and so dropped from the pool above; the pooled result must then say why, not round 1's "observed".
def _unobservable(entry: Any) -> bool:
    return isinstance(entry, dict) and (entry.get("peak") == "not observable" or entry.get("observable") is False)


def _pooled_training_flags(docs: list[Result]) -> dict[str, Any]:
    """training.memory and .compilations (the first round that could not observe one wins) and
    .fairness (a setting whose value changed between rounds is "mixed"), where round 1 has them."""
    found = [d.get("training") or {} for d in docs]
    pooled: dict[str, Any] = {}
    for key in ("memory", "compilations"):
        if key in found[0]:
            pooled[key] = next((t[key] for t in found if _unobservable(t.get(key))), found[0][key])
    if "fairness" in found[0]:
        pooled["fairness"] = _pooled_fairness([t.get("fairness") for t in found])
    return pooled


def _pooled_fairness(per_round: list[Any]) -> Any:
    """One `training.fairness` for the rounds; the assessment validates it (a round's unreadable
    field is kept, so the assessment names it instead of round 1's readable one hiding it)."""
    if all(f == per_round[0] for f in per_round):
        return per_round[0]
    unreadable = next((f for f in per_round if f is not None and not isinstance(f, dict)), None)
    if unreadable is not None:
        return unreadable
    rounds = [f or {} for f in per_round]
    names = dict.fromkeys(name for f in rounds for name in f)
    return {n: rounds[0].get(n) if all(f.get(n) == rounds[0].get(n) for f in rounds) else "mixed" for n in names}


def _pooled_marks(same: list[Metric], sizes: list[int]) -> dict[str, list[int]]:
    """Every round's marks as indices into the concatenated samples (reasons merged, sorted)."""
    pooled: dict[str, list[int]] = {}
    offset = 0
    for metric, size in zip(same, sizes, strict=True):
        for reason, indices in (metric.get("marks") or {}).items():
            pooled.setdefault(reason, []).extend(offset + i for i in indices)
        offset += size
    return {reason: sorted(indices) for reason, indices in pooled.items() if indices}


def _pooled_process(docs: list[Result]) -> dict[str, Any]:
    """How the rounds' processes started: all fresh, all forked from a server that imported once
    (suites/runtime/fork_server.py), or mixed (a server that failed leaves its jobs to fresh ones)."""
    found = [d["environment"].get("process") for d in docs]
    forked = [p for p in found if isinstance(p, dict) and p.get("start") == "forked"]
    start = "fresh" if not forked else "forked" if len(forked) == len(found) else "mixed"
    pooled: dict[str, Any] = {"start": start, "rounds": len(found), "forked_rounds": len(forked)}
    if forked:
        pooled["server_import_s"] = forked[0].get("server_import_s")
    return pooled


def _pooled_contention(same: list[Metric]) -> dict[str, Any] | None:
    """Every round's per-sample contention concatenated like the samples (None unless every round has it)."""
    found = [m.get("contention") for m in same]
    if not all(found):
        return None
    parts = [cast(dict[str, Any], c) for c in found]
    pooled: dict[str, Any] = {"cores": parts[0]["cores"], "window_s": parts[0]["window_s"]}
    # The CPUs counted (suites/runtime/contention.py): kept when every round counted the same ones.
    cpus = [p.get("cpus") for p in parts]
    if all(c == cpus[0] for c in cpus) and all(p["cores"] == parts[0]["cores"] for p in parts):
        pooled["cpus"] = cpus[0]
    for key in PER_SAMPLE:
        lists = [p.get(key) for p in parts]
        if all(v is not None for v in lists):
            pooled[key] = [x for v in lists for x in (v or [])]
    for key in ("contended", "throttled"):
        offset, indices = 0, list[int]()
        for part, metric in zip(parts, same, strict=True):
            indices.extend(offset + i for i in part.get(key) or [])
            offset += len(metric["samples"])
        pooled[key] = indices
    return pooled


@dataclass
class Side:
    """One run folder of an interleaved execution: its plan, the backend (and so the code) it runs
    with, and what its summary and plan record beyond a plain run (e.g. its A/B partner)."""

    plan: Plan
    backend: Backend
    run_dir: Path
    code: dict[str, Any] | None = None  # None: this checkout's suites
    extra: dict[str, Any] = field(default_factory=dict)
    label: str = ""  # printed before its jobs when several sides alternate
    round_dirs: list[Path] = field(default_factory=list)


def execute_rounds(
    plan: Plan,
    backend: Backend,
    results_dir: Path,
    rounds: int,
    argv: list[str] | None = None,
    stop: Stop | None = None,
    resume_dir: Path | None = None,
) -> Path:
    """K rounds of the plan in a new run folder, or (`resume_dir`) the rounds a rounds run has not
    finished: its finished rounds kept, its cut-short round resumed (only its jobs that are not ok run
    again), the rounds it never reached run, and every round pooled again."""
    run_dir = open_run_folder(results_dir, plan.run_id, "run", resume_dir)
    side = Side(plan, backend, run_dir)
    if resume_dir is None:
        with discarded_unless_started([side]):
            execute_interleaved([side], rounds, argv, stop)
    else:
        execute_interleaved([side], rounds, argv, stop, resume=True)
    return run_dir


@contextlib.contextmanager
def discarded_unless_started(sides: list[Side]) -> Iterator[None]:
    """New run folders, removed again when the command fails before any round of them began (an
    engine that does not answer, a side's code that cannot be exported): a folder with no job in it
    is neither a run `show` can read nor one `--resume` can finish."""
    try:
        yield
    except BaseException:
        if not any(side.round_dirs for side in sides) and not any(
            os.path.lexists(side.run_dir / ROUNDS_DIR) for side in sides
        ):
            for side in sides:
                remove_tree(side.run_dir)
        raise


def execute_interleaved(
    sides: list[Side], rounds: int, argv: list[str] | None = None, stop: Stop | None = None, resume: bool = False
) -> None:
    """K rounds of every side's jobs, the sides alternating A B, B A, A B ... (so a drift that is
    linear in time hits them alike), each side pooled into its own run folder (already made).
    `stop(n)`, asked after each complete round n, ends the session early when it says so (a time
    budget spent, a sequential design's look); `rounds` is then the most it may run, plan.json
    records the budget instead of a round count, and summary.json what `stop.record()` says."""
    with contextlib.ExitStack() as stack:
        # The sides' servers, shared where their code before the fork is the same (harness ab)
        stack.enter_context(serving(*(side.backend for side in sides)))
        limit = {"rounds": rounds} if stop is None else {"budget_s": stop.budget_s, "max_rounds": rounds}
        writers = [
            stack.enter_context(
                writing(
                    side.run_dir,
                    side.plan,
                    side.backend.name,
                    argv,
                    side.code,
                    extra=side.extra,
                    limit=limit,
                    write_plan=not resume,
                )
            )
            for side in sides
        ]
        full: NoSpace | None = None
        refused: HarnessError | None = None
        try:
            with sigterm_as_interrupt():
                interrupted = _run_rounds(sides, rounds, argv, stop, resume)
        except KeyboardInterrupt:
            # Between two jobs (a round's own interrupt is handled inside it): the rounds that
            # finished are pooled all the same.
            warn("\ninterrupted: stopping; finished rounds are kept")
            interrupted = True
        except NoSpace as error:  # the round that met it has marked its jobs; pool the others
            full, interrupted = error, True
            for writer in writers:
                writer.release_reserve()
        except HarnessError as error:
            # A round that could not be made (e.g. something planted where its folder goes): the
            # summaries were rewritten empty at the start, so the finished rounds are pooled back into
            # them (left unfinished, for --resume) before the problem is said.
            refused, interrupted = error, True
        closing = {} if stop is None else stop.record()
        for side, writer in zip(sides, writers, strict=True):
            _pool_side(side, writer, interrupted, closing)
        if full is not None:
            kept = ", ".join(side.run_dir.name for side in sides)
            raise NoSpace(full.path, full.strerror, f"the finished rounds are pooled in {kept}; free some space")
        if refused is not None:
            raise refused


def _run_rounds(sides: list[Side], rounds: int, argv: list[str] | None, stop: Stop | None, resume: bool) -> bool:
    """Every round of every side, alternating, until `stop` says so; True when one was interrupted.
    `resume`: a round already in the run folder is kept when it finished, resumed when it did not."""
    for number in range(1, rounds + 1):
        kept = [side for side in sides if resume and _kept_round(side, number)]
        if len(kept) == len(sides):
            continue
        print(f"== round {number}/{rounds}" if stop is None else f"== round {number}", flush=True)
        order = sides if number % 2 else sides[::-1]
        for done, side in enumerate(order, start=1):
            if side in kept:
                continue
            if len(sides) > 1:
                print(f"-- {side.label or side.plan.run_id}", flush=True)
            if _run_round(side, number, argv, resume):
                return True
            if stop is not None and stop.after_side(number, done, len(order)):
                return False  # a first round the budget cannot afford: the other sides never start
        if stop is not None and stop(number):
            break
    return False


def round_params(params: dict[str, Any], number: int) -> dict[str, Any]:
    """Round `number` (1-based) of a time-to-target run trains from seed + number - 1: the variation
    that figure really has (initialisation, order, dropout)."""
    if not time_to_target.targeted(params) or not isinstance(params.get("seed"), int):
        return dict(params)
    return dict(params, seed=int(params["seed"]) + number - 1)


def _round_plan(side: Side, number: int) -> Plan:
    jobs = tuple(replace(job, params=round_params(job.params, number)) for job in side.plan.jobs)
    return replace(side.plan, run_id=round_folder(side.run_dir, number).name, jobs=jobs, extra={})


def _kept_round(side: Side, number: int) -> bool:
    """On resume: whether round `number` of this side finished before (every job ok or skipped), and
    so is kept as it is. A round folder that is a link, or whose summary is unreadable, is not kept."""
    summary = finished_round(side.run_dir, number)
    done = (
        summary is not None
        and not summary.get("interrupted")
        and {j.framework for j in side.plan.jobs}
        == {e.get("framework") for e in summary["jobs"] if isinstance(e, dict) and e.get("status") in ("ok", "skipped")}
    )
    if done:
        side.round_dirs.append(round_folder(side.run_dir, number))
    return done


def _run_round(side: Side, number: int, argv: list[str] | None, resume: bool = False) -> bool:
    """Round `number` of one side; True when it was interrupted (or its summary is unreadable).
    `resume`: a round folder left by an interrupted run is resumed (its ok jobs kept), not made again."""
    again = round_to_resume(side.run_dir, number) if resume else None
    parent = round_folder(side.run_dir, number).parent
    round_dir = execute(_round_plan(side, number), side.backend, parent, argv, resume_dir=again, code=side.code)
    side.round_dirs.append(round_dir)
    try:
        return bool(load_summary(round_dir / SUMMARY_FILE).get("interrupted"))
    except HarnessError as error:
        print(f"warning: {error}", file=sys.stderr)
        return True


def _pool_side(side: Side, writer: RunWriter, interrupted: bool, closing: dict[str, Any]) -> None:
    found = dict((job.framework, doc) for job, doc in pooled(side))
    for job in side.plan.jobs:
        doc = found.get(job.framework)
        if doc is not None:
            writer.add(job, doc)
        elif interrupted:
            # No round of this job began (e.g. Ctrl-C in the other side's first round): recorded as
            # interrupted, like a job of a plain run that an interrupt kept from starting.
            writer.add_placeholder(job, "interrupted", FIRST)
        elif not side.round_dirs:
            # The budget stopped the session inside its first round, before this side began.
            writer.add_placeholder(job, "skipped", UNAFFORDED)
    # `rounds` counts the rounds that ran; a side none of whose rounds began has none to count.
    counted = {"rounds": len(side.round_dirs)} if side.round_dirs else {}
    writer.finish(**counted, interrupted=interrupted, **closing)


def pooled(side: Side) -> list[tuple[Job, Result]]:
    """Each job's rounds so far pooled into one result (a job no round of which left a valid file:
    left out, with a warning)."""
    plan = side.plan
    found = []
    for job in plan.jobs:
        docs = []
        for folder in side.round_dirs:
            try:
                doc = load_result(folder / job.result_file())
            except InvalidResult as error:
                print(f"warning: {error}", file=sys.stderr)
                continue
            wrong = mismatch(doc, job.framework, plan.suite, folder.name)
            if wrong:
                print(f"warning: {folder / job.result_file()}: {wrong}; ignored", file=sys.stderr)
                continue
            for entry in doc.get("profiles") or []:  # where its trace is, once pooled (store/traces.py job_folder)
                entry["round"] = folder.name
            docs.append(doc)
        # A round cut short by an interrupt measured nothing: the finished rounds are the result
        # (the summary says the run was interrupted), unless no round of this job finished.
        finished = [d for d in docs if d["status"] != "interrupted"]
        docs = finished or docs
        if docs:
            found.append((job, pool(docs, plan.run_id)))
    return found
