"""PyTorch: eager against torch.compile (Inductor; on CPU it compiles C++ with the system compiler)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from suites.contract.errors import JobError
from suites.jit.common import (
    LOOP_NOTE,
    FirstCallThenLoops,
    check_points,
    describe_loop,
    inputs,
    lengths,
    loop_bytes,
    loop_flops,
    name,
    record_speedup,
    seed_error,
    seed_points,
)
from suites.runtime import perturb
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import torch

    # Inductor compiles C++ kernels on a CPU; on a GPU Triton still builds a small C launcher.
    needed = ("g++", "c++") if ctx.device_kind == "cpu" else ("gcc", "cc", "g++", "c++")
    if not (os.environ.get("CXX") or any(shutil.which(c) for c in needed)):
        raise JobError(
            f"torch.compile on {ctx.device_kind} needs a compiler ({' or '.join(needed)}) on PATH; install one"
        )

    def f(x: Any) -> Any:
        return 0.2 * x + torch.sin(x) + torch.cos(2 * x)

    # dynamic=True: one compiled kernel for every length (the default would compile a static
    # kernel for the first length, then recompile once with dynamic shapes). JAX instead
    # compiles once per shape; the per-length "compile" rows show the difference.
    f_jit = torch.compile(f, dynamic=True)

    def loop(fn: Any, x: Any, loops: int) -> Any:
        # On CPU every call returns finished work. On a GPU the kernels of all calls queue on
        # one stream in order, so the contract's torch.cuda.synchronize() after the loop
        # waits for all of them, not just the last.
        for _ in range(loops):
            y = fn(x)
        return y

    ctx.note(LOOP_NOTE)
    with torch.no_grad():
        for index, (length, loops) in enumerate(lengths(ctx.params)):
            x = torch.from_numpy(inputs(length)).to(ctx.device)
            ctx.progress(
                f"L={length}, K={loops}" + ("; torch.compile first (about 20 s on a CPU)" if index == 0 else "")
            )
            for variant, fn in (("eager", f), ("jit", f_jit)):
                ctx.measure(
                    name(variant, length, loops),
                    FirstCallThenLoops(lambda fn=fn, x=x: fn(x), lambda fn=fn, x=x, loops=loops: loop(fn, x, loops)),
                    description=describe_loop(f"pytorch {variant}", length, loops),
                    dtype="float32",
                    bytes_moved=loop_bytes(length, loops),
                    flops=loop_flops(length, loops),
                )
            record_speedup(ctx, length, loops)

        x = torch.from_numpy(inputs(lengths(ctx.params)[0][0])).to(ctx.device)
        points = torch.from_numpy(check_points()).to(ctx.device)
        perturb.check(ctx, "f_at_6", [float(v) for v in f_jit(points).cpu()])
        perturb.check(ctx, "jit_vs_eager", float((f_jit(x) - f(x)).abs().max()))
        perturb.check(ctx, "seed_f16_error", seed_error(f(torch.from_numpy(seed_points()).to(ctx.device)).cpu()))
    ctx.note("torch.compile(dynamic=True): compiled once, at the first length; later lengths reuse it")
