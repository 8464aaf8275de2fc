"""`harness selftest --mistakes` on a slow or busy machine: every mistake is planted so its guard
catches it whatever the machine's speed, and a guard that reads a timing and stayed silent while the
machine disturbed most of the culprit's samples is UNDECIDED (exit 3), never MISSED (exit 1).

The busy machine here is real: busy loops beside the corpus, as many per core as make an honest
256 x 256 float64 product run far below a tenth of this CPU's limit (where a count inflated a fixed
10x looked possible). The loops and the corpus run at niceness 19, so they share the CPUs with each
other and leave the rest of the machine alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from harness.core.result_types import Result
from harness.execute.mistakes import (
    CONTROL,
    Mistake,
    Outcome,
    exit_status,
    line,
    outcome,
    planted_corpus,
    summary,
    table,
)
from harness.judge.assessment import DISTURBED, FAILED, assess
from harness.judge.plausibility import lint
from harness.store.run_folder import Run, load_run
from suites.mistakes.common import INFLATION, inflate
from tests.conftest import REPO
from tests.factories import check, metric, result
from tests.planted import planted_repo

HOGS_PER_CORE = 3


def row(name: str) -> Mistake:
    return next(m for m in planted_corpus() if m.name == name and "cpu" in m.devices)


@pytest.mark.parametrize("median_s", [1e-6, 3e-4, 0.02, 5.0])
def test_an_inflated_count_claims_a_multiple_of_the_limit_whatever_the_machine_did(median_s: float) -> None:
    # The old plant claimed 10x the real count: at 1.7 GFLOP/s (a busy 2-core machine) that was
    # 17 GFLOP/s, possible under a 250 GFLOP/s limit. Tied to the median, the claim is always above it.
    m = metric("matmul", [median_s * f for f in (0.9, 1.0, 1.1)], flops=2.0 * 256**3)
    inflate(m, 2.5e11)
    assert m["flops"] / m["stats"]["median"] == pytest.approx(INFLATION * 2.5e11)
    assert INFLATION > 1.0


def _threads_run(cpu_per_wall: float, contended: list[int]) -> Run:
    """extra_threads as the corpus runs it: numpy honest, pytorch under --threads 1 with `cpu_per_wall`
    cores busy over its samples, `contended` the samples the machine disturbed."""
    docs = []
    for fw, busy, marked in (("numpy", 1.0, []), ("pytorch", cpu_per_wall, contended)):
        m = metric("matmul", [0.05, 0.051, 0.052, 0.053, 0.054], flops=2.0 * 1024**3)
        m["contention"] = {
            "cpu_s": [w * busy for w in m["samples"]], "wall_s": list(m["samples"]),
            "involuntary_switches": [0] * 5, "cores": 2, "window_s": 0.2, "contended": marked,
        }  # fmt: skip
        doc = result(fw, [m], checks=[check("product", [1.0, 2.0])])
        doc["suite"], doc["settings"] = "mistakes", dict(doc["settings"], threads=1)
        docs.append(doc)
    return Run(Path("."), {"baseline": "numpy", "suite": "mistakes"}, {d["framework"]: cast(Result, d) for d in docs})


def _own_data_run(contended: list[int]) -> Run:
    """own_data with the check guard silent (equal products) while the machine disturbed jax's samples."""
    docs = []
    for fw, marked in (("numpy", []), ("jax", contended)):
        m = metric("matmul", [0.01] * 5, flops=2.0 * 256**3)
        m["contention"] = {"cpu_s": [0.01] * 5, "wall_s": [0.01] * 5, "cores": 2, "window_s": 0.2, "contended": marked}
        doc = result(fw, [m], checks=[check("product", [1.0, 2.0])])
        doc["suite"] = "mistakes"
        docs.append(doc)
    return Run(Path("."), {"baseline": "numpy", "suite": "mistakes"}, {d["framework"]: cast(Result, d) for d in docs})


def _decide(mistake: Mistake, run: Run) -> Outcome:
    return outcome(mistake, [mistake.honest, mistake.culprit], assess(run), "r")


def test_a_silent_timing_guard_on_a_disturbed_machine_is_undecided_and_exits_3() -> None:
    quiet_control = Outcome(CONTROL, (), (), 3, "c")
    hidden = _decide(row("extra_threads"), _threads_run(1.0, [0, 1, 2, 3, 4]))
    assert hidden.caught is False and not hidden.missed
    assert hidden.undecided == "machine disturbed: 5 of 5 samples of matmul contended or throttled"
    assert line(hidden).startswith("UNDECIDED  extra_threads") and "rerun on a quiet machine" in line(hidden)
    assert list(table([hidden]))[2].endswith("| undecided: machine disturbed: 5 of 5 samples of matmul "
                                             "contended or throttled |")  # fmt: skip
    assert exit_status([quiet_control, hidden]) == DISTURBED
    assert "0 missed, 1 undecided" in summary([quiet_control, hidden], limitations=False)


def test_a_silent_guard_on_a_machine_quiet_enough_to_tell_is_missed_and_exits_1() -> None:
    quiet_control = Outcome(CONTROL, (), (), 0, "c")
    # Two of five samples disturbed leave the median and the mean mostly the code's: quiet enough.
    missed = _decide(row("extra_threads"), _threads_run(1.0, [0, 1]))
    assert missed.missed and not missed.undecided and line(missed).startswith("MISSED  extra_threads")
    assert exit_status([quiet_control, missed]) == FAILED
    # A product no load can change: a silent check guard is missed however busy the machine was.
    wrong = _decide(row("own_data"), _own_data_run([0, 1, 2, 3, 4]))
    assert wrong.missed and exit_status([quiet_control, wrong]) == FAILED
    # One row undecided, another missed: the miss is what the corpus says.
    hidden = _decide(row("extra_threads"), _threads_run(1.0, [0, 1, 2, 3, 4]))
    assert exit_status([quiet_control, hidden, missed]) == FAILED


def test_a_guard_that_fired_on_a_disturbed_machine_is_caught() -> None:
    caught = _decide(row("extra_threads"), _threads_run(1.9, [0, 1, 2, 3, 4]))
    assert caught.caught is True and not caught.undecided and line(caught).startswith("CAUGHT  extra_threads")
    assert exit_status([Outcome(CONTROL, (), (), 3, "c"), caught]) == 0


@contextmanager
def hogs(per_core: int) -> Iterator[None]:
    """Busy loops at niceness 19, `per_core` for every core this process may use; ended by their ids."""
    cores = len(os.sched_getaffinity(0))
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.nice(19))
        for _ in range(per_core * cores)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _corpus(repo: Path, results: Path, only: str) -> subprocess.CompletedProcess[str]:
    """The corpus in-process in `repo`'s harness at niceness 19 (beside the hogs): its lines, then its
    exit status (`exit_status`, as the CLI exits)."""
    code = (
        "import sys; from pathlib import Path; from harness.execute.mistakes import run_mistakes, exit_status, summary\n"
        f"o = run_mistakes(device='cpu', results_dir=Path({str(results)!r}), only={only.split(',')!r})\n"
        "print(summary(o, False)); sys.exit(exit_status(o))"
    )
    env = dict(os.environ, PYTHONPATH=str(repo))
    return subprocess.run(["nice", "-n", "19", sys.executable, "-c", code], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip


def _rows(stdout: str) -> dict[str, str]:
    return {x.split()[1]: x for x in stdout.splitlines() if x.split()[:1] in (["CAUGHT"], ["MISSED"], ["UNDECIDED"])}


def _culprit_rate(results: Path, name: str, culprit: str) -> tuple[float, float]:
    """(achieved FLOP/s, limit) of the culprit's matmul in the run of mistake `name`."""
    for folder in results.iterdir():
        run = load_run(folder)
        params: dict[str, Any] = run.results[culprit]["params"] if culprit in run.results else {}
        if params.get("mistake") == name:
            found = next(f for f in lint(run, None) if f.framework == culprit and f.quantity == "flops")
            return found.achieved, found.ceiling or 0.0
    raise AssertionError(f"no run of {name}")


@pytest.mark.slow
def test_on_a_busy_machine_the_skipping_mistakes_are_still_caught(tmp_path: Path) -> None:
    # inflated_flops, dead_code, memoised and unsynchronised were caught here only while the machine
    # was fast: a busy one slowed the honest product 60x and a deleted product's dispatch 10x.
    only = "inflated_flops,dead_code,memoised,unsynchronised"
    with hogs(HOGS_PER_CORE):
        proc = _corpus(REPO, tmp_path / "r", only)
    rows = _rows(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(rows) == set(only.split(",")) and all(r.startswith("CAUGHT") for r in rows.values()), rows
    achieved, limit = _culprit_rate(tmp_path / "r", "inflated_flops", "pytorch")
    assert achieved >= INFLATION * limit * 0.999, (achieved, limit)  # by construction, however slow


@pytest.mark.slow
def test_on_a_busy_machine_a_silent_timing_guard_is_undecided_not_missed(tmp_path: Path) -> None:
    # The THREADS guard taken away: under hogs the culprit's samples are mostly contended, so the
    # corpus cannot tell a broken guard from a machine that never gave the job its second core.
    repo = planted_repo(
        tmp_path, {}, {"harness/judge/guards/threads.py": ("if sum(wall) < MIN_WALL_S or", "if True or")}
    )
    with hogs(HOGS_PER_CORE):
        proc = _corpus(repo, tmp_path / "r", "extra_threads")
    rows = _rows(proc.stdout)
    assert rows["extra_threads"].startswith("UNDECIDED  extra_threads"), proc.stdout + proc.stderr
    assert "machine disturbed: " in rows["extra_threads"] and proc.returncode == DISTURBED, proc.stdout
    run = load_run(next(p for p in (tmp_path / "r").iterdir() if load_run(p).results["pytorch"]["params"]
                        .get("mistake") == "extra_threads"))  # fmt: skip
    k, n = assess(run).contention[("pytorch", "matmul")]
    assert 2 * k > n, (k, n)  # what the line says is what the samples recorded


def test_a_plant_that_does_not_apply_here_is_not_run_with_the_jobs_reason() -> None:
    # inflated_flops without a known device limit: the culprit's job skips, naming why; never a miss.
    mistake = row("inflated_flops")
    run = _own_data_run([])
    skipped = dict(run.results["jax"], framework="pytorch", status="skipped", reason="no --param limit given")
    run = Run(Path("."), run.summary, {"numpy": run.results["numpy"], "pytorch": cast(Result, skipped)})
    got = _decide(mistake, run)
    assert got.caught is None and not got.missed and got.why == "no --param limit given", got
    assert line(got).startswith("n/a     inflated_flops  pytorch  no --param limit given")
