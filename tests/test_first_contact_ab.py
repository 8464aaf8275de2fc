"""First contact with `harness ab`, `--budget`, rounds and `noise` (issue 57): relative results folders
made absolute once, engine errors as failed jobs, budgets that never run over by more than a round and
refuse what cannot give a verdict, interrupts that leave readable summaries, rounds runs that resume as
rounds runs, and round containers labelled with their run's id."""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import BackendOptions
from harness.backends.docker_backend import DockerBackend, Owner
from harness.cli.ab import session_verdict
from harness.cli.options import default_data_dir, default_results_dir, folder_option
from harness.core.errors import HarnessError
from harness.core.schema import load_summary
from harness.execute import ab
from harness.execute.ab_session import judge_session
from harness.execute.budget import RoundClock
from harness.judge.assessment import DISTURBED
from harness.report.exports import Format
from harness.store.images import LABEL, Ensured, stack_image
from harness.store.plan import Job, Plan, PlanRequest, make_plan, planned_rounds
from harness.store.run_folder import REPO, load_run, round_folder, round_of
from tests.conftest import harness, run_folder
from tests.test_ab import partner
from tests.test_budget import Ticks, run_clock
from tests.test_noise_floor import rounds_run

# -- 1. the results folder is absolute wherever a command got it ---------------------------------


def test_results_and_data_folders_are_absolute_from_the_default_the_env_and_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_RESULTS_DIR", raising=False)
    monkeypatch.setenv("HARNESS_DATA_DIR", "my-data")
    assert default_results_dir() == tmp_path / "results"
    assert default_data_dir() == tmp_path / "my-data"
    monkeypatch.setenv("HARNESS_RESULTS_DIR", "out/runs")
    assert default_results_dir() == tmp_path / "out" / "runs"
    assert folder_option("--results-dir", "results")("r") == tmp_path / "r"


class _Engine:
    class client:  # noqa: N801 - stands in for docker.DockerClient: create_kwargs never calls the engine
        @staticmethod
        def info() -> dict[str, Any]:
            return {"NCPU": 2}


def _kwargs(backend: DockerBackend, run_id: str, owner_run: Owner | None = None) -> dict[str, Any]:
    job = Job(suite="xla", framework="numpy", stack="numpy", params={"matrix_size": 8}, repeat=3, warmup=1,
              device="cpu", threads=None, timeout_s=60.0, data_dir=None)  # fmt: skip
    image = Ensured(stack_image("numpy", "cpu"), "sha256:abc", False, 0.0)
    return backend.create_kwargs(job, run_id, Path("/tmp/work-1"), image, None, owner_run)


def test_a_relative_suites_folder_is_bind_mounted_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`harness ab REV` exports REV's suites below the run folder: from a relative results folder the
    engine refused the relative bind ("mount path must be absolute")."""
    monkeypatch.chdir(tmp_path)
    backend = DockerBackend(_Engine(), suites_dir=Path("results/run/code/suites"))  # type: ignore[arg-type]
    [suites] = [m for m in _kwargs(backend, "run-1")["mounts"] if m["Target"].endswith("/suites")]
    assert suites["Source"] == str(tmp_path / "results/run/code/suites")


def test_a_backend_that_cannot_be_made_leaves_no_run_folder(tmp_path: Path) -> None:
    """The session fails before any job (here: --gpus the docker backend refuses before connecting):
    no empty run folder that neither `show` nor `--resume` understands is left behind."""
    plan = make_plan(PlanRequest(suite="fault", frameworks="numpy"), backend="docker")
    request = ab.Request(plan=plan, baseline=None, candidate=None, rounds=4, results_dir=tmp_path / "r",
                         backend="docker", options=BackendOptions(gpus="bogus"))  # fmt: skip
    with pytest.raises(HarnessError, match="--gpus"):
        ab.run_ab(request)
    assert list((tmp_path / "r").iterdir()) == []


# -- 2. a budget never runs over by more than one round, and refuses what buys no verdict ---------


def test_a_budget_that_cannot_buy_the_rounds_a_verdict_needs_stops_after_the_first_round() -> None:
    ticks = Ticks()
    clock = RoundClock(12.0, least=3, now=ticks)
    assert run_clock(clock, ticks, [10.0] * 10) == 1  # before: 3 rounds, 30 s of a 12 s budget
    assert clock.short and not clock.over
    assert "cannot buy the 3 a verdict needs" in clock.line() and "--budget 33s" in clock.line()


def test_a_budget_is_never_overrun_by_more_than_its_last_round() -> None:
    rng = random.Random(57)
    for _ in range(500):
        ticks = Ticks()
        budget = rng.uniform(5, 100)
        clock = RoundClock(budget, least=rng.choice([1, 3, 4]), now=ticks)
        lengths = [rng.uniform(0.5, 40) for _ in range(200)]
        ran = run_clock(clock, ticks, lengths)
        assert ticks.t - lengths[ran - 1] <= budget + 1e-9, (budget, lengths[:ran])
        assert clock.over == (ticks.t > budget)


def _slow_floor(tmp_path: Path, seconds_per_round: float) -> None:
    """A stored noise floor for xla matrix_size=8 (numpy, jax) whose rounds took this long."""
    runs = [rounds_run(tmp_path / f"s{i}", 0.05, i) for i in range(3)]
    for run in runs:
        for name in ("numpy.json", "jax.json"):
            doc = json.loads((run / name).read_text())
            doc["duration_s"] = seconds_per_round * 6 / 2  # 6 rounds, 2 jobs a round
            (run / name).write_text(json.dumps(doc))
    proc = harness("noise", *map(str, runs))
    assert proc.returncode == 0, proc.stderr


def test_ab_refuses_up_front_a_budget_smaller_than_the_rounds_a_verdict_needs(tmp_path: Path) -> None:
    _slow_floor(tmp_path, 100.0)
    out = tmp_path / "r"
    proc = harness("ab", "HEAD", "--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=8", "--budget", "3m",
                   "--backend", "local", "--results-dir", str(out))  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert proc.stderr.count("\n") == 1 and "a round takes about 200 s" in proc.stderr, proc.stderr
    fits = int(re.search(r"give --budget (\d+)s", proc.stderr).group(1))  # type: ignore[union-attr]
    assert 4 * 200 <= fits <= 4 * 200 * 1.2
    assert not out.exists() or not list(out.iterdir())  # nothing started


@pytest.mark.slow
def test_ab_whose_first_round_shows_the_budget_too_small_stops_there_and_names_what_fits(tmp_path: Path) -> None:
    """No floor to forecast from: the first round is the measurement (slow-start jobs, about 6 s a side),
    and 20 s cannot buy the 4 rounds a side a verdict needs. Before: a verdict from 1 round a side, exit 0."""
    proc = harness("ab", "HEAD", "--suite", "fault", "-f", "numpy", "-p", "mode=slow-start", "-p", "delay_s=6",
                   "--repeat", "3", "--budget", "20s", "--backend", "local", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert "cannot buy the 4 a verdict needs" in line and "give --budget" in line
    assert proc.stdout.count("== round ") == 1
    # The first side alone showed it (6 s x 2 sides x 4 rounds > 20 s): the second never started.
    summaries = [load_summary(run / "summary.json") for run in (tmp_path / "r").iterdir()]
    ran = [s for s in summaries if s.get("rounds") == 1]
    unstarted = [s for s in summaries if "rounds" not in s]
    assert len(ran) == 1 and len(unstarted) == 1, summaries
    assert [j["status"] for j in unstarted[0]["jobs"]] == ["skipped"]
    assert all(s["budget"]["over"] is False for s in summaries)


def test_a_first_round_the_budget_cannot_afford_stops_after_the_side_that_shows_it() -> None:
    """664 s on a 120 s budget (issue 57): one side of the first round at N=5000 took minutes. After it,
    the whole round (both sides) times the rounds a verdict needs is known to be past the budget, so the
    other side never starts; a side that fits goes on."""
    ticks = Ticks()
    clock = RoundClock(120.0, least=4, now=ticks)
    ticks.t += 180.0  # side A of round 1
    assert clock.after_side(1, 1, 2) and clock.short and clock.estimate_s == 360.0
    assert clock.line().startswith("budget: part of the first round in 180 s of a 120 s budget; at about 360 s a round")
    assert "cannot buy the 4 a verdict needs" in clock.line()
    fits = int(re.search(r"give --budget (\d+)s", clock.line()).group(1))  # type: ignore[union-attr]
    assert 1584 <= fits <= 1585  # 4 rounds x 360 s, a tenth to spare
    quick = RoundClock(120.0, least=4, now=(t := Ticks()))
    t.t += 10.0
    assert not quick.after_side(1, 1, 2) and not quick.short  # 4 x 20 s fits: on to side B
    t.t += 10.0
    assert not quick.after_side(1, 2, 2)  # the round is complete: the clock's round check decides
    assert not quick.after_side(2, 1, 2)  # past the first round the measured rounds decide


def _disturbed_side(path: Path, run_id: str, side: str, other: str) -> Path:
    run = partner(rounds_run(path, 0.01, 3), run_id, side, other)
    for name in ("numpy.json", "jax.json"):
        doc = json.loads((run / name).read_text())
        for m in doc["metrics"]:
            n = len(m["samples"])
            m["contention"] = {"cpu_s": [s * 0.4 for s in m["samples"]], "wall_s": list(m["samples"]),
                               "involuntary_switches": [0] * n, "cores": 2, "window_s": 0.2,
                               "contended": list(range(n))}  # fmt: skip
        (run / name).write_text(json.dumps(doc))
    return run


def test_a_session_whose_jobs_were_all_ok_on_a_busy_machine_is_not_called_a_failed_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every job ok, most samples contended: exit 3 with the machine named, not "not every job passed"."""
    a = _disturbed_side(tmp_path / "a", "ra", "baseline", "rb")
    b = _disturbed_side(tmp_path / "b", "rb", "candidate", "ra")
    code = session_verdict(judge_session(ab.Session(a, b, None, 10.0)), Format.table, None, None)
    err = capsys.readouterr().err
    assert code == DISTURBED, err
    assert "not every job" not in err and "run ra: every job ok, but" in err and "rerun on a quiet machine" in err


# -- 9. an interrupt in the first round: exit 130, every summary readable ------------------------


def _signal_at(marker: str, sig: signal.Signals, *args: str) -> tuple[int, str, str]:
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(marker):
            proc.send_signal(sig)
            break
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_in_the_first_round_of_ab_exits_130_with_summaries_show_reads(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Before: the side that had not run wrote "rounds": 0, which the schema refuses: exit 2, and
    `harness show` of that folder exited 2 forever."""
    results = tmp_path / "r"
    code, out, err = _signal_at("-> fault/numpy", sig, "ab", "HEAD", "--suite", "fault", "-f", "numpy",
                                "-p", "mode=slow-start", "-p", "delay_s=20", "--rounds", "4", "--backend", "local",
                                "--results-dir", str(results))  # fmt: skip
    assert code == 130, out[-2000:] + err
    assert "Traceback" not in err
    runs = sorted(results.iterdir())
    assert len(runs) == 2
    for run in runs:
        loaded = load_run(run)  # the schema accepts both
        assert loaded.summary["interrupted"] is True
        assert loaded.summary.get("rounds") in (None, 1)
        assert [r["status"] for r in loaded.results.values()] == ["interrupted"]
        shown = harness("show", str(run))  # a reader: it renders what the run holds, and says so
        assert shown.returncode == 0 and "INTERRUPTED" in shown.stdout, shown.stdout + shown.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_as_the_first_round_of_noise_starts_exits_130_with_a_readable_summary(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """The signal lands as round 1 begins (often before its folder exists): the session's summary must
    still be one the schema accepts, and no floor is stored."""
    results = tmp_path / "r"
    code, out, err = _signal_at("== round 1", sig, "noise", "--suite", "fault", "-f", "numpy", "-p", "mode=slow-start",
                                "-p", "delay_s=20", "--rounds", "3", "--sessions", "1", "--backend", "local",
                                "--results-dir", str(results))  # fmt: skip
    assert code == 130, out[-2000:] + err
    assert "Traceback" not in err and "no noise floor stored" in err
    [run] = list(results.iterdir())
    loaded = load_run(run)
    assert loaded.summary["interrupted"] is True
    assert [r["status"] for r in loaded.results.values()] == ["interrupted"]


# -- 10. a rounds run resumes as a rounds run ----------------------------------------------------


@pytest.mark.slow
def test_an_interrupted_rounds_run_resumes_its_rounds_and_passes_the_gate(tmp_path: Path) -> None:
    """Before: the resumed jobs ran once, their check values did not match the kept pooled ones
    ("shape differs from numpy", exit 1), and the summary's rounds became null."""
    results = tmp_path / "r"
    code, out, err = _signal_at("-> xla/jax", signal.SIGINT, "run", "--suite", "xla", "-f", "numpy,jax",
                                "-p", "matrix_size=8", "--rounds", "3", "--backend", "local", "--calibrate", "never",
                                "--results-dir", str(results))  # fmt: skip
    assert code == 130, out[-2000:] + err
    [run] = list(results.iterdir())
    proc = harness("run", "--resume", run.name, "--backend", "local", "--results-dir", str(results))
    assert proc.returncode in (0, DISTURBED), proc.stdout[-3000:] + proc.stderr
    assert run_folder(proc.stdout) == run
    summary = load_summary(run / "summary.json")
    assert summary["rounds"] == 3 and not summary.get("interrupted")
    loaded = load_run(run)
    for doc in loaded.results.values():
        assert doc["status"] == "ok" and doc["settings"]["rounds"] == 3
        assert all(isinstance(c["value"], list) and len(c["value"]) == 3 for c in doc["checks"])
    assert sorted(p.name for p in (run / "rounds").iterdir()) == ["round-1", "round-2", "round-3"]


@pytest.mark.slow
def test_a_round_folder_replaced_by_a_link_is_refused_on_resume_and_the_run_stays_whole(tmp_path: Path) -> None:
    results, elsewhere = tmp_path / "r", tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, err = _signal_at("-> fault/numpy", signal.SIGINT, "run", "--suite", "fault", "-f", "numpy",
                                "-p", "mode=slow-start", "-p", "delay_s=20", "--rounds", "3", "--backend", "local",
                                "--calibrate", "never", "--results-dir", str(results))  # fmt: skip
    assert code == 130, out[-2000:] + err
    [run] = list(results.iterdir())
    round_1 = round_folder(run, 1)
    shutil.rmtree(round_1)
    round_1.symlink_to(elsewhere)
    proc = harness("run", "--resume", run.name, "--backend", "local", "--results-dir", str(results))
    assert proc.returncode == 2 and "is not a folder of this run" in proc.stderr, proc.stdout[-2000:] + proc.stderr
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    assert load_run(run).summary["interrupted"] is True  # still a run --resume can finish once it is removed


def _plan(**extra: Any) -> Plan:
    plan = make_plan(PlanRequest(suite="fault", frameworks="numpy"), backend="local")
    return Plan(plan.run_id, plan.suite, plan.baseline, plan.jobs, plan.backend, extra)


def test_only_a_fixed_count_of_rounds_resumes_as_rounds() -> None:
    assert planned_rounds(_plan()) is None and planned_rounds(_plan(rounds=1)) is None
    assert planned_rounds(_plan(rounds=5)) == 5
    with pytest.raises(HarnessError, match="--budget was spent; a resume cannot give back"):
        planned_rounds(_plan(budget_s=60.0, max_rounds=2000))
    with pytest.raises(HarnessError, match="one side of a `harness ab` session"):
        planned_rounds(_plan(rounds=6, interleaved={"side": "baseline", "partner": "x"}))
    for bad in (True, "5", 10**9, 0):
        with pytest.raises(HarnessError, match="is not a number of rounds"):
            planned_rounds(_plan(rounds=bad))


# -- 13. noise checks the cache home first; round containers carry their run's id ----------------


def test_noise_refuses_a_bad_cache_home_before_any_session_runs(tmp_path: Path) -> None:
    results = tmp_path / "r"
    proc = harness("noise", "--suite", "fault", "-f", "numpy", "--rounds", "3", "--sessions", "1",
                   "--backend", "local", "--results-dir", str(results),
                   env={"HARNESS_CACHE_HOME": "relative/cache"})  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stdout[-2000:] + proc.stderr
    assert "HARNESS_CACHE_HOME" in proc.stderr and "== round" not in proc.stdout
    assert not results.exists()


def test_round_containers_are_labelled_with_their_runs_id_and_their_round(tmp_path: Path) -> None:
    run_id = "20261129-120000-xla-1a2b"
    folder = round_folder(tmp_path / run_id, 2)
    assert round_of(folder, "round-2") == (run_id, 2)
    assert round_of(tmp_path / run_id, run_id) is None and round_of(tmp_path / "x" / "round-2", "round-2") is None
    backend = DockerBackend(_Engine())  # type: ignore[arg-type]
    kwargs = _kwargs(backend, "round-2", Owner.of("round-2", folder))
    assert kwargs["labels"][f"{LABEL}.run-id"] == run_id and kwargs["labels"][f"{LABEL}.round"] == "2"
    assert kwargs["name"].startswith(f"fw-harness-{run_id}-round-2-numpy-")
    plain = _kwargs(backend, run_id)
    assert plain["labels"][f"{LABEL}.run-id"] == run_id and f"{LABEL}.round" not in plain["labels"]
