"""`harness ab --budget`: the group-sequential rule (harness/judge/sequential.py) and the session that
uses it (harness/execute/ab.py Looks)."""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import pytest

from benchmarks import sequential_rounds
from harness.core.errors import HarnessError
from harness.core.statistics import ALPHA
from harness.judge import sequential
from harness.judge.compare import ROUNDS, Change, family
from harness.store.run_folder import load_run
from tests.conftest import REPO, harness
from tests.test_ab import checkout


def row(p: float, low: float = 1.1, high: float = 1.5, n: int = 10) -> Change:
    return Change(framework="numpy", metric="noop", unit="s", better="lower", median_a=1.0, median_b=1.3, ratio=1.3,
                  ci_low=low, ci_high=high, p_value=p, basis=ROUNDS, processes=(n, n))  # fmt: skip


@pytest.mark.parametrize(("text", "seconds"), [("180", 180.0), ("90s", 90.0), ("3m", 180.0), ("1.5h", 5400.0)])
def test_a_budget_is_seconds_or_a_duration_with_a_unit(text: str, seconds: float) -> None:
    assert sequential.parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["abc", "5s", "30h", "-3m", "3 weeks", "nan", "1e9"])
def test_a_budget_out_of_range_or_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(HarnessError, match="--budget"):
        sequential.parse_budget(text)


def test_spending_starts_at_nothing_ends_at_alpha_and_never_decreases() -> None:
    values = [sequential.spent(i / 100) for i in range(101)]
    assert values[0] == 0 and values[-1] == pytest.approx(ALPHA)
    assert all(b >= a for a, b in zip(values, values[1:], strict=False))
    # Pocock-type: more than a linear share early, so a large change can be called at the first look
    assert sequential.spent(1 / 8) > ALPHA / 8


def test_looks_come_at_the_fractions_of_the_budget_and_together_spend_exactly_alpha() -> None:
    schedule = sequential.Schedule(160.0)
    seen = []
    elapsed = 0.0
    while True:
        elapsed += 2.0
        due = schedule.due(elapsed, 2.0)
        if due is not None:
            seen.append(schedule.look(int(elapsed // 2), elapsed, due, [row(0.5)]).elapsed_s)
            if due:
                break
    assert seen == [20.0, 40.0, 80.0, 160.0]
    assert schedule.used == pytest.approx(ALPHA)
    assert all(look.alpha > 0 for look in schedule.looks)
    assert not any(look.crossed for look in schedule.looks)


def test_a_round_that_would_not_fit_makes_this_look_the_last() -> None:
    schedule = sequential.Schedule(100.0)
    assert schedule.due(5.0, 3.0) is None
    assert schedule.due(13.0, 3.0) is False  # past 1/8
    assert schedule.due(98.0, 3.0) is True  # 98 + 3 > 100


def test_a_row_is_past_its_boundary_only_below_the_looks_alpha_and_with_its_interval_off_one() -> None:
    assert sequential.past_boundary(family([row(0.004)]), 0.0069)
    assert not sequential.past_boundary(family([row(0.004)]), 0.003)
    assert not sequential.past_boundary(family([row(0.0001, low=0.9)]), 0.05)  # the interval holds 1
    # Holm within the look: two rows at p 0.004 need 0.004 * 2 <= alpha
    assert len(sequential.past_boundary(family([row(0.004), row(0.004)]), 0.0069)) == 0
    assert len(sequential.past_boundary(family([row(0.004), row(0.004)]), 0.009)) == 2
    # A row `family` gave no verdict (too few processes) counts in Holm as p = 1 and is never past.
    few = family([row(0.0001, n=2), row(0.004)])
    assert few[0].no_verdict and [c.p_value for c in sequential.past_boundary(few, 0.009)] == [0.004]


def test_a_looks_alpha_scales_the_holm_adjusted_p_onto_the_usual_threshold() -> None:
    rows = family([row(0.004), row(0.02), row(0.3)])
    judged = sequential.at_alpha(rows, 0.02)
    assert [c.p_adjusted for c in judged] == pytest.approx([min(1.0, c.p_adjusted * 2.5) for c in rows])
    # Holm: 0.012, 0.04, 0.3; at the look's alpha 0.02 only the first (0.012 * 2.5 = 0.03 < 0.05)
    assert [c.significant for c in judged] == [True, False, False]
    assert not any(c.significant for c in sequential.at_alpha(rows, 0.0))  # a look with nothing to spend


def test_the_final_verdict_is_judged_at_the_stopping_looks_alpha() -> None:
    schedule = sequential.Schedule(100.0)
    schedule.look(5, 13.0, False, family([row(0.5)]))
    # interrupted before the last look: the interrupt spends what is left
    assert sequential.final_alpha(schedule) == pytest.approx(ALPHA - schedule.used)
    crossed = schedule.look(8, 26.0, False, family([row(0.0001)]))
    assert crossed.crossed and sequential.final_alpha(schedule) == crossed.alpha


def test_a_look_its_rounds_cannot_reach_is_deferred_and_passes_its_share_to_the_next() -> None:
    schedule = sequential.Schedule(160.0)
    early = schedule.look(4, 20.0, False, family([row(0.03, n=4)]))  # 4 a side: no p below 0.029
    assert (early.alpha, early.crossed) == (0.0, ()) and early.deferred == pytest.approx(sequential.spent(1 / 8))
    assert "deferred" in early.line() and schedule.used == 0.0
    later = schedule.look(8, 40.0, False, family([row(0.5, n=8)]))
    assert later.alpha == pytest.approx(sequential.spent(1 / 4)) and not later.deferred  # both looks' shares
    last = schedule.look(9, 160.0, True, family([row(0.5, n=4)]))  # the last look spends what is left, always
    assert not last.deferred and schedule.used == pytest.approx(ALPHA)


def test_deferring_reads_the_round_counts_and_rows_never_the_numbers() -> None:
    # 6 a side: the smallest exact p is 2 / C(12, 6) = 0.0022; Holm multiplies it by the rows tested
    assert not sequential.reachable(family([row(1e-9, n=4)]), 0.0097)  # however small the p
    assert sequential.reachable(family([row(0.9, n=6)]), 0.0097)  # however large
    assert sequential.reachable(family([row(0.9, n=6)] * 4), 0.0097)
    assert not sequential.reachable(family([row(0.9, n=6)] * 5), 0.0097)
    assert not sequential.reachable([], 0.05)  # nothing tested yet: nothing to spend on
    # a look that can reach its alpha is taken as before: a change is called at it
    schedule = sequential.Schedule(160.0)
    assert schedule.look(6, 20.0, False, family([row(1e-4, n=6)])).crossed == ("numpy noop",)


def simulate(
    shift: float, sessions: int, seed: int, margin: float = 0.0, sigma: float = 0.11
) -> list[tuple[bool, float, int]]:
    args = argparse.Namespace(budget=24.0, round_s=1.0, rows=2, sigma=sigma, modes=False, margin=margin)
    rng = random.Random(seed)
    return [sequential_rounds.session(rng, args, shift) for _ in range(sessions)]


def test_simulated_a_a_sessions_keep_the_family_wise_false_alarms_at_five_percent_over_all_looks() -> None:
    runs = simulate(0.0, 250, seed=7)
    alarms = sum(called for called, _, _ in runs)
    # 5 % of 250 is 12.5; 24 is past the binomial's 99.9th percentile (a rule spending 10 % would
    # average 25 here)
    assert alarms <= 24, alarms
    assert all(seconds <= 24.0 for _, seconds, _ in runs)


def test_simulated_sessions_of_two_folders_apart_by_less_than_the_margin_keep_the_promise() -> None:
    """Two sides 0.7 % apart (two folders of the same code, docs/method.md) with steady rounds: the
    plain rule calls most sessions, the 1 % margin at most its 5 % over all looks."""
    plain = sum(called for called, _, _ in simulate(0.007, 100, seed=9, sigma=0.002))
    held = sum(called for called, _, _ in simulate(0.007, 100, seed=9, margin=0.01, sigma=0.002))
    assert plain >= 50 and held <= 5, (plain, held)


def test_simulated_large_changes_stop_at_an_early_look() -> None:
    runs = simulate(0.30, 100, seed=8)
    assert sum(called for called, _, _ in runs) >= 95
    assert sorted(seconds for _, seconds, _ in runs)[50] <= 6.0  # the median session stopped by the 1/4 look


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--budget", "5s"], "--budget 5s is outside"),
        (["--budget", "soon"], "is not a duration"),
        (["--budget", "3m", "--rounds", "6"], "drop --rounds, or drop --budget"),
        (["--budget", "3m", "--detect", "5"], "--detect needs this machine's noise floor"),
    ],
)
def test_bad_budgets_are_one_line_and_exit_2(args: list[str], words: str, tmp_path: Path) -> None:
    proc = harness("ab", "HEAD", "--suite", "fault", *args, "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_planted_slowdown_stops_the_session_at_an_early_look(tmp_path: Path) -> None:
    """Real jobs: a candidate doing three times the work is called before the budget is spent, and
    both sides hold the rounds the looks saw."""
    candidate = checkout(tmp_path / "candidate", plant=False)
    common = candidate / "suites" / "fault" / "common.py"
    common.write_text(common.read_text().replace('size = ctx.params["work"]', 'size = 3 * ctx.params["work"]'))
    proc = harness("ab", str(REPO), str(candidate), "--suite", "fault", "-f", "numpy", "-p", "work=200000",
                   "--repeat", "5", "--budget", "60s", "--backend", "local", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    looks = [line for line in proc.stdout.splitlines() if line.startswith("look ")]
    assert looks and "past the boundary: numpy noop" in looks[-1] and "(last look)" not in looks[-1], looks
    stopped = re.search(r"sequential: stopped after (\d+) look\(s\) and (\d+) round\(s\) a side, (\d+) s", proc.stdout)
    assert stopped and int(stopped.group(3)) < 60 and "a change was called" in proc.stdout, proc.stdout[-2000:]
    assert re.search(r"numpy +noop .* slower", proc.stdout), proc.stdout[-2000:]
    alpha = re.search(r"verdicts at alpha (0\.\d+)", proc.stdout)
    assert alpha, proc.stdout[-2000:]
    folders = []
    for side in ("baseline", "candidate"):
        folder = Path(next(x for x in proc.stdout.splitlines() if x.startswith(f"{side} run: ")).split(": ", 1)[1])
        run = load_run(folder)
        assert run.results["numpy"]["settings"]["rounds"] == int(stopped.group(2))
        # The looks are recorded: plan.json the budget (not the round cap), summary.json the alpha.
        assert json.loads((folder / "plan.json").read_text())["budget_s"] == 60.0
        assert run.summary["sequential"]["stopped"] == "a change was called"
        assert run.summary["sequential"]["alpha"] == pytest.approx(float(alpha.group(1)), abs=1e-4)
        folders.append(folder)
    # A later compare of the two runs judges at the same alpha, as the session did.
    later = harness("compare", *map(str, folders))
    scaled = re.search(r"scaled by 0\.05 / (\d\.\d+)", later.stdout)  # the session printed it to 4 decimals
    assert scaled and float(scaled.group(1)) == pytest.approx(float(alpha.group(1)), abs=1e-4), later.stdout
