"""benchmarks/gpt_reference.py: both reference loops train the suite's model at a tiny size."""

from __future__ import annotations

import math

import pytest

from benchmarks.gpt_reference import Shape, run_reference, steady, suite_param_count

pytestmark = pytest.mark.slow  # each reference runs real torch / jax in its own process

TINY = Shape(n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=2, steps=3, intervals=2)


def test_the_tiny_shape_has_the_suites_parameter_count() -> None:
    # wte 256x16 + wpe 16x16 + one block (2 LayerNorms, qkv, proj, fc, proj) + ln_f
    block = 2 * 2 * 16 + (16 * 48 + 48) + (16 * 16 + 16) + (16 * 64 + 64) + (64 * 16 + 16)
    assert suite_param_count(TINY) == 256 * 16 + 16 * 16 + block + 2 * 16


@pytest.mark.parametrize("framework", ["pytorch", "flax"])
def test_reference_loop_trains_the_suites_model(framework: str) -> None:
    out = run_reference(framework, TINY)
    # The same architecture: the same parameter count as the suite's model (tied output counted once).
    assert out["params"] == suite_param_count(TINY)
    times = out["times"]
    assert len(times) == TINY.intervals
    rate = TINY.tokens_per_interval / steady(times)
    assert math.isfinite(rate) and rate > 0
