"""jax.profiler as a harness `Profiler` (runtime/profiling.py).

The session is `jax.profiler.trace` with the Perfetto trace written (create_perfetto_trace: a
gzipped Chrome trace-event file; nothing is uploaded) and the Python tracer off: it would record
every Python call of the step, a cost the timed samples never paid, in events no rule reads. Each
step is a `StepTraceAnnotation`, the annotation TensorBoard's step view reads too.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

PERFETTO = "perfetto_trace.json.gz"


class Profiler:
    def __init__(self) -> None:
        import jax

        self.name = f"jax.profiler {jax.__version__}"

    @contextlib.contextmanager
    def session(self, scratch: Path) -> Iterator[None]:
        import jax

        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        with jax.profiler.trace(str(scratch), create_perfetto_trace=True, profiler_options=options):
            yield

    def step(self, index: int) -> contextlib.AbstractContextManager[None]:
        import jax

        from suites.runtime.profiling import STEP

        return jax.profiler.StepTraceAnnotation(STEP, step_num=index)  # type: ignore[no-any-return]

    def export(self, scratch: Path, dest: Path) -> None:
        found = sorted(scratch.glob(f"plugins/profile/*/{PERFETTO}"))
        if not found:
            raise RuntimeError(f"jax.profiler wrote no {PERFETTO} under {scratch}")
        shutil.move(str(found[-1]), str(dest))
