from __future__ import annotations

from suites.mistakes.common import Ops
from suites.mistakes.common import run as run_mistake
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import numpy as np

    run_mistake(
        ctx, Ops(put=np.asarray, matmul=np.matmul, to_numpy=np.asarray, as_float32=lambda x: x.astype(np.float32))
    )
