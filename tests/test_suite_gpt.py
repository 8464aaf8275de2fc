"""The gpt suite: its shared definitions (fast), and both frameworks through the real CLI (slow)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.schema import load_result
from harness.judge.assessment import assess
from harness.store.run_folder import load_run
from suites.contract import datasets
from suites.contract.errors import JobError
from suites.contract.registry import all_suites
from suites.contract.spec import SpecError
from suites.gpt import common
from suites.gpt.spec import PRESET_SHAPES
from tests.conftest import finished, harness, read, run_folder

SPEC = all_suites()["gpt"]
SMALL = common.Config(
    n_layer=2, n_head=2, n_embd=32, block_size=32, batch=4, dropout=0.0, intervals=3, steps=4, lr=1e-3, warmup=2,
    min_lr_ratio=0.1, weight_decay=0.1, grad_clip=1.0, eval_windows=4, attention="fused", variant="default", seed=7,
)  # fmt: skip
GPT2_SMALL = dataclasses.replace(SMALL, **PRESET_SHAPES["gpt2-small"])


class FakeCtx:
    """What common.config reads: the suite's spec and one job's parameters."""

    def __init__(self, **params: Any) -> None:
        self.spec = SPEC
        self.params = SPEC.resolve(params)  # as the job runtime does (suites/contract/job_spec.py)


def test_gpt2_small_preset_is_gpt2_small_with_a_byte_vocabulary() -> None:
    # GPT-2 small has 124 439 808 parameters with its 50 257-token vocabulary; bytes need 256 rows.
    assert common.param_count(GPT2_SMALL) == 86_039_040
    assert common.param_count(GPT2_SMALL) + (50_257 - common.VOCAB) * 768 == 124_439_808
    cfg = common.config(FakeCtx(preset="gpt2-small"))  # type: ignore[arg-type]
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size) == (12, 12, 768, 1024)


def test_model_flops_are_palms_6n_plus_attention() -> None:
    cfg = GPT2_SMALL
    n = common.param_count(cfg) - cfg.block_size * cfg.n_embd  # position embeddings are a lookup
    assert common.flops_per_token(cfg) == 6 * n + 12 * 12 * 1024 * 768
    # About 0.62 GFLOP per token: 6 x 85.3 M weights in matmuls + 113 M for attention over 1024 positions.
    assert 6.2e8 < common.flops_per_token(cfg) < 6.3e8


def test_a_preset_refuses_shape_parameters_that_it_would_overrule() -> None:
    with pytest.raises(SpecError, match="preset=gpt2-small sets n_layer, block_size: leave them out"):
        SPEC.resolve({"preset": "gpt2-small", "n_layer": 2, "block_size": 64})
    with pytest.raises(SpecError, match="n_embd=30 is not a multiple of n_head=4"):
        SPEC.resolve({"n_embd": 30})
    assert SPEC.resolve({"preset": "gpt2-small"})["preset"] == "gpt2-small"


def test_the_resolved_parameters_carry_the_presets_shape() -> None:
    """The plan, the result and the report's header show what ran: an H200 session printed
    `preset=gpt2-small, n_layer=4, n_embd=128, block_size=128` for an 86 M-parameter model."""
    values = SPEC.resolve({"preset": "gpt2-small"})
    assert {k: values[k] for k in ("n_layer", "n_head", "n_embd", "block_size")} == PRESET_SHAPES["gpt2-small"]
    assert SPEC.resolve(dict(values)) == values  # a stored plan or result re-resolves to itself
    with pytest.raises(SpecError, match="sets n_layer"):  # neither the default nor the preset's
        SPEC.resolve({**values, "n_layer": 6})
    assert SPEC.resolve({})["n_layer"] == 4


def test_a_bad_shape_is_one_line_and_exit_2_before_any_job(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "gpt", "--param", "n_embd=100", "--param", "n_head=3",
                   "--results-dir", str(tmp_path))  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        == "error: suite gpt: n_embd=100 is not a multiple of n_head=3: pick a head count that divides the width"
    )
    assert not any(tmp_path.iterdir())  # no run folder: refused before anything was written


def test_schedule_warms_up_then_follows_a_cosine_to_its_floor() -> None:
    cfg = dataclasses.replace(SMALL, intervals=10, steps=10, warmup=10)
    lrs = common.schedule(cfg)
    assert lrs[0] == pytest.approx(cfg.lr / 11) and lrs[0] > 0  # a zero first step would prove nothing
    assert lrs[9] == pytest.approx(cfg.lr * 10 / 11)
    assert lrs[10] == pytest.approx(cfg.lr)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    assert lrs[-1] == pytest.approx(
        cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * 89 / 90)))
    )
    assert common.lr_at(10_000, cfg) == pytest.approx(cfg.lr * cfg.min_lr_ratio)


def test_weight_decay_groups_are_the_matrices() -> None:
    # impl_flax.py's optax mask decays every tensor with 2+ dimensions; pytorch's groups use the names.
    for name, shape in common.shapes(SMALL).items():
        assert common.decayed(name) == (len(shape) >= 2), name


def test_initial_weights_are_seeded_and_gpt2_shaped() -> None:
    a, b = common.initial_weights(SMALL), common.initial_weights(SMALL)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["wte"], common.initial_weights(dataclasses.replace(SMALL, seed=8))["wte"])
    assert a["wte"].std() == pytest.approx(0.02, rel=0.1)
    assert a["h0.attn.proj.kernel"].std() == pytest.approx(0.02 / math.sqrt(2 * SMALL.n_layer), rel=0.15)
    assert not a["h0.ln1.bias"].any() and (a["h0.ln1.scale"] == 1).all()


def test_windows_stay_inside_their_split() -> None:
    offsets = common.offsets(SMALL, 1000)
    assert offsets.shape == (SMALL.intervals, SMALL.steps, SMALL.batch)
    assert offsets.min() >= 0 and offsets.max() + SMALL.block_size + 1 <= 1000
    val = common.val_offsets(dataclasses.replace(SMALL, eval_windows=1000), 200)
    assert list(val) == [0, 32, 64, 96, 128, 160] and val[-1] + SMALL.block_size + 1 <= 200


def test_the_bundled_corpus_is_tiny_shakespeare_split_as_the_fetched_one() -> None:
    text = common.bundled_corpus()
    assert len(text) == 1_115_394 and text.startswith(b"First Citizen:")
    train, val = datasets.text_split(text)
    assert len(train) == 1_003_854 and train + val == text


def test_a_damaged_bundled_corpus_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lzma

    bad = tmp_path / "corpus.xz"
    bad.write_bytes(lzma.compress(b"Not Shakespeare at all."))
    monkeypatch.setattr(common, "CORPUS", bad)
    with pytest.raises(JobError, match="does not hold tiny Shakespeare"):
        common.bundled_corpus()


# ---------------------------------------------------------------------------------------------
# Both frameworks, for real.


def metric(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in doc["metrics"] if m["name"] == name)


def check(doc: dict[str, Any], name: str) -> Any:
    return next(c for c in doc["checks"] if c["name"] == name)["value"]


SMOKE = [f"{k}={v}" for k, v in SPEC.smoke.items()]


@pytest.mark.slow
def test_gpt_trains_the_same_model_in_flax_and_pytorch(
    smoke_run: Callable[[str], subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    proc = smoke_run("gpt")  # the conformance test's run (tests/conftest.py); exit 0: every check passed
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    docs = {fw: load_result(run / f"{fw}.json") for fw in ("flax", "pytorch")}  # schema-valid
    for fw, doc in docs.items():
        assert doc["status"] == "ok", doc.get("reason")
        step = metric(doc, "train step")
        cfg = common.config(FakeCtx(**doc["params"]))  # type: ignore[arg-type]
        assert step["first_call"] > 0 and step["flops"] == common.flops_per_token(cfg) * cfg.tokens_per_step
        assert step["dtype"] == "float32"
        assert metric(doc, "tokens/s")["samples"][0] > 0
        val = metric(doc, "validation loss")["samples"][0]
        assert val < math.log(256)  # below the uniform guess over bytes: it learned something in 6 steps
        assert metric(doc, "bits per byte")["samples"][0] == pytest.approx(val / math.log(2))
        assert check(doc, "param_count") == common.param_count(cfg)
        curve = doc["training"]["curves"][0]
        assert len(curve["val_loss"]) == len(curve["epoch_seconds"]) == 2 and "test_accuracy" not in curve
        assert doc["training"]["attention"].startswith("fused: ")
        assert doc["training"]["data"] == "device" and doc["dataset"]["name"] == "shakespeare"
        log = (run / "logs" / f"{fw}.stdout.log").read_text()
        assert "interval 1/2: loss" in log and "validation loss" in log
    flax, torch = docs["flax"], docs["pytorch"]
    assert flax["dataset"]["used_fingerprint"] == torch["dataset"]["used_fingerprint"]
    np.testing.assert_allclose(check(flax, "loss_curve"), check(torch, "loss_curve"), rtol=1e-4)
    # MFU is the train step's share of peak: the lint refuses a model-FLOP rate above the device's.
    judged = assess(load_run(run))
    honest = judged.finding("pytorch", "train step", "flops")
    assert honest is not None and honest.plausible and honest.peak
    planted = tmp_path / "planted"
    shutil.copytree(run, planted)
    doc = read(planted / "pytorch.json")
    rate = metric(doc, "train step")["stats"]["median"]
    metric(doc, "train step")["flops"] = 2 * honest.peak * rate  # twice the peak in the same step time
    (planted / "pytorch.json").write_text(json.dumps(doc))
    assert ("pytorch", "train step") in assess(load_run(planted)).implausible


@pytest.mark.slow
def test_written_out_attention_torch_compile_bf16_and_a_target_loss(results: Path) -> None:
    params = [x for kv in SMOKE for x in ("--param", kv)]
    proc = harness("run", "--suite", "gpt", "--frameworks", "flax,pytorch", "--backend", "local", *params,
                   "--param", "attention=manual", "--param", "variant=compiled", "--param", "target_loss=5.45",
                   "--precision", "bf16", "--results-dir", str(results))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    for fw in ("flax", "pytorch"):
        doc = read(run / f"{fw}.json")
        assert doc["status"] == "ok", doc.get("reason")
        assert doc["training"]["attention"].startswith("manual: ")
        assert metric(doc, "train step")["dtype"] == "bfloat16"
        target = doc["training"]["target"]
        assert target["loss"] == 5.45 and target["status"] in ("reached", "not reached")
        reached = [m for m in doc["metrics"] if m["name"] == "time to target"]
        assert bool(reached) == (target["status"] == "reached")
    assert metric(read(run / "pytorch.json"), "train step")["variant"] == "compiled"
    assert "FAIL" not in proc.stdout  # the checks run in float32 whatever the precision


@pytest.mark.slow
def test_the_gpt2_small_preset_builds_the_same_model_in_both_frameworks() -> None:
    """The GPU preset at full width and depth on the CPU, over an 8-byte sequence: the same count and
    the same logits from the shared weights (the GPU run is the same code on another device)."""
    import jax.numpy as jnp
    import torch
    from flax import nnx

    from suites.gpt import models_flax, models_torch

    weights = common.initial_weights(GPT2_SMALL)
    tm = models_torch.GPT(GPT2_SMALL)
    models_torch.load(tm, weights)
    fm = models_flax.GPT(GPT2_SMALL, nnx.Rngs(0))
    models_flax.load(fm, weights)
    assert sum(p.numel() for p in tm.parameters()) == common.param_count(GPT2_SMALL)
    idx = np.frombuffer(b"To be, o", np.uint8).astype(np.int64)[None]
    with torch.no_grad():
        expected = tm.eval()(torch.from_numpy(idx)).numpy()
    got = np.asarray(fm(jnp.asarray(idx, jnp.int32)))
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=2e-4)


class DeviceCtx:
    """The two fields the attention-kernel probes read, claiming a GPU (the probe's GPU branch runs
    on CPU tensors here: what it can prove without a GPU is that the calls exist and answer)."""

    def __init__(self, device: Any) -> None:
        self.device_kind, self.device, self.precision = "gpu", device, "bf16"


@pytest.mark.slow
def test_the_gpu_branches_of_the_attention_kernel_record_run_without_a_gpu() -> None:
    import jax
    import jax.numpy as jnp
    import torch

    from suites.gpt import impl_flax, impl_pytorch

    cfg = dataclasses.replace(SMALL, n_head=2, n_embd=32)
    said = impl_pytorch._attention_kernel(DeviceCtx(torch.device("cpu")), cfg)  # type: ignore[arg-type]
    # SDPAParams and the can_use_* predicates answered (no CUDA: no flash or memory-efficient kernel).
    assert said == "fused: torch scaled_dot_product_attention, math fallback", said

    def attend(q: Any) -> Any:
        return jax.nn.dot_product_attention(q, q, q, is_causal=True)

    q = jnp.zeros((1, 8, 2, 16), jnp.float32)
    said = impl_flax._attention_kernel(DeviceCtx(None), cfg, jax.jit(attend), (q,))  # type: ignore[arg-type]
    assert said == "fused: jax.nn.dot_product_attention, XLA's composition", said
    manual = dataclasses.replace(cfg, attention="manual")
    assert impl_flax._attention_kernel(DeviceCtx(None), manual, None, ()).startswith("manual: ")  # type: ignore[arg-type]
