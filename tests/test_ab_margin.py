"""`harness ab --margin`: the smallest change a session calls, because two copies of the same code in
two folders differ by a fraction of a percent that no number of rounds can pin on the code
(statistics.beyond_margin_p, compare.Change.margin, run_folder.session_margin)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from harness.backends.base import BackendOptions, make_backend
from harness.core.errors import HarnessError
from harness.core.schema import interleaved_problem, load_summary
from harness.core.statistics import beyond_margin_p, mann_whitney_u
from harness.execute import ab
from harness.execute.rounds import Side
from harness.judge import noise_floor
from harness.judge.assessment import assess
from harness.judge.compare import Change, compare_runs
from harness.judge.sequential import Schedule, past_boundary
from harness.report.comparison import evidence_lines
from harness.store.plan import Plan, PlanRequest, make_plan
from harness.store.run_folder import interleaved_record, load_run, session_margin
from tests.conftest import harness
from tests.factories import metric, result, write_run
from tests.test_ab import partner
from tests.test_noise_floor import rounds_run


def shifted(seed: int, rounds: int, ratio: float, spread: float) -> tuple[list[float], list[float]]:
    """Round medians of a side A and a side B whose level is `ratio` times A's, log-normal noise."""
    rng = random.Random(seed)
    a = [math.exp(rng.gauss(0, spread)) for _ in range(rounds)]
    b = [ratio * math.exp(rng.gauss(0, spread)) for _ in range(rounds)]
    return a, b


def test_without_a_margin_it_is_the_mann_whitney_p() -> None:
    for seed in range(5):
        a, b = shifted(seed, 12, 1.01, 0.02)
        assert beyond_margin_p(a, b, 0.0) == mann_whitney_u(a, b)[1]


def test_a_steady_difference_inside_the_margin_is_never_called_one_beyond_it_is_either_way() -> None:
    a, b = shifted(1, 40, 1.005, 0.001)  # 0.5 % apart, very steady rounds
    assert beyond_margin_p(a, b, 0.0) < 1e-6  # plain: as clear as a difference gets
    assert beyond_margin_p(a, b, 0.01) == 1.0  # but within 1 %: no direction is past the margin
    for ratio in (1.02, 1 / 1.02):  # 2 %, slower and faster
        a, b = shifted(2, 40, ratio, 0.001)
        assert beyond_margin_p(a, b, 0.01) < 1e-6


def test_false_calls_of_a_difference_within_the_margin_stay_under_alpha() -> None:
    """The promise the margin makes: 0.8 % apart (what two folders may differ by) is called in at
    most 5 % of sessions at a 1 % margin, while the plain test calls it in most of them."""
    plain_calls = margin_calls = 0
    sessions = 400
    for seed in range(sessions):
        a, b = shifted(100 + seed, 30, 1.008, 0.01)
        plain_calls += mann_whitney_u(a, b)[1] < 0.05
        margin_calls += beyond_margin_p(a, b, 0.01) < 0.05
    assert plain_calls > 0.5 * sessions
    assert margin_calls <= 0.05 * sessions


def change(low: float, high: float, margin: float) -> Change:
    return Change(
        framework="numpy", metric="noop", unit="s", better="lower", median_a=1.0, median_b=1.01, ratio=1.01,
        ci_low=low, ci_high=high, p_value=1e-4, p_adjusted=1e-4, processes=(40, 40), margin=margin,
    )  # fmt: skip


def test_a_verdict_needs_its_interval_past_the_margin_not_only_past_1() -> None:
    assert change(1.005, 1.02, 0.0).significant
    assert not change(1.005, 1.02, 0.01).significant
    assert change(1.011, 1.02, 0.01).significant
    assert change(0.97, 0.989, 0.01).significant and not change(0.97, 0.991, 0.01).significant


def test_the_margin_is_recorded_bounded_and_absent_in_older_summaries() -> None:
    assert interleaved_problem({"side": "baseline", "partner": "r2"}) is None  # before margins existed
    assert interleaved_problem(interleaved_record("baseline", "r2", 0.01)["interleaved"]) is None
    for bad in (-0.01, 0.5, "1%", True, math.nan, math.inf, None):
        found = interleaved_problem({"side": "baseline", "partner": "r2", "margin": bad})
        assert found is not None and "interleaved.margin" in found
    a = {"run_id": "ra", **interleaved_record("baseline", "rb", 0.01)}
    b = {"run_id": "rb", **interleaved_record("candidate", "ra", 0.02)}
    assert session_margin(a, b) == session_margin(b, a) == 0.02  # the wider: neither made easier to call
    assert session_margin(a, {"run_id": "rb"}) == 0.0  # not one session: no margin
    old = {"run_id": "rb", "interleaved": {"side": "candidate", "partner": "ra"}}
    assert session_margin({"run_id": "ra", "interleaved": {"side": "baseline", "partner": "rb"}}, old) == 0.0


def test_a_planted_margin_beyond_its_bound_makes_the_summary_unreadable(tmp_path: Path) -> None:
    run = partner(rounds_run(tmp_path / "a", 0.01, 1), "ra", "baseline", "rb")
    summary = json.loads((run / "summary.json").read_text())
    summary["interleaved"]["margin"] = 0.9  # a gate that would pass any regression
    (run / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(HarnessError, match="interleaved.margin"):
        load_summary(run / "summary.json")


def test_two_sides_half_a_percent_apart_are_called_without_the_margin_and_not_with_it(tmp_path: Path) -> None:
    a = partner(rounds_run(tmp_path / "a", 0.0005, 10, rounds=30), "ra", "baseline", "rb")
    b = partner(rounds_run(tmp_path / "b", 0.0005, 11, rounds=30, scale=1.005), "rb", "candidate", "ra")
    plain = compare_runs(assess(load_run(a)), assess(load_run(b)))
    assert all(c.significant and c.margin == 0.0 for c in plain.changes)
    for run, side, other in ((a, "baseline", "rb"), (b, "candidate", "ra")):
        summary = json.loads((run / "summary.json").read_text())
        summary.update(interleaved_record(side, other, 0.01))
        (run / "summary.json").write_text(json.dumps(summary))
    held = compare_runs(assess(load_run(a)), assess(load_run(b)))
    assert all(not c.significant and c.margin == 0.01 for c in held.changes)
    assert any("beyond the session's margin, 1.0% either way" in line for line in evidence_lines(held))
    shown = harness("compare", str(a), str(b), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert [row["margin"] for row in json.loads(shown.stdout)["changes"]] == [0.01, 0.01]


def test_what_a_session_detects_includes_its_margin() -> None:
    without = noise_floor.detectable(0.02, 30, 1)
    assert without is not None
    assert noise_floor.detectable(0.02, 30, 1, 0.01) == pytest.approx((1 + without) * 1.01 - 1)
    more = noise_floor.rounds_for([0.02], 0.03, 1, margin=0.01)
    fewer = noise_floor.rounds_for([0.02], 0.03, 1)
    assert more is not None and fewer is not None and more > fewer


def test_detect_within_the_margin_is_refused_before_anything_runs() -> None:
    plan = make_plan(PlanRequest(suite="xla", frameworks="numpy", params=("matrix_size=8",)), backend="local")
    with pytest.raises(HarnessError, match=r"never calls a change within its margin \(1.0%\)"):
        noise_floor.plan_rounds(plan, "0.5%", interleaved=True, margin=0.01)


@pytest.mark.parametrize("text", ["abc", "-1%", "21%", "nan", "inf", "1e999", ""])
def test_a_bad_margin_is_one_line_and_exit_2(text: str) -> None:
    with pytest.raises(HarnessError, match="--margin"):
        ab.parse_margin(text)
    proc = harness("ab", "HEAD", "--suite", "fault", "-f", "numpy", "--margin", text, "--dry-run", "--backend", "local")
    assert proc.returncode == 2 and "--margin" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_margin_is_given_in_percent_and_the_plan_says_it() -> None:
    assert ab.parse_margin("1%") == ab.parse_margin("1") == 0.01 and ab.parse_margin("0") == 0.0
    assert math.copysign(1, ab.parse_margin("-0")) == 1.0
    proc = harness(
        "ab", "HEAD", "--suite", "fault", "-f", "numpy", "--margin", "2.5%", "--dry-run", "--backend", "local"
    )
    assert proc.returncode == 0 and "margin 2.5%" in proc.stdout, proc.stderr


def side_rounds(folder: Path, plan: Plan, level: float, seed: int, rounds: int = 30) -> list[Path]:
    """`rounds` round folders of one side's numpy job, each a result of 12 steady samples."""
    rng = random.Random(seed)
    made = []
    for k in range(1, rounds + 1):
        doc = result("numpy", [metric("matmul", [level * (1 + rng.gauss(0, 0.0005))] * 12)])
        doc["run_id"], doc["params"] = f"round-{k}", dict(plan.jobs[0].params)
        write_run(folder / f"round-{k}", [doc])
        made.append(folder / f"round-{k}")
    return made


@pytest.mark.parametrize(("margin", "called"), [(0.0, True), (0.01, False)])
def test_a_look_of_a_budgeted_session_judges_beyond_the_sessions_margin(
    tmp_path: Path, margin: float, called: bool
) -> None:
    """What `ab --budget` looks at between rounds (execute/ab.Looks) carries the margin the sides
    record: two sides 0.5 % apart are past a look's boundary without it and not with it."""
    plan = make_plan(PlanRequest(suite="xla", frameworks="numpy", params=("matrix_size=8",)), backend="local")
    plans = [plan, replace(plan, run_id=plan.run_id + "b")]
    sides = []
    for i, (name, level) in enumerate((("baseline", 0.1), ("candidate", 0.1005))):
        folder = tmp_path / name
        record = interleaved_record(name, plans[1 - i].run_id, margin)
        side = Side(plans[i], make_backend("local", BackendOptions()), folder, extra=record)
        side.round_dirs.extend(side_rounds(folder, plan, level, seed=i))
        sides.append(side)
    [row] = ab.Looks(sides, Schedule(60.0)).changes()
    assert row.margin == margin and row.processes == (30, 30)
    assert [c.framework for c in past_boundary([row], 0.01)] == (["numpy"] if called else [])
