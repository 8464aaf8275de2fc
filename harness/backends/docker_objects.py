"""The docker backend's objects a single job and a data-parallel job's ranks both use: the GPU request,
the owner labels every container, volume and network carries, the engine's errors in one line, and
the context-managed job container that is always removed (testcontainers' habit)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from threading import Thread
from typing import IO, Any

from harness.backends import job_folder
from harness.backends.job_folder import Tail, pump
from harness.backends.reaper import Reaper
from harness.core import owner
from harness.core.errors import HarnessError
from harness.store.images import LABEL
from harness.store.plan import Job
from harness.store.run_folder import round_of
from harness.text.escape import plain

NVIDIA_HINT = "GPU jobs need the NVIDIA driver and the NVIDIA Container Toolkit on the Docker host"

# On cgroup v2 the engine learns of an OOM kill from an inotify watch on memory.events, which can land
# after the exit it caused: a container that died of SIGKILL (137) is read again for this long before
# its OOMKilled flag is believed false (moby and nomad both saw the flag lag the exit).
OOM_SETTLE_S = 3.0
SIGKILL_EXIT = 128 + 9


@dataclass(frozen=True)
class GpuRequest:
    """`--gpus all`, `--gpus 2` or `--gpus device=0,2`, as `docker run --gpus` reads them."""

    count: int = -1  # -1: all GPUs
    device_ids: tuple[str, ...] = ()

    @staticmethod
    def parse(text: str) -> GpuRequest:
        if (value := text.strip()) == "all":
            return GpuRequest()
        if re.fullmatch(r"[1-9]\d*", value):
            return GpuRequest(count=int(value))
        if match := re.fullmatch(r"device=([\w-]+(?:,[\w-]+)*)", value):
            return GpuRequest(count=0, device_ids=tuple(match.group(1).split(",")))
        raise HarnessError(f"--gpus {text!r} is not understood; use all, a count (e.g. 2) or device=0,1")

    def device_request(self) -> Any:
        from docker.types import DeviceRequest

        if self.device_ids:
            return DeviceRequest(driver="nvidia", device_ids=list(self.device_ids), capabilities=[["gpu"]])
        return DeviceRequest(driver="nvidia", count=self.count, capabilities=[["gpu"]])


@dataclass(frozen=True)
class Owner:
    """The run a job's containers and volumes are named and labelled after, so `harness clean --run ID`
    finds them: a round of a rounds run (run id `round-K` in RUN/rounds/) is RUN's, its round a label
    of its own."""

    run_id: str
    round: int | None = None

    @staticmethod
    def of(run_id: str, run_dir: Path) -> Owner:
        found = round_of(run_dir, run_id)
        return Owner(run_id) if found is None else Owner(*found)

    @property
    def name(self) -> str:
        return self.run_id if self.round is None else f"{self.run_id}-round-{self.round}"

    def labels(self, job: Job) -> dict[str, str]:
        labels = {
            f"{LABEL}.run-id": self.run_id,
            f"{LABEL}.suite": job.suite,
            f"{LABEL}.framework": job.framework,
            f"{LABEL}.{owner.LABEL_KEY}": owner.label(),
        }
        if self.round is not None:
            labels[f"{LABEL}.round"] = str(self.round)
        return labels


def engine_errors() -> tuple[type[BaseException], ...]:
    """What the Docker SDK raises when the engine refuses a request or stops answering."""
    import docker.errors
    import requests.exceptions

    return (docker.errors.DockerException, requests.exceptions.RequestException)


def engine_message(error: BaseException) -> str:
    """One line of an engine's error (its explanation, not the SDK's URL and status)."""
    explanation = getattr(error, "explanation", None)
    text = explanation if isinstance(explanation, (str, bytes)) and explanation else str(error)
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return plain(" ".join(text.split()))[:500]


def oom_killed(container: Any, settle_s: float = OOM_SETTLE_S) -> bool:
    """Whether the engine says this ended container was killed for memory, reloading it first; an exit by
    SIGKILL gives the engine's OOM event up to `settle_s` to arrive."""
    deadline = time.monotonic() + settle_s
    while True:
        container.reload()
        if (state := container.attrs.get("State") or {}).get("OOMKilled"):
            return True
        if state.get("ExitCode") != SIGKILL_EXIT or time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def start_problem(container: Any, job: Job) -> str | None:
    """Start the created container; why it did not start (with what a GPU job needs), or None."""
    import docker.errors

    try:
        container.start()
    except docker.errors.APIError as error:
        hint = f" ({NVIDIA_HINT})" if job.device == "gpu" else ""
        return f"container did not start: {error.explanation or error}{hint}"
    return None


def log_pumps(container: Any, logs: Path, names: tuple[str, str], echo: IO[str] | None, tail: Tail) -> list[Thread]:
    """Threads copying the container's stdout (echoed to `echo`) and stderr (its end kept in `tail`)
    into new logs of these names, as the engine streams them."""
    return [
        pump(
            container.logs(stdout=stdout, stderr=not stdout, stream=True, follow=True),
            job_folder.open_log(logs, name),
            shown,
            kept,
        )
        for stdout, name, shown, kept in ((True, names[0], echo, None), (False, names[1], None, tail))
    ]


class JobContainer:
    """A created container that is always removed on the way out, whatever happened inside.

    The reaper hears of it before it exists, so it is removed even if this process is SIGKILLed.
    """

    def __init__(self, client: Any, create_kwargs: dict[str, Any], reaper: Reaper) -> None:
        self.client = client
        self.create_kwargs = create_kwargs
        self.reaper = reaper
        self.container: Any = None

    def __enter__(self) -> JobContainer:
        self.reaper.track("container", self.create_kwargs["name"])
        try:
            self.container = self.client.containers.create(**self.create_kwargs)
        except BaseException:
            self.reaper.untrack("container", self.create_kwargs["name"])  # nothing was made to remove
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        import docker.errors

        if self.container is None:
            return
        try:
            self.container.remove(force=True)  # kills it first if still running (timeout, Ctrl-C)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as error:
            if "already in progress" not in str(error):
                raise
        self.reaper.untrack("container", self.create_kwargs["name"])
