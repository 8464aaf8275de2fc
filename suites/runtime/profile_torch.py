"""torch.profiler as a harness `Profiler` (runtime/profiling.py).

CPU activity always, CUDA activity on a GPU (kernels and copies on the device's streams); no
stacks, shapes or memory: each adds a cost per operation the timed samples never paid. Each step
is a `record_function` named STEP; the trace is `export_chrome_trace`'s, gzipped.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Profiler:
    def __init__(self, device_kind: str) -> None:
        import torch

        self.name = f"torch.profiler {torch.__version__}"
        self.device_kind = device_kind
        self._profile: Any = None

    @contextlib.contextmanager
    def session(self, scratch: Path) -> Iterator[None]:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.device_kind == "gpu":
            activities.append(ProfilerActivity.CUDA)
        with profile(activities=activities, record_shapes=False, with_stack=False, profile_memory=False) as prof:
            yield
        self._profile = prof

    def step(self, index: int) -> contextlib.AbstractContextManager[None]:
        from torch.profiler import record_function

        from suites.runtime.profiling import STEP

        return record_function(STEP)  # type: ignore[no-any-return]

    def export(self, scratch: Path, dest: Path) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        raw = scratch / "trace.json"
        self._profile.export_chrome_trace(str(raw))
        with raw.open("rb") as source, gzip.open(dest, "wb") as sink:
            shutil.copyfileobj(source, sink)
