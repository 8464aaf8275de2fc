"""A data-parallel job's `parallel` block: validated strictly, judged once (judge/parallel.py).

The run folders under tests/data/parallel/ are constructed results of a 2-rank mnist job in flax and
pytorch (tests/data/parallel/README.md says what each one plants); the tests load them from disk as
`harness show` does, then judge and check the figures, the straggler, the efficiency flag, the 1-way
gate and the run's exit status.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import statistics
from pathlib import Path
from typing import Any, cast

import pytest

from harness.core.result_types import Result
from harness.core.schema import InvalidResult, load_result, validate
from harness.judge.assessment import DISTURBED, FAILED, GATE, assess, declared_checks, run_exit_code
from harness.judge.guards import agreement
from harness.judge.parallel import (
    BLOCK_ROW,
    SINGLE_METRIC,
    STEP_METRIC,
    Straggler,
    figures_of,
    gate_rows,
    judge,
    straggler_of,
)
from harness.store.run_folder import Run, load_run
from suites.contract.ranks import PARALLEL_CHECKS, STRAGGLER_RATIO, STRAGGLER_SAMPLES, parallel_checks
from suites.contract.registry import all_suites
from tests.factories import write_run

DATA = Path(__file__).parent / "data" / "parallel"


def loaded(case: str) -> Run:
    return load_run(DATA / case)


def docs(case: str) -> list[dict[str, Any]]:
    return [json.loads((DATA / case / f"{fw}.json").read_text()) for fw in ("flax", "pytorch")]


def run_of(tmp_path: Path, documents: list[dict[str, Any]]) -> Run:
    folder = write_run(tmp_path / "run", documents)
    summary = json.loads((folder / "summary.json").read_text())
    summary["run_id"] = documents[0]["run_id"]
    (folder / "summary.json").write_text(json.dumps(summary))
    run = load_run(folder)
    assert not run.problems, run.problems
    return run


# -- the good pair -------------------------------------------------------------------------------


def test_a_good_pair_is_judged_with_the_figures_the_host_works_out() -> None:
    run = loaded("good")
    assert not run.problems and set(run.results) == {"flax", "pytorch"}
    judged = assess(run)
    parallel = judged.parallel
    assert parallel is not None
    flax, pytorch = parallel.of("flax"), parallel.of("pytorch")
    assert flax is not None and pytorch is not None
    # strong scaling, 64 rows: efficiency = (64 / step_N) / (2 x 64 / step_1) = step_1 / (2 x step_N)
    assert flax.efficiency == pytest.approx(0.036 / (2 * 0.020))
    assert pytorch.efficiency == pytest.approx(0.028 / (2 * 0.015))
    assert flax.exposed_comm_s == pytest.approx(0.0004)
    assert flax.peak_share == pytest.approx(15.9e9 / 25e9) and not flax.over_peak
    assert flax.straggler is None and flax.job_straggler is None and flax.notes == ()
    assert flax.efficiency_flag is None
    assert [r.rank for r in flax.ranks] == [0, 1] and not any(r.straggler for r in flax.ranks)
    assert [row.name for row in parallel.gate] == list(PARALLEL_CHECKS)
    assert all(row.passed == {"flax": True, "pytorch": True} for row in parallel.gate)
    assert parallel.gate_passed
    assert judged.gate_failed == frozenset() and judged.passed
    assert run_exit_code(judged) == 0


def test_a_data_parallel_job_is_held_to_the_data_parallel_checks_alone() -> None:
    # The mnist job reported only the dp_* checks: the suite's own-loop checks (required of an mnist
    # job) are not asked of it, and the dp_* checks compare across frameworks with their tolerances.
    run = loaded("good")
    declared = declared_checks(run)
    assert list(declared) == list(PARALLEL_CHECKS)
    own = {c.name for c in all_suites()["mnist"].checks} - set(PARALLEL_CHECKS)
    assert own and not own & set(declared)
    judged = assess(run)
    assert [row.name for row in judged.checks] == list(PARALLEL_CHECKS)
    assert all(row.passed == {"flax": True, "pytorch": True} for row in judged.checks)
    assert "rtol 1e-05" in judged.checks[0].tolerance


def test_a_suite_declaring_both_gives_each_loop_its_own_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    mnist = all_suites()["mnist"]
    own = [c for c in mnist.checks if c.name not in PARALLEL_CHECKS]
    both = dataclasses.replace(mnist, checks=(*own, *parallel_checks()))
    monkeypatch.setattr(agreement, "all_suites", lambda: {"mnist": both})
    dp = loaded("good")
    assert list(declared_checks(dp)) == list(PARALLEL_CHECKS)
    own_loop = Run(dp.path, dp.summary, {fw: {**r, "params": {**r["params"], "devices": 0}}
                                          for fw, r in dp.results.items()})  # fmt: skip
    assert list(declared_checks(own_loop)) == [c.name for c in own]


# -- a straggler ------------------------------------------------------------------------------------


def test_the_straggler_is_read_on_the_host_and_a_disagreeing_job_is_reported() -> None:
    judged = assess(loaded("straggler"))
    assert judged.parallel is not None
    flax, pytorch = judged.parallel.of("flax"), judged.parallel.of("pytorch")
    assert flax is not None and pytorch is not None
    assert flax.straggler is not None and flax.straggler.rank == 1
    assert flax.straggler.ratio == pytest.approx(0.0312 / 0.0195)
    assert [r.straggler for r in flax.ranks] == [False, True]
    assert flax.notes == ()  # the flax job named the same rank
    # the pytorch job named none; the host's reading stands, and a note says they disagree
    assert pytorch.job_straggler is None
    assert pytorch.straggler is not None and pytorch.straggler.rank == 1
    assert any("the job named no straggler" in n and "rank 1" in n for n in pytorch.notes)
    # a straggler is a figure: the run still passes
    assert run_exit_code(judged) == 0


def test_efficiency_is_flagged_when_a_step_it_divides_is_contended() -> None:
    judged = assess(loaded("straggler"))
    assert judged.parallel is not None
    flax, pytorch = judged.parallel.of("flax"), judged.parallel.of("pytorch")
    assert flax is not None and pytorch is not None
    assert flax.efficiency_flag == "CONTENDED" and "dp step: 2 of 5" in (flax.efficiency_why or "")
    assert flax.efficiency == pytest.approx(0.036 / (2 * 0.0316))  # still worked out, shown with its flag
    assert pytorch.efficiency_flag is None


def test_efficiency_takes_the_word_of_a_guard_that_flagged_either_step() -> None:
    run = loaded("good")
    for metric in (STEP_METRIC, SINGLE_METRIC):
        found = figures_of("flax", run.results["flax"], {("flax", metric): "steady"})
        assert found is not None and found.efficiency_flag == "RECOMPILED", metric
    clean = figures_of("flax", run.results["flax"], {("pytorch", STEP_METRIC): "steady"})
    assert clean is not None and clean.efficiency_flag is None


def test_a_job_named_straggler_the_ranks_do_not_show_is_not_shown(tmp_path: Path) -> None:
    flax, pytorch = docs("good")
    flax["parallel"]["straggler"] = {"rank": 0, "ratio": 2.0}
    judged = assess(run_of(tmp_path, [flax, pytorch]))
    assert judged.parallel is not None
    found = judged.parallel.of("flax")
    assert found is not None and found.straggler is None and found.job_straggler == Straggler(0, 2.0)
    assert any("the job named rank 0" in n and f"over {STRAGGLER_RATIO:g}x" in n for n in found.notes)


def test_the_host_recomputes_efficiency_and_says_when_the_job_disagrees(tmp_path: Path) -> None:
    flax, pytorch = docs("good")
    flax["parallel"]["efficiency"] = 0.99
    judged = assess(run_of(tmp_path, [flax, pytorch]))
    assert judged.parallel is not None
    found = judged.parallel.of("flax")
    assert found is not None and found.efficiency == pytest.approx(0.9)
    assert any("the job recorded 0.99" in n for n in found.notes)


@pytest.mark.parametrize(
    ("compute", "expected"),
    [
        ([1.0, 1.0], None),
        ([1.0, 1.31], 1),
        ([1.0, 1.29], None),
        ([1.0], None),
        ([1.0, 1.0, 1.0, 1.0, 2.0, 1.0], 4),
        ([2.0, 1.0, 1.0, 3.0], 3),  # two slow ranks: the slower is named
        ([0.0, 0.0, 1.0], None),  # the others' median is 0: no ratio to stand on
    ],
)
def test_straggler_rule(compute: list[float], expected: int | None) -> None:
    found = straggler_of([[c] * STRAGGLER_SAMPLES for c in compute])  # steady samples: the medians decide
    assert (found.rank if found else None) == expected


def test_straggler_matches_the_rule_written_out_on_many_ranks() -> None:
    rng = random.Random(7)
    for n in (2, 3, 8, 33, 1024):
        compute = [rng.uniform(0.9, 1.1) * (1.5 if rng.random() < 0.05 else 1.0) for _ in range(n)]
        ratios = [c / statistics.median(compute[:i] + compute[i + 1 :]) for i, c in enumerate(compute)]
        best = max(range(n), key=lambda i: ratios[i])
        found = straggler_of([[c] * STRAGGLER_SAMPLES for c in compute])
        if ratios[best] > STRAGGLER_RATIO:
            assert found is not None and found.rank == best and found.ratio == pytest.approx(ratios[best])
        else:
            assert found is None


# -- the 1-way gate ------------------------------------------------------------------------------


def test_disagreeing_or_missing_one_way_checks_fail_the_gate_and_the_run() -> None:
    judged = assess(loaded("disagree"))
    assert judged.parallel is not None
    rows = {row.name: row for row in judged.parallel.gate}
    first = rows["dp_first_step_loss"]
    assert first.passed == {"flax": True, "pytorch": False}
    assert first.rel_diff["pytorch"] == pytest.approx(1e-3, rel=1e-3)
    assert "1-way differs from N-way" in first.why["pytorch"]
    curve = rows["dp_loss_curve"]
    assert curve.passed == {"flax": False, "pytorch": True} and curve.why["flax"] == "no 1-way value"
    assert "flax" not in curve.values and "flax" in curve.nway
    assert not judged.parallel.gate_passed
    # the same consequence as a failed cross-framework check: not comparable, exit FAILED
    assert judged.gate_failed == {"flax", "pytorch"}
    assert judged.not_comparable == {"flax": GATE, "pytorch": GATE}
    assert all(all(row.passed.values()) for row in judged.checks)  # the cross-framework rows agree
    assert run_exit_code(judged) == FAILED != DISTURBED


def test_no_one_way_run_beside_an_n_way_one_fails_every_check(tmp_path: Path) -> None:
    flax, pytorch = docs("good")
    pytorch["parallel"]["single"] = None
    judged = assess(run_of(tmp_path, [flax, pytorch]))
    assert judged.parallel is not None
    assert all(row.passed["pytorch"] is False for row in judged.parallel.gate)
    assert all("parallel.single is null" in row.why["pytorch"] for row in judged.parallel.gate)
    assert run_exit_code(judged) == FAILED


def test_an_ok_data_parallel_job_without_its_block_fails_the_gate(tmp_path: Path) -> None:
    flax, pytorch = docs("good")
    del pytorch["parallel"]
    judged = assess(run_of(tmp_path, [flax, pytorch]))
    assert judged.parallel is not None and judged.parallel.missing == ("pytorch",)
    block = next(row for row in judged.parallel.gate if row.name == BLOCK_ROW)
    assert block.passed == {"pytorch": False}
    assert run_exit_code(judged) == FAILED


def test_one_device_has_no_one_way_step_and_no_gate(tmp_path: Path) -> None:
    documents = docs("good")
    for doc in documents:
        doc["params"]["devices"] = 1
        block = doc["parallel"]
        block.update(devices=1, global_batch=64, per_device_batch=64, collectives="none", single_step_s=None,
                     single_batch=None, single_throughput=None, efficiency=None, allreduce=None,
                     exposed_comm_s=None, overlap=None, straggler=None, single=None)  # fmt: skip
        block["ranks"] = block["ranks"][:1]
    run = run_of(tmp_path, documents)
    assert gate_rows(run) == ()
    judged = assess(run)
    assert judged.parallel is not None
    one = judged.parallel.of("flax")
    assert one is not None and one.efficiency is None and one.exposed_comm_s is None and one.straggler is None
    assert run_exit_code(judged) == 0


def test_a_run_without_data_parallel_jobs_has_no_parallel_judgement(tmp_path: Path) -> None:
    from tests.factories import metric, result

    run = load_run(write_run(tmp_path / "xla", [result(fw, [metric("m", [1.0, 1.1, 0.9])]) for fw in ("numpy", "jax")]))
    assert judge(run, gate_rows(run), {}) is None
    assert assess(run).parallel is None


# -- validation ------------------------------------------------------------------------------------


def test_the_malformed_file_is_rejected_with_one_line_and_the_rest_of_the_run_is_judged() -> None:
    with pytest.raises(InvalidResult) as caught:
        load_result(DATA / "malformed" / "pytorch.json")
    message = str(caught.value)
    assert "\n" not in message and "parallel.ranks: 3 entries, but devices is 2" in message
    run = loaded("malformed")
    assert set(run.results) == {"flax"} and len(run.problems) == 1
    judged = assess(run)
    assert judged.parallel is not None and [f.framework for f in judged.parallel.figures] == ["flax"]
    assert run_exit_code(judged) == FAILED  # a rejected file is a failed run


def _set(path: str, value: Any) -> Any:
    def change(block: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = block
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return change


_DELETE = object()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set("devices", 0), "parallel.devices: expected a whole number from 1 to 1024"),
        (_set("devices", 3), "parallel.devices: 3, but the job's params ask for devices=2"),
        (_set("devices", True), "parallel.devices: expected a whole number from 1 to 1024"),
        (_set("scaling", "diagonal"), "parallel.scaling: expected 'strong' or 'weak'"),
        (_set("collectives", "mpi"), "parallel.collectives: 'mpi' is not one of gloo, nccl, none"),
        (_set("step_s", 0.0), "parallel.step_s: expected a finite number > 0"),
        (_set("step_s", "20 ms"), "parallel.step_s: expected a finite number > 0"),
        (_set("step_s", 1e300), "parallel.step_s: expected a finite number > 0"),
        (_set("overlap", 1.5), "parallel.overlap: expected a probability (0 to 1) or null"),
        (_set("global_batch", 65), "parallel.global_batch: 65 is not devices x per_device_batch (2 x 32)"),
        (_set("items_per_row", 128), "parallel.items_per_row: a batch counted in samples has 1 item per row"),
        (_set("single_step_s", None), "parallel.single_step_s: expected null when devices is 1"),
        (_set("efficiency", None), "parallel.efficiency: expected null when devices is 1"),
        (_set("single_batch", 32), "parallel.single_batch: 32, but strong scaling runs the 1-way step on 64 rows"),
        (_set("ranks.1.rank", 0), "parallel.ranks[1].rank: expected 1 (one entry per rank, in rank order)"),
        (_set("ranks.1.host", 7), "parallel.ranks[1].host: expected a string of at most 255 characters"),
        (_set("ranks.1.host", "h" * 300), "parallel.ranks[1].host: expected a string of at most 255 characters"),
        (_set("ranks.0.compute_s", -1.0), "parallel.ranks[0].compute_s: expected a finite number >= 0"),
        (_set("ranks.0.pid", 7), "parallel.ranks[0].pid: not a field of the data-parallel block"),
        (_set("ranks", []), "parallel.ranks: expected a non-empty list of objects"),
        (_set("ranks.1", _DELETE), "parallel.ranks: 1 entries, but devices is 2 (one per rank)"),
        (_set("straggler", {"rank": 5, "ratio": 1.5}), "parallel.straggler.rank: 5 is not a rank of 2"),
        (_set("allreduce.busbw_Bps", -1.0), "parallel.allreduce.busbw_Bps: expected a finite number >= 0"),
        (_set("allreduce.peak_Bps", 0.0), "parallel.allreduce.peak_Bps: expected a finite number > 0 or null"),
        (_set("throughput", _DELETE), "parallel.throughput: missing field"),
        (_set("fault", "slow:1:50"), "parallel.fault: not a field of the data-parallel block"),
        (_set("single.global_batch", 32), "parallel.single.global_batch: 32, but the 1-way checks are taken at"),
        (_set("single.checks.0.name", "loss"), "parallel.single.checks[0] ('loss').name: not a data-parallel check"),
        (_set("single.checks.1.name", "dp_first_step_loss"), "parallel.single.checks[1] ('dp_first_step_loss').name: duplicate"),
        (_set("single.checks.0.value", []), "parallel.single.checks[0] ('dp_first_step_loss').value: expected a finite"),
        (_set("single.checks.0.value", "2.3"), "parallel.single.checks[0] ('dp_first_step_loss').value: expected a finite"),
    ],
)  # fmt: skip
def test_a_malformed_block_is_refused_in_one_line(change: Any, message: str) -> None:
    doc = copy.deepcopy(docs("good")[1])
    change(doc["parallel"])
    with pytest.raises(InvalidResult) as caught:
        validate(doc, "pytorch.json")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("pytorch.json: invalid result: ")
    assert message in text, text


def test_a_block_for_a_job_that_asked_for_no_devices_is_refused() -> None:
    doc = copy.deepcopy(docs("good")[0])
    doc["params"]["devices"] = 0
    with pytest.raises(InvalidResult, match="parallel.devices: 2, but the job's params ask for devices=0"):
        validate(doc, "flax.json")


def test_results_without_a_block_or_with_a_null_one_validate() -> None:
    doc = copy.deepcopy(docs("good")[0])
    del doc["parallel"]
    assert "parallel" not in validate(copy.deepcopy(doc), "flax.json")
    doc["parallel"] = None
    assert validate(doc, "flax.json")["parallel"] is None  # type: ignore[typeddict-item]


def test_a_hostile_host_name_is_kept_verbatim_for_the_media_to_escape() -> None:
    run = loaded("straggler")
    host = run.results["flax"]["parallel"]["ranks"][1]["host"]  # type: ignore[typeddict-item]
    assert "\x1b" in host and "<script>" in host


def test_pooled_rounds_hold_round_ones_block_to_round_ones_checks(tmp_path: Path) -> None:
    from harness.execute.rounds import pool

    pooled: list[dict[str, Any]] = []
    for doc in docs("good"):
        second = copy.deepcopy(doc)
        for check in second["checks"]:  # another process: the same step, a few ulps apart
            check["value"] = [v * (1 + 1e-9) for v in check["value"]]
        pooled.append(json.loads(json.dumps(pool(cast(list[Result], [doc, second]), doc["run_id"]))))
    assert pooled[0]["parallel"] == docs("good")[0]["parallel"]  # round 1's, not pooled
    judged = assess(run_of(tmp_path, pooled))
    assert judged.parallel is not None and judged.parallel.gate_passed
    flax = judged.parallel.of("flax")
    assert flax is not None and any("round 1 of 2" in note for note in flax.notes)
    assert run_exit_code(judged) == 0
    # round 1 left a check out: the 1-way value has nothing of its round to be held to
    for doc in pooled:
        first = doc["checks"][0]
        first["value"], first["missing_rounds"] = first["value"][1:], [1]
    judged = assess(run_of(tmp_path / "missing", pooled))
    assert judged.parallel is not None
    row = judged.parallel.gate[0]
    assert row.passed == {"flax": False, "pytorch": False} and row.why["flax"] == "no N-way value to hold it to"


def test_each_ranks_compute_samples_are_accepted_within_their_cap() -> None:
    # The job writes every rank's per-interval compute steps (suites/runtime/data_parallel.py).
    doc = copy.deepcopy(docs("good")[0])
    for rank in doc["parallel"]["ranks"]:
        rank["compute_samples"] = [rank["compute_s"]] * 6
    validate(copy.deepcopy(doc), "flax.json")
    doc["parallel"]["ranks"][1]["compute_samples"] = [0.02] * 1001
    with pytest.raises(InvalidResult, match=r"parallel\.ranks\[1\]\.compute_samples"):
        validate(doc, "flax.json")
