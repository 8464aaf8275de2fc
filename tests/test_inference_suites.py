"""Inference modes on real frameworks (suites/runtime/inference.py): resnet18 and gpt `mode=infer`, gpt
`mode=generate` with a KV cache, eager and compiled, float32 and bf16, at their smoke sizes; and the
refusals before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from harness.judge.assessment import assess
from harness.store.run_folder import load_run
from suites.contract.inference import INFERENCE_SMOKE, percentile
from tests.conftest import finished, harness, run_folder


def metric(doc: Any, name: str) -> Any:
    return next(m for m in doc["metrics"] if m["name"] == name)


def passed_checks(run: Path) -> dict[str, dict[str, bool]]:
    return {row.name: row.passed for row in assess(load_run(run)).checks}


@pytest.mark.slow
def test_resnet18_infer_times_single_requests_and_a_sweep_in_both_frameworks(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "resnet18", "--frameworks", "flax,pytorch", "--smoke", "--param", "mode=infer",
                   "--backend", "local", "--results-dir", str(tmp_path))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    assert passed_checks(run) == {"infer_outputs": {"flax": True, "pytorch": True}}
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")
        block = doc["inference"]  # type: ignore[typeddict-item]
        latency = metric(doc, block["latency"]["metric"])
        assert len(latency["samples"]) == INFERENCE_SMOKE["requests"] and latency["first_call"] > 0
        assert block["latency"]["percentiles"]["p50"] == latency["name"]  # its median
        assert latency["stats"]["median"] == percentile(latency["samples"], 0.5)
        for label, q in (("p90", 0.9), ("p99", 0.99)):
            value = metric(doc, block["latency"]["percentiles"][label])["samples"]
            assert value == [percentile(latency["samples"], q)]
        assert [p["batch"] for p in block["sweep"]] == [1, 8] and block["stopped"] is None
        eight = metric(doc, block["sweep"][1]["throughput"])
        seconds = metric(doc, block["sweep"][1]["time"])["samples"]
        assert eight["samples"] == [8 / s for s in seconds] and eight["unit"] == "images/s"
    for heading in ("Inference: latency of single requests at batch 1", "Inference: throughput against batch size"):
        assert heading in proc.stdout


@pytest.mark.slow
def test_gpt_generates_the_same_tokens_in_both_frameworks_with_a_cache_that_compiles_once(tmp_path: Path) -> None:
    """bf16 timing, float32 checks: the tokens equal, the cache equals the uncached pass, one compilation."""
    proc = harness("run", "--suite", "gpt", "--frameworks", "flax,pytorch", "--smoke", "--param", "mode=generate",
                   "--precision", "bf16", "--backend", "local", "--results-dir", str(tmp_path))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    checks = passed_checks(run)
    assert set(checks) == {"generated_tokens", "generate_logits", "kv_cache_error"}
    assert all(all(by_fw.values()) and len(by_fw) == 2 for by_fw in checks.values()), checks
    for fw in ("flax", "pytorch"):
        doc = load_result(run / f"{fw}.json")
        block = doc["inference"]  # type: ignore[typeddict-item]
        decode = metric(doc, block["latency"]["metric"])
        assert decode["steady_compilations"] == 0, fw  # a static cache: the decode step compiled once, if at all
        assert decode["dtype"] == "bfloat16" and decode["bytes"] > 0
        assert metric(doc, block["generate"]["prefill"])["kind"] == "time"
        assert next(c for c in doc["checks"] if c["name"] == "kv_cache_error")["value"] < 1e-5
    assert "Inference: generation (greedy, KV cache)" in proc.stdout


@pytest.mark.slow
def test_torch_compile_decodes_with_one_compilation_per_shape(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "gpt", "--frameworks", "pytorch", "--smoke", "--param", "mode=generate",
                   "--param", "variant=compiled", "--param", "requests=12", "--backend", "local",
                   "--results-dir", str(tmp_path))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    doc = load_result(run_folder(proc.stdout) / "pytorch.json")
    for name in ("time to first token", "decode step"):
        timed = metric(doc, name)
        assert timed["steady_compilations"] == 0 and timed["first_call"] > 0, name
    assert any("torch.compile" in note for note in doc["notes"])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--suite", "gpt", "--param", "mode=generate", "--param", "prompt_len=100"], "prompt_len=100 + new_tokens=64"),
        (["--suite", "resnet18", "--param", "mode=infer", "--param", "devices=2"], "mode=infer runs on one device"),
        (["--suite", "resnet18", "--param", "variant=compiled"], "variant=compiled is for mode=infer"),
        (["--suite", "resnet18", "--param", "mode=generate"], "mode"),
        (["--suite", "gpt", "--param", "mode=infer", "--param", "requests=100000"], "requests"),
    ],
)
def test_a_mode_that_cannot_run_is_refused_in_one_line(args: list[str], words: str, tmp_path: Path) -> None:
    proc = harness("run", *args, "--frameworks", "pytorch", "--backend", "local", "--results-dir", str(tmp_path))
    assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not list(tmp_path.iterdir())


# One request in fifty made 20 ms slower, in the candidate's copy of the inference loop: well above a
# scheduler's slice (a CI machine's pre-emptions reach a few ms), so the plant, not the machine, is the tail.
SLOW_ONE_IN_FIFTY = (
    "        model.request(1),\n        repeat=requests,",
    "        _one_in_fifty_slow(model.request(1)),\n        repeat=requests,",
)
SLOW_CALL = """

def _one_in_fifty_slow(call: Callable[[], Any]) -> Callable[[], Any]:
    import time

    count = [0]

    def request() -> Any:
        count[0] += 1
        if count[0] % 50 == 0:
            time.sleep(0.02)
        return call()

    return request
"""


@pytest.mark.slow
def test_ab_finds_a_slower_p99_while_the_median_is_unchanged(tmp_path: Path) -> None:
    """`harness ab` of this checkout against a copy whose inference loop slows one request in fifty by 20 ms:
    the p99 row is a significant slowdown, the median's is not (one p99 per process, 6 rounds a side). On a
    busy machine the rounds whose tail a pre-emption reached are left out (guards/contention.py): then it is
    measured, said so, and no verdict is given."""
    import shutil

    from harness.judge.compare import compare_runs
    from harness.store.run_folder import REPO

    candidate = tmp_path / "candidate"
    shutil.copytree(REPO / "suites", candidate / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    loop = candidate / "suites" / "runtime" / "inference.py"
    text = loop.read_text()
    assert SLOW_ONE_IN_FIFTY[0] in text, "the planted line moved: update SLOW_ONE_IN_FIFTY"
    loop.write_text(text.replace(*SLOW_ONE_IN_FIFTY) + SLOW_CALL)
    shape = ["-p", "n_layer=2", "-p", "n_head=2", "-p", "n_embd=32", "-p", "block_size=32"]
    proc = harness("ab", str(REPO), str(candidate), "--suite", "gpt", "-f", "pytorch", *shape, "-p", "mode=infer",
                   "-p", "requests=100", "-p", "max_batch=1", "--rounds", "6", "--backend", "local",
                   "--results-dir", str(tmp_path / "results"), timeout=1200)  # fmt: skip
    runs = {line.split(" ", 1)[0]: Path(line.split(": ", 1)[1]) for line in proc.stdout.splitlines()
            if line.startswith(("baseline run: ", "candidate run: "))}  # fmt: skip
    assert set(runs) == {"baseline", "candidate"}, proc.stdout + proc.stderr
    judged = [assess(load_run(runs[side])) for side in ("baseline", "candidate")]
    rows = {c.metric: c for c in compare_runs(*judged).changes if c.framework == "pytorch"}
    p99, median = rows["latency p99 (batch 1)"], rows["latency (batch 1)"]
    if p99.disturbed or median.disturbed:  # a busy machine: measured, said so, and no verdict given
        assert proc.returncode == 3 and not p99.significant, proc.stdout
        return
    if p99.no_verdict is not None and any(p99.left_out):  # too few undisturbed tails left for a verdict
        assert not p99.significant and "no verdict" in proc.stdout, proc.stdout
        return
    print(proc.stdout)
    assert p99.significant and p99.slowdown > 0.5, (p99, proc.stdout)
    assert not median.significant or abs(median.slowdown) < 0.05, (median, proc.stdout)
