"""benchmarks/inference_reference.py: the reference loops at tiny sizes, reading the suites' results, the
paired verdict and the command line's errors."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.inference_reference import (
    REPO,
    BenchError,
    Row,
    Shape,
    compare,
    parse_args,
    parse_reference,
    prefill_repeat,
    read_suite_result,
    run_reference,
    suite_param_count,
    verdict,
)

DATA = Path(__file__).parent / "data" / "inference"
TINY = Shape(image_size=16, requests=5, n_layer=1, n_head=2, n_embd=16, block_size=16, prompt_len=4, new_tokens=4,
             decode_steps=7)  # fmt: skip


def _load(folder: str, framework: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / folder / f"{framework}.json").read_text())
    return doc


def _median(doc: dict[str, Any], name: str) -> float:
    (metric,) = [m for m in doc["metrics"] if m["name"] == name]
    return float(metric["stats"]["median"])


def test_the_suites_parameter_counts() -> None:
    assert suite_param_count("resnet18", TINY) == 11_177_025  # torchvision's ResNet18 with one logit
    # wte 256x16 + wpe 16x16 + one block (2 LayerNorms, qkv, proj, fc, proj) + ln_f; the output is tied
    block = 2 * 2 * 16 + (16 * 48 + 48) + (16 * 16 + 16) + (16 * 64 + 64) + (64 * 16 + 16)
    assert suite_param_count("gpt", TINY) == 256 * 16 + 16 * 16 + block + 2 * 16


@pytest.mark.slow  # each reference runs real torch / jax in its own process (jax compiles a ResNet18)
@pytest.mark.parametrize("framework", ["pytorch", "flax"])
@pytest.mark.parametrize("workload", ["resnet18", "gpt"])
def test_reference_loop_times_the_suites_model(workload: str, framework: str) -> None:
    out = run_reference(workload, framework, TINY)
    # The same architecture: the suite's parameter count (the tied output counted once).
    assert out["params"] == suite_param_count(workload, TINY)
    if workload == "resnet18":
        series = {"latency": (out["latency"], TINY.requests), "first": ([out["first"]], 1)}
    else:
        series = {
            "prefill": (out["prefill"], prefill_repeat()),
            "decode": (out["decode"], TINY.decode_steps),  # 7 steps: three generations of 3 from the prompt
            "firsts": ([out["prefill_first"], out["decode_first"]], 2),
        }
    for name, (times, count) in series.items():
        assert len(times) == count, name
        assert all(math.isfinite(t) and t > 0 for t in times), name
    if (workload, framework) == ("gpt", "flax"):
        # The position is traced: no decode step inside the samples compiled.
        assert out["steady_compilations"] == 0


@pytest.mark.parametrize("framework", ["flax", "pytorch"])
def test_suite_figures_are_read_through_the_inference_block(framework: str) -> None:
    doc = _load("resnet18-infer", framework)
    got = read_suite_result("resnet18", doc)
    assert got == {
        "latency p50": _median(doc, "latency (batch 1)"),
        "latency p99": _median(doc, "latency p99 (batch 1)"),
    }
    doc = _load("gpt-generate", framework)
    got = read_suite_result("gpt", doc)
    assert got == {
        "time to first token": _median(doc, "time to first token"),
        "decode step p50": _median(doc, "decode step"),
        "decode step p99": _median(doc, "decode step p99"),
    }
    assert got["decode step p50"] <= got["decode step p99"]


def _spoil(doc: dict[str, Any], how: str) -> dict[str, Any]:
    bad = copy.deepcopy(doc)
    if how == "failed":
        bad["status"] = "failed"
    elif how == "nan median":
        next(m for m in bad["metrics"] if m["name"] == "decode step")["stats"]["median"] = float("nan")
    elif how == "negative p99":
        next(m for m in bad["metrics"] if m["name"] == "decode step p99")["stats"]["median"] = -1.0
    elif how == "metric gone":
        bad["metrics"] = [m for m in bad["metrics"] if m["name"] != "time to first token"]
    elif how == "metric twice":
        bad["metrics"].append(copy.deepcopy(bad["metrics"][0]))
    elif how == "no generate block":
        bad["inference"]["generate"] = None
    elif how == "name not a string":
        bad["inference"]["latency"]["metric"] = ["decode step"]
    elif how == "other suite":
        bad["suite"] = "resnet18"
    return bad


@pytest.mark.parametrize(
    "how",
    ["failed", "nan median", "negative p99", "metric gone", "metric twice", "no generate block", "name not a string",
     "other suite"],
)  # fmt: skip
def test_a_suite_result_that_cannot_be_believed_is_refused(how: str) -> None:
    doc = _load("gpt-generate", "flax")
    read_suite_result("gpt", doc)  # the unspoilt one reads
    with pytest.raises(BenchError):
        read_suite_result("gpt", _spoil(doc, how))


def test_a_result_of_the_other_mode_is_refused() -> None:
    with pytest.raises(BenchError, match="infer"):
        read_suite_result("resnet18", {**_load("resnet18-infer", "flax"), "inference": _load("gpt-generate", "flax")["inference"]})  # fmt: skip
    with pytest.raises(BenchError, match="generate"):
        read_suite_result("gpt", _load("gpt-infer", "flax"))


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "not json\n",
        "[1, 2]\n",
        json.dumps({"params": 5, "first": 0.1, "latency": [0.1, -0.2]}),
        json.dumps({"params": 5, "first": 0.1, "latency": [0.1, float("inf")]}),
        json.dumps({"params": 5, "first": 0.1, "latency": []}),
        json.dumps({"params": 5, "first": True, "latency": [0.1]}),
        json.dumps({"first": 0.1, "latency": [0.1]}),
        json.dumps({"params": 5, "first": 0.1, "latency": [0.1], "steady_compilations": -1}),
    ],
)
def test_a_reference_output_that_cannot_be_believed_is_refused(stdout: str) -> None:
    with pytest.raises(BenchError):
        parse_reference("resnet18", "pytorch", stdout)


def test_a_reference_output_is_read_from_its_last_line() -> None:
    out = parse_reference("resnet18", "flax", 'a warning\n{"params": 7, "first": 0.5, "latency": [0.25, 0.5]}\n')
    assert out == {"params": 7, "first": 0.5, "latency": [0.25, 0.5]}


def test_the_verdict_is_the_median_of_the_ratios_within_rounds() -> None:
    # Round 2 is slow for both sides: the paired ratios are 0.9, 0.9, 1.2 (median 0.9), while the ratio of
    # the sides' medians would be 1.2 / 1.0 -- drift across rounds must not decide the verdict.
    row = Row("gpt", "flax", "decode step p50", reference=[1.0, 10.0, 1.0], suite=[0.9, 9.0, 1.2])
    assert row.ratios == pytest.approx([0.9, 0.9, 1.2])
    assert row.ratio == pytest.approx(0.9)
    summary = row.summary()
    assert summary["median_ratio"] == pytest.approx(0.9)
    assert summary["verdict"] == "faster"
    assert (verdict(0.97), verdict(1.0), verdict(1.02), verdict(1.03)) == (
        "faster", "parity (within 2%)", "parity (within 2%)", "SLOWER",
    )  # fmt: skip


def test_rounds_interleave_the_reference_then_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.inference_reference as bench

    calls: list[tuple[str, str, str]] = []

    def reference(workload: str, framework: str, shape: Shape, device: str) -> dict[str, Any]:
        calls.append(("reference", workload, framework))
        return {"params": suite_param_count(workload, shape), "latency": [2.0, 2.0, 2.0]}

    def suite(workload: str, framework: str, shape: Shape, results: Path, device: str) -> dict[str, float]:
        calls.append(("suite", workload, framework))
        return {"latency p50": 1.0 + len(calls) / 100, "latency p99": 3.0}

    monkeypatch.setattr(bench, "run_reference", reference)
    monkeypatch.setattr(bench, "run_suite", suite)
    args = Namespace(rounds=2, workloads=["resnet18"], frameworks=["flax", "pytorch"], device="cpu")
    rows = compare(args, TINY, lambda line: None)
    one_round = [("reference", "resnet18", "flax"), ("suite", "resnet18", "flax"),
                 ("reference", "resnet18", "pytorch"), ("suite", "resnet18", "pytorch")]  # fmt: skip
    assert calls == one_round * 2
    p50 = next(r for r in rows if (r.framework, r.metric) == ("pytorch", "latency p50"))
    assert p50.reference == [2.0, 2.0] and p50.suite == [1.04, 1.08]


def test_a_reference_with_another_parameter_count_stops_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.inference_reference as bench

    monkeypatch.setattr(bench, "run_reference", lambda *a: {"params": 1, "latency": [1.0]})
    args = Namespace(rounds=1, workloads=["resnet18"], frameworks=["flax"], device="cpu")
    with pytest.raises(BenchError, match="11177025"):
        compare(args, TINY, lambda line: None)


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--n-embd", "30", "--n-head", "4"], "--n-head"),
        (["--prompt-len", "100", "--new-tokens", "64"], "--block-size"),
        (["--frameworks", "flax,jax"], "--frameworks"),
        (["--frameworks", "flax,flax"], "--frameworks"),
        (["--workloads", ""], "--workloads"),
        (["--rounds", "0"], "--rounds"),
        (["--requests", "4"], "--requests"),
        (["--new-tokens", "1"], "--new-tokens"),
        (["--image-size", "many"], "--image-size"),
        (["--device", "tpu"], "--device"),
        (["--json", "/nonexistent-folder/out.json"], "--json"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], names: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_args(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert names in err


def test_the_command_line_refuses_bad_arguments_without_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/inference_reference.py", "--n-embd", "30", "--n-head", "4"],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "inference_reference.py: error: --n-embd 30 is not a multiple of --n-head 4: pick a head count that "
        "divides the width"
    ]


def test_the_defaults_parse() -> None:
    args, shape = parse_args([])
    assert shape == Shape() and args.rounds == 3
    assert args.workloads == ["resnet18", "gpt"] and args.frameworks == ["flax", "pytorch"]
    assert shape.prompt_len + shape.new_tokens <= shape.block_size
