"""An inference run judged on the host (harness/judge/inference.py): the figures come from the names the
result's block gives, a guard's exclusion reaches the percentiles and rates derived from a latency, and
a decode step faster than reading its weights allows is implausible (the bandwidth lint)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from harness.judge.assessment import assess
from harness.store.run_folder import load_run
from suites.contract.inference import percentile

DATA = Path(__file__).parent / "data" / "inference"


def edited(tmp_path: Path, case: str, framework: str, edit: Any) -> Path:
    run = tmp_path / case
    shutil.copytree(DATA / case, run)
    path = run / f"{framework}.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return run


def test_the_figures_are_the_named_metrics_read_back() -> None:
    judged = assess(load_run(DATA / "gpt-generate"))
    assert judged.inference is not None
    figures = {f.framework: f for f in judged.inference.figures}
    doc = json.loads((DATA / "gpt-generate" / "pytorch.json").read_text())
    decode = next(m for m in doc["metrics"] if m["name"] == "decode step")
    tails = {t.label: t for t in figures["pytorch"].tails}
    assert tails["p90"].seconds == percentile(decode["samples"], 0.9)
    assert tails["max"].seconds == max(decode["samples"])
    g = figures["pytorch"].generation
    assert g is not None and (g.batch, g.prompt_len, g.new_tokens) == (1, 8, 8)
    rate = next(m for m in doc["metrics"] if m["name"] == "decode tokens/s")
    assert g.tokens_per_s == rate["stats"]["median"]
    assert figures["pytorch"].sweep == () and figures["pytorch"].saturation is None


def test_a_decode_step_faster_than_its_weights_can_be_read_is_implausible_and_so_is_its_rate(tmp_path: Path) -> None:
    """The clock stopped before the work (the classic missing sync): a million times faster than measured."""

    def unsynchronised(doc: Any) -> None:
        decode = next(m for m in doc["metrics"] if m["name"] == "decode step")
        decode["samples"] = [s * 1e-6 for s in decode["samples"]]
        decode["stats"] = {k: (v * 1e-6 if k not in ("n",) else v) for k, v in decode["stats"].items()}

    judged = assess(load_run(edited(tmp_path, "gpt-generate", "flax", unsynchronised)))
    why = judged.excluded("flax", "decode step")
    assert why is not None and why.startswith("implausible")
    # The bytes it declares (every weight, read once a token) held to the memory system's ceiling too.
    read = next(f for f in judged.findings if (f.framework, f.metric, f.quantity) == ("flax", "decode step", "bytes"))
    assert read.peak is not None and read.achieved > read.peak
    for derived in ("decode tokens/s", "decode step p99"):
        assert judged.excluded("flax", derived) == why
    assert judged.excluded("pytorch", "decode step") is None
    assert judged.inference is not None
    flax = next(f for f in judged.inference.figures if f.framework == "flax")
    assert flax.latency_excluded == why


def test_a_run_without_inference_jobs_has_no_inference_judgement() -> None:
    assert assess(load_run(Path(__file__).parent / "data" / "parallel" / "good")).inference is None
