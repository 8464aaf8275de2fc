"""A tail percentile rests on its slowest samples, so one disturbed sample there is the number
(harness/judge/guards/contention.py): a round whose tail the machine disturbed leaves the percentile's
verdicts, and a percentile disturbed in most processes is CONTENDED; the median keeps its own rule."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

from harness.judge.assessment import assess, kept_rounds, run_exit_code
from harness.judge.compare import compare_runs
from harness.judge.guards.contention import tail_disturbed
from harness.store.run_folder import load_run
from suites.contract.inference import percentile

DATA = Path(__file__).parent / "data" / "inference" / "gpt-infer"
LATENCY, P90, P99, MAX = (f"latency{label} (batch 1)" for label in ("", " p90", " p99", " max"))


def test_the_tail_is_the_samples_at_or_above_the_quantiles_lower_order_statistic() -> None:
    samples = [float(v) for v in range(100)]  # index i is the (i+1)-th fastest
    assert tail_disturbed(samples, {98}, 0.99) and tail_disturbed(samples, {99}, 0.99)
    assert not tail_disturbed(samples, {97}, 0.99)  # below the two p99 reads
    assert tail_disturbed(samples, {99}, 1.0) and not tail_disturbed(samples, {98}, 1.0)  # the max: itself
    assert tail_disturbed(samples, {89}, 0.9) and not tail_disturbed(samples, {88}, 0.9)
    assert not tail_disturbed([], {0}, 0.99)
    shuffled = samples[::-1]  # ranks, not positions: index 0 is now the slowest
    assert tail_disturbed(shuffled, {0}, 0.99) and not tail_disturbed(shuffled, {99}, 0.99)


def one_process(tmp_path: Path, contended: str) -> Path:
    """The gpt-infer fixture with pytorch's slowest (or fastest) request marked contended."""
    run = tmp_path / contended
    shutil.copytree(DATA, run)
    path = run / "pytorch.json"
    doc = json.loads(path.read_text())
    latency = next(m for m in doc["metrics"] if m["name"] == LATENCY)
    pick = max if contended == "slowest" else min
    latency["contention"]["contended"] = [pick(range(len(latency["samples"])), key=latency["samples"].__getitem__)]
    path.write_text(json.dumps(doc))
    return run


def test_one_pre_empted_request_at_the_top_makes_the_tail_contended_and_the_median_stands(tmp_path: Path) -> None:
    judged = assess(load_run(one_process(tmp_path, "slowest")))
    for tail in (P90, P99, MAX):
        why = judged.excluded("pytorch", tail)
        assert why is not None and why.startswith("contended (its tail in 1/1 processes)"), (tail, why)
        assert ("pytorch", tail) in judged.disturbed
    assert judged.excluded("pytorch", LATENCY) is None  # 1 of 30 samples: the median's rule lets it stand
    assert judged.excluded("flax", P99) is None
    # One metric's flag, not the run's: the exit status stays the run-wide rule (most samples disturbed).
    assert judged.crowded is None and run_exit_code(judged) == 0


def test_a_pre_empted_fast_request_leaves_every_percentile_alone(tmp_path: Path) -> None:
    judged = assess(load_run(one_process(tmp_path, "fastest")))
    assert all(judged.excluded("pytorch", name) is None for name in (LATENCY, P90, P99, MAX))


def rounds_run(tmp_path: Path, name: str, slow: float, hit: set[int]) -> Path:
    """Six processes of the fixture's pytorch requests, every request `slow` times the fixture's; in the
    rounds `hit`, the slowest request is marked contended."""
    run = tmp_path / name
    shutil.copytree(DATA, run)
    path = run / "pytorch.json"
    doc = json.loads(path.read_text())
    doc["settings"]["rounds"] = 6
    base = next(m for m in doc["metrics"] if m["name"] == LATENCY)
    per_round = [[s * slow * (1 + 0.001 * r) for s in base["samples"]] for r in range(6)]
    n = len(base["samples"])
    keep = []
    for m in doc["metrics"]:
        if m["name"] == LATENCY:
            m["samples"] = [s for rnd in per_round for s in rnd]
            m["round_sizes"], m["round_medians"] = [n] * 6, [statistics.median(rnd) for rnd in per_round]
            seen: dict[str, Any] = m["contention"]
            for key in ("cpu_s", "wall_s", "involuntary_switches", "others_cores", "steal_cores", "runnable"):
                seen[key] = seen[key] * 6
            seen["contended"] = [r * n + max(range(n), key=per_round[r].__getitem__) for r in sorted(hit)]
            m["first_call"] = base["first_call"]
        elif m["name"] in (P90, P99, MAX):
            q = {P90: 0.9, P99: 0.99, MAX: 1.0}[m["name"]]
            m["samples"] = m["round_medians"] = [percentile(rnd, q) for rnd in per_round]
        elif m["name"] == "throughput (batch 1)":
            m["samples"] = [1 / s for rnd in per_round for s in rnd]
            m["round_medians"] = [1 / statistics.median(rnd) for rnd in per_round]
        else:
            continue  # the sweep's larger batches are not what this test is about
        m["stats"] = {**m["stats"], "n": len(m["samples"]), "median": statistics.median(m["samples"])}
        keep.append(m)
    doc["metrics"] = keep
    doc["inference"]["sweep"] = [point for point in doc["inference"]["sweep"] if point["batch"] == 1]
    path.write_text(json.dumps(doc))
    return run


def test_rounds_whose_tail_was_disturbed_leave_the_percentiles_verdict_only(tmp_path: Path) -> None:
    judged = assess(load_run(rounds_run(tmp_path, "b", 1.0, {1, 4})))
    result = judged.run.results["pytorch"]
    metrics = {m["name"]: m for m in result["metrics"]}
    assert kept_rounds(result, metrics[LATENCY])[1] == 0  # the median's rule: 1 sample of 30 a round
    for tail in (P90, P99, MAX):
        kept, out = kept_rounds(result, metrics[tail])
        assert out == 2 and len(kept) == 4, tail
        assert judged.excluded("pytorch", tail) is None  # 2 of 6 processes: not most
    a = assess(load_run(rounds_run(tmp_path, "a", 1.0, set())))
    rows = {c.metric: c for c in compare_runs(a, judged).changes}
    assert rows[P99].processes == (6, 4) and rows[P99].left_out == (0, 2)
    assert rows[LATENCY].processes == (6, 6)


def test_most_processes_disturbed_at_the_tail_is_a_disturbed_row_not_a_verdict(tmp_path: Path) -> None:
    """A slower candidate whose every tail the machine disturbed: no verdict on its p99, exit DISTURBED."""
    a = assess(load_run(rounds_run(tmp_path, "a", 1.0, set())))
    b = assess(load_run(rounds_run(tmp_path, "b", 1.5, {0, 1, 2, 3})))
    rows = {c.metric: c for c in compare_runs(a, b).changes}
    assert rows[P99].disturbed and not rows[P99].significant
    assert rows[LATENCY].significant and not rows[LATENCY].disturbed  # its median is the code's
