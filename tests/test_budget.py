"""`--budget` on `run`, `noise`, `bisect` and `ab` (harness/execute/budget.py), `--detect` with a budget
(noise_floor.plan_rounds), and the sequential alpha a budgeted `ab` records for a later compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.schema import load_summary
from harness.core.statistics import ALPHA
from harness.execute.budget import RoundClock
from harness.judge import noise_floor, sequential
from harness.judge.assessment import assess
from harness.judge.compare import compare_runs
from harness.store.plan import Plan, PlanRequest, make_plan
from harness.store.run_folder import load_run
from tests.conftest import harness
from tests.test_ab import partner
from tests.test_noise_floor import rounds_run


class Ticks:
    """A clock that moves only when told: round lengths without sleeping."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def run_clock(clock: RoundClock, ticks: Ticks, lengths: list[float]) -> int:
    """Rounds of these lengths until the clock says stop; how many ran."""
    for number, length in enumerate(lengths, 1):
        ticks.t += length
        if clock(number):
            return number
    return len(lengths)


def test_the_clock_starts_another_round_only_if_it_fits() -> None:
    ticks = Ticks()
    clock = RoundClock(35.0, now=ticks)
    assert run_clock(clock, ticks, [10.0] * 10) == 3  # 30 s spent; a fourth would end at 40
    assert not clock.over and clock.record() == {"budget": {"budget_s": 35.0, "spent_s": 30.0, "over": False}}
    assert clock.line() == "budget: 3 round(s) in 30 s of a 35 s budget"


def test_the_next_round_is_planned_at_the_slowest_of_the_last_three() -> None:
    ticks = Ticks()
    # The first round (cold caches) took 20 s: after 25 s, another could take 20 and end past 40.
    assert run_clock(RoundClock(40.0, now=ticks), ticks, [20.0, 5.0, 5.0, 5.0]) == 2


def test_a_budget_below_the_least_rounds_stops_instead_of_running_over() -> None:
    """A budget never runs past itself to reach the fewest rounds a verdict needs: it stops and says
    it cannot buy them (issue 57: 664 s on a 120 s budget)."""
    ticks = Ticks()
    clock = RoundClock(12.0, least=3, now=ticks)
    assert run_clock(clock, ticks, [10.0] * 10) == 1
    assert clock.short and not clock.over and clock.record()["budget"]["over"] is False
    assert "cannot buy the 3 a verdict needs" in clock.line()


def floor(tmp_path: Path) -> None:
    """A stored noise floor for xla matrix_size=8 (numpy, jax; 1 s a round)."""
    runs = [rounds_run(tmp_path / f"s{i}", 0.05, i) for i in range(3)]
    assert harness("noise", *map(str, runs)).returncode == 0


def xla_plan() -> Plan:
    return make_plan(PlanRequest(suite="xla", frameworks="numpy,jax", params=("matrix_size=8",)), backend="local")


def test_detect_with_a_budget_plans_past_thirty_rounds_when_the_budget_buys_them(tmp_path: Path) -> None:
    floor(tmp_path)
    plan = xla_plan()
    with pytest.raises(HarnessError, match="even 30 rounds cannot see"):
        noise_floor.plan_rounds(plan, "3%", interleaved=True)
    rounds, line = noise_floor.plan_rounds(plan, "3%", interleaved=True, budget_s=3600.0)
    assert 30 < rounds <= sequential.MAX_ROUNDS and f"{rounds} rounds a side" in line
    # The sequential session's last look has less than ALPHA to spend: it plans more rounds than one look would.
    [entry] = noise_floor.load(noise_floor.host_fingerprint("cpu", None)).values()
    sigmas = [s for per in entry["noise"].values() for s in per.values()]
    once = noise_floor.rounds_for(sigmas, 0.03, len(sigmas), sequential.MAX_ROUNDS)
    assert once is not None and rounds > once


def test_detect_refuses_a_budget_that_cannot_buy_its_rounds_and_names_the_budget_that_would(tmp_path: Path) -> None:
    floor(tmp_path)
    with pytest.raises(HarnessError, match=r"more than --budget 60 s buys; give --budget (\d+)s") as caught:
        noise_floor.plan_rounds(xla_plan(), "3%", interleaved=True, budget_s=60.0)
    needed = int(str(caught.value).split("give --budget ")[1].split("s")[0])
    rounds, _ = noise_floor.plan_rounds(xla_plan(), "3%", interleaved=True, budget_s=float(needed))
    assert rounds * 2 * 1.0 <= needed
    proc = harness("ab", "HEAD", "--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=8", "--detect", "3%",
                   "--budget", "60s", "--backend", "local", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 2 and "give --budget" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_the_detectable_shift_past_thirty_rounds_continues_the_simulated_one() -> None:
    simulated = noise_floor.detectable_shift(30, 3)
    approximated = [noise_floor.detectable_shift(n, 3) for n in (31, 60, 200, 2000)]
    assert simulated is not None and all(a is not None for a in approximated)
    assert abs(approximated[0] - simulated) / simulated < 0.1  # type: ignore[operator]
    assert approximated == sorted(approximated, reverse=True)  # more rounds always see less
    # sqrt(n): four times the rounds see half the shift
    assert approximated[1] / noise_floor.detectable_shift(240, 3) == pytest.approx(2.0, rel=1e-9)  # type: ignore[operator]


def session(tmp_path: Path, alpha_a: float | None, alpha_b: float | None, spread: float = 0.005) -> tuple[Path, Path]:
    """Two factory runs 4 % apart, the two sides of one session, with the `sequential` record given."""
    a = partner(rounds_run(tmp_path / "a", spread, 10, rounds=8), "ra", "baseline", "rb")
    b = partner(rounds_run(tmp_path / "b", spread, 11, rounds=8, scale=1.04), "rb", "candidate", "ra")
    for path, alpha in ((a, alpha_a), (b, alpha_b)):
        if alpha is not None:
            summary = json.loads((path / "summary.json").read_text())
            summary["sequential"] = {"alpha": alpha, "looks": 3, "rounds": 8, "stopped": "the budget was spent"}
            (path / "summary.json").write_text(json.dumps(summary))
    return a, b


def test_a_compare_of_a_budgeted_session_judges_at_the_alpha_its_looks_left(tmp_path: Path) -> None:
    a, b = session(tmp_path, 0.01, 0.02)
    plain = compare_runs(assess(load_run(a)), assess(load_run(b)))
    judged = sequential.as_recorded(plain)
    for before, after in zip(plain.changes, judged.changes, strict=True):
        # the stricter of the two records, scaled onto the usual 0.05
        assert after.p_adjusted == pytest.approx(min(1.0, before.p_adjusted * ALPHA / 0.01))
    assert any("sequential session" in line for line in judged.floor)
    proc = harness("compare", str(a), str(b))
    assert "scaled by 0.05 / 0.01" in proc.stdout, proc.stdout


def test_runs_that_are_not_one_session_keep_the_usual_alpha(tmp_path: Path) -> None:
    a, b = session(tmp_path, 0.01, 0.01)
    summary = json.loads((b / "summary.json").read_text())
    del summary["interleaved"]
    (b / "summary.json").write_text(json.dumps(summary))
    plain = compare_runs(assess(load_run(a)), assess(load_run(b)))
    assert sequential.as_recorded(plain) is plain


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("sequential", {"alpha": 0.5, "looks": 1, "rounds": 2, "stopped": "the budget was spent"}, "0 to 0.05"),
        ("sequential", {"alpha": "0.01", "looks": 1, "rounds": 2, "stopped": "the budget was spent"}, "0 to 0.05"),
        ("sequential", {"alpha": 0.01, "looks": 1, "rounds": 2, "stopped": "<b>"}, "sequential.stopped"),
        ("sequential", {"alpha": 0.01}, "alpha, looks, rounds and stopped"),
        ("budget", {"budget_s": -1, "spent_s": 1, "over": False}, "must be seconds"),
        ("budget", {"budget_s": 60, "spent_s": 1, "over": "no"}, "budget.over"),
    ],
)
def test_a_malformed_budget_or_sequential_record_makes_the_summary_unreadable(
    tmp_path: Path, field: str, value: object, words: str
) -> None:
    run = rounds_run(tmp_path / "a", 0.01, 1)
    summary = json.loads((run / "summary.json").read_text())
    summary[field] = value
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(HarnessError, match=words):
        load_summary(run / "summary.json")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--suite", "fault", "--budget", "5s"], "--budget 5s is outside"),
        (["run", "--budget", "1m", "--resume", "x"], "drop one of them"),
        (["run", "--suite", "fault", "--rounds", "60"], "between 1 and 50"),
        (["noise", "--suite", "fault", "--budget", "soon"], "is not a duration"),
        (["noise", "--suite", "fault", "--rounds", "2", "--budget", "1m"], "needs 3 to 2000 rounds"),
        (["ab", "HEAD", "--suite", "fault", "--budget", "3m", "--rounds", "6"], "drop --rounds, or drop --budget"),
        (["bisect", "--suite", "fault", "-m", "noop", "--stack", "numpy", "--package", "numpy", "--versions", "1,2",
          "--budget", "99h"], "--budget 99h is outside"),
    ],
)  # fmt: skip
def test_bad_budgets_are_one_line_and_exit_2(args: list[str], words: str, tmp_path: Path) -> None:
    proc = harness(*args, "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_run_with_a_budget_runs_rounds_until_it_is_spent_and_records_it(tmp_path: Path) -> None:
    """Real jobs: `run --budget 20s` runs as many rounds as fit (each well under a budget's worth)
    and no more, pooled as `--rounds` pools them, with the budget in plan.json and summary.json."""
    proc = harness("run", "--suite", "fault", "-f", "numpy", "-p", "work=20000", "--repeat", "3", "--budget",
                   "20s", "--backend", "local", "--calibrate", "never", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr
    run = next((tmp_path / "r").iterdir())
    plan = json.loads((run / "plan.json").read_text())
    assert plan["budget_s"] == 20.0 and plan["max_rounds"] == sequential.MAX_ROUNDS and "rounds" not in plan
    summary = load_summary(run / "summary.json")
    rounds = summary["rounds"]
    assert 2 <= rounds < sequential.MAX_ROUNDS and summary["budget"]["spent_s"] <= 20.0, summary
    assert load_run(run).results["numpy"]["settings"]["rounds"] == rounds
    assert f"budget: {rounds} round(s) in" in proc.stderr


def own_figures(stdout: str) -> list[float]:
    line = next(x for x in stdout.splitlines() if "from the spread of these runs' own round medians" in x)
    return [float(part.split()[-1].rstrip("%")) for part in line.split("): ", 1)[1].split(", ")]


def test_a_session_without_a_floor_says_what_its_own_rounds_could_detect(tmp_path: Path) -> None:
    """Each row's smallest detectable change, from the spread of its own round medians (no floor
    measured), and larger for a budgeted session whose looks left it less alpha."""
    a, b = session(tmp_path / "fixed", None, None, spread=0.05)
    fixed = own_figures(harness("compare", str(a), str(b)).stdout)
    assert len(fixed) == 2 and all(3.0 < f < 15.0 for f in fixed), fixed  # 5 % noise, 8 rounds a side
    a, b = session(tmp_path / "looked", 0.005, 0.005, spread=0.05)
    looked = own_figures(harness("compare", str(a), str(b)).stdout)
    assert all(x > y for x, y in zip(looked, fixed, strict=True)), (looked, fixed)


@pytest.mark.slow
def test_noise_with_a_budget_shares_it_between_its_sessions_and_stores_the_floor(tmp_path: Path) -> None:
    proc = harness("noise", "--suite", "fault", "-f", "numpy", "-p", "work=20000", "--repeat", "3", "--budget", "20s",
                   "--sessions", "2", "--backend", "local", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr
    bought = [line for line in proc.stderr.splitlines() if line.startswith("session ")]
    assert len(bought) == 2 and all("s of a " in line for line in bought), proc.stderr
    if "round medians the machine left alone" in proc.stderr:  # every round disturbed: exit 3, nothing stored
        assert proc.returncode == 3 and not noise_floor.load(noise_floor.host_fingerprint("cpu", None))
        return
    runs = sorted((tmp_path / "r").iterdir())
    rounds = [load_summary(run / "summary.json")["rounds"] for run in runs]
    assert len(runs) == 2 and min(rounds) >= 3, rounds
    [entry] = noise_floor.load(noise_floor.host_fingerprint("cpu", None)).values()
    assert entry["rounds"] == min(rounds)  # the floor counts its degrees of freedom from the fewest
