"""Times `fwh_plant.work()`: the package's version is what differs between bisect jobs; standard library only."""

from __future__ import annotations

import time
from collections.abc import Callable

from suites.contract.errors import Skip
from suites.runtime.context import Context


def _stand_in() -> float:
    deadline = time.perf_counter() + 0.001
    while time.perf_counter() < deadline:
        pass
    return deadline


def run(ctx: Context) -> None:
    work: Callable[[], object]
    try:
        import fwh_plant  # type: ignore[import-not-found]
    except ImportError:
        if not ctx.params["stand_in"]:
            raise Skip("fwh_plant is not installed here (the bisect tests build it; --param stand_in=true)") from None
        work = _stand_in
    else:
        work = fwh_plant.work
    ctx.measure("work", work, description="fwh_plant.work(): whatever the installed version does")
