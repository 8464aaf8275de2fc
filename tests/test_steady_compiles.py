"""The compile counters behind the `compiled` mark (a retrace inside a steady sample's clock), on the
real frameworks: they must move when the framework compiles and stay put when it reuses a program."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

from tests.conftest import REPO


def test_jax_counts_a_new_static_argument_and_not_a_cached_call() -> None:
    import jax
    import jax.numpy as jnp

    from suites.runtime import adapter_jax

    count = adapter_jax.compile_counter()
    assert count() == 0  # its canary is not counted

    def scaled(x: Any, k: int) -> Any:
        return x * k

    step = jax.jit(scaled, static_argnums=1)
    x = jnp.ones(4)
    jax.block_until_ready(step(x, 2))
    once = count()
    assert once is not None and once >= 1
    jax.block_until_ready(step(x, 2))
    assert count() == once  # the same program again: no compile
    jax.block_until_ready(step(x, 3))
    assert count() == once + 1  # a new static value: a new program


def test_pytorch_counts_torchdynamo_graphs_once_it_is_in_use() -> None:
    import torch

    from suites.runtime import adapter_pytorch

    count = adapter_pytorch.compile_counter()

    def double(x: Any) -> Any:
        return x * 2

    fresh = types.FunctionType(double.__code__.replace(), double.__globals__, "fresh")  # no cache entry yet
    compiled = torch.compile(fresh, backend="eager", dynamic=False)
    compiled(torch.ones(3))
    before = count()
    assert before is not None
    compiled(torch.ones(3))
    assert count() == before
    compiled(torch.ones(5))  # dynamic=False: a new shape is a new graph
    after = count()
    assert after is not None and after > before


def test_eager_pytorch_never_imports_torchdynamo_and_counts_zero() -> None:
    """Eager code pays for no TorchDynamo import: the counter answers 0 without one."""
    code = (
        "import sys, torch\n"
        "from suites.runtime import adapter_pytorch\n"
        "count = adapter_pytorch.compile_counter()\n"
        "a = torch.ones(8, 8); b = a @ a\n"
        "print(count(), 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["0", "False"], out.stdout + out.stderr
