"""A data-parallel rank meets the others through its framework's own rendezvous, before any backend
starts (jax.distributed must come first): the stack's lane module does it (dp_jax.py, dp_torch.py)."""

from __future__ import annotations

from suites.contract.errors import JobError
from suites.contract.ranks import Ranks


def join(stack: str, ranks: Ranks, device_kind: str, timeout_s: float) -> None:
    """Meet the other ranks through the framework's own rendezvous (jax.distributed, torch's store)."""
    if stack == "jax":
        from suites.runtime import dp_jax

        dp_jax.initialise(ranks, device_kind, timeout_s)
    elif stack == "pytorch":
        from suites.runtime import dp_torch

        dp_torch.initialise(ranks, device_kind, timeout_s)
    else:
        raise JobError(f"the {stack} stack has no data-parallel loop")
