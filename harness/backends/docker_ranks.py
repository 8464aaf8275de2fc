"""The docker backend's data-parallel jobs: N ranks as N containers of the job's image (contract:
suites/contract/ranks.py).

Each rank's container is the single job's (docker_backend.create_kwargs: image, command, user,
mounts, read-only root, dropped capabilities, limits, the one /results volume) with four changes:
its own name (`...-rank{r}`), its rank's environment, its own GPU, and in place of no network at all
a bridge network made for this job alone and `internal` (no route out of it), on which rank 0 is
reachable as `rank0`. Only the ranks are ever on it. The network carries the job's labels, and the
reaper hears of it before it exists, like every container and volume.

Every container and the network are removed on the way out, whatever happened (an ExitStack: the
containers first, then the network they were attached to).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.backends import docker_objects, job_folder
from harness.backends.base import JobOutcome
from harness.backends.docker_objects import OOM_SETTLE_S, GpuRequest, JobContainer, Owner, oom_killed
from harness.backends.job_folder import Tail
from harness.backends.ranks import Supervised, rank_log_names, supervise
from harness.backends.reaper import Reaper
from harness.core.errors import HarnessError
from harness.store.images import LABEL, Ensured
from harness.store.plan import Job
from suites.contract.ranks import COORDINATOR_PORT, FAULT_VAR, processes, rank_environment


class DockerBackend(Protocol):
    """What the ranks take from the docker backend that hands them the job (docker_backend.py, which
    imports this module late; a Protocol here keeps the import one way)."""

    echo: bool
    engine: Any
    gpus: GpuRequest | None
    reaper: Reaper

    def create_kwargs(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...
    def container_record(self, kwargs: dict[str, Any]) -> dict[str, Any]: ...
    def fetch(self, *args: Any, **kwargs: Any) -> Any: ...


RANK_LABEL = f"{LABEL}.rank"
COORDINATOR = f"rank0:{COORDINATOR_PORT}"  # rank 0's alias on the job's network
# One inspect per rank per poll: often enough that a failure starts the grace period promptly, rare
# enough that eight ranks do not keep the engine busy.
RANK_POLL_S = 0.1
NETWORK_REMOVE_TRIES = 6
# The engine's API version from which an endpoint may carry aliases; EndpointConfig only checks it.
_ALIASES_API = "1.22"


def rank_gpu(gpus: GpuRequest | None, rank: int, world: int) -> Any:
    """Rank `rank`'s device request: one GPU of its own.

    Chosen: with `--gpus all` or a count, rank r gets the engine's GPU r; with `--gpus device=a,b,...`
    it gets the r-th device named. So each container sees exactly one GPU, as its device 0 -- which
    is why a GPU rank is told local rank 0 (see `rank_kwargs`)."""
    if (request := gpus or GpuRequest()).device_ids:
        if len(request.device_ids) < world:
            raise HarnessError(
                f"devices={world} runs {world} ranks, one GPU each, but --gpus names {len(request.device_ids)}: "
                f"name {world} devices, or lower devices"
            )
        device = request.device_ids[rank]
    else:
        if 0 < request.count < world:
            raise HarnessError(
                f"devices={world} runs {world} ranks, one GPU each, but --gpus {request.count} gives "
                f"{request.count}: use --gpus {world} (or all), or lower devices"
            )
        device = str(rank)
    return GpuRequest(count=0, device_ids=(device,)).device_request()


def rank_kwargs(
    single: Mapping[str, Any],
    rank: int,
    world: int,
    network: str,
    *,
    gpu: bool,
    gpus: GpuRequest | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Rank `rank`'s container: the single job's `create_kwargs` with its own name, environment,
    GPU and the job's network (alias `rank{r}`) in place of none. Pure, so tests read it."""
    from docker.types import EndpointConfig

    env = os.environ if environ is None else environ
    kwargs = {key: value for key, value in single.items() if key != "network_mode"}
    kwargs["name"] = f"{single['name']}-rank{rank}"
    kwargs["labels"] = {**single["labels"], RANK_LABEL: str(rank)}
    kwargs["mounts"] = list(single["mounts"])  # the same mounts, the one /results volume among them
    kwargs["tmpfs"] = dict(single["tmpfs"])
    kwargs["network"] = network
    kwargs["networking_config"] = {network: EndpointConfig(_ALIASES_API, aliases=[f"rank{rank}"])}
    # A GPU rank sees only its own GPU (rank_gpu), as device 0: its local rank is 0. On CPU every
    # rank shares the host's CPUs, and its local rank is its rank.
    environment = {**single["environment"], **rank_environment(rank, world, COORDINATOR, local_rank=0 if gpu else rank)}
    if env.get(FAULT_VAR):
        environment[FAULT_VAR] = env[FAULT_VAR]  # a testing aid, forwarded as it is (the job refuses a bad one)
    kwargs["environment"] = environment
    if gpu:
        kwargs["device_requests"] = [rank_gpu(gpus, rank, world)]
    return kwargs


class JobNetwork:
    """The job's internal network, removed on the way out; the reaper hears of it before it exists."""

    def __init__(self, client: Any, name: str, labels: Mapping[str, str], reaper: Reaper) -> None:
        self.client, self.name, self.labels, self.reaper = client, name, dict(labels), reaper
        self.network: Any = None

    def __enter__(self) -> JobNetwork:
        self.reaper.track("network", self.name)
        try:
            self.network = self.client.networks.create(self.name, driver="bridge", internal=True, labels=self.labels)
        except BaseException:
            self.reaper.untrack("network", self.name)  # nothing was made to remove
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        import docker.errors

        if self.network is None:
            return
        # Its containers are gone by now (the network is entered before them and left after), but
        # a removal the engine had already in progress may still hold an endpoint for a moment.
        for attempt in range(NETWORK_REMOVE_TRIES):
            try:
                self.network.remove()
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as error:
                if "active endpoints" not in str(error) or attempt == NETWORK_REMOVE_TRIES - 1:
                    raise
                time.sleep(0.5)
                continue
            break
        self.reaper.untrack("network", self.name)


def exit_poll(container: Any) -> Callable[[], int | None]:
    """The container's exit code once it has stopped, None while it runs."""

    def poll() -> int | None:
        container.reload()
        if (state := container.attrs.get("State") or {}).get("Status") not in ("exited", "dead"):
            return None
        code = state.get("ExitCode")
        return code if isinstance(code, int) and not isinstance(code, bool) else -1

    return poll


_FINISHED = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z")


def finished_at(container: Any) -> tuple[str, int] | None:
    """When the engine saw the container end (UTC, to the nanosecond), comparable; None if not told."""
    state = container.attrs.get("State") or {}
    text = state.get("FinishedAt")
    match = _FINISHED.fullmatch(text) if isinstance(text, str) else None
    if match is None or match.group(1).startswith("0001"):  # 0001-01-01: never finished
        return None
    return match.group(1), int((match.group(2) or "0").ljust(9, "0"))


def first_to_fail(supervised: Supervised, containers: Sequence[Any]) -> int | None:
    """The failed rank that ended first by the engine's clock: ranks that end within one poll of each
    other (a crash, and a peer whose collective then broke) are otherwise told apart by poll order."""
    failed = [r for r, code in enumerate(supervised.exit_codes) if code is not None and code != 0]
    times = {r: finished_at(containers[r]) for r in failed}
    if not failed or any(t is None for t in times.values()):
        return supervised.first_failed
    return min(failed, key=lambda r: (times[r], r))


def run_ranks(
    backend: DockerBackend,
    job: Job,
    run_id: str,
    logs: Path,
    work: Path,
    image: Ensured,
    volumes: dict[str, str] | None,
    holder: Any,
    annotations: dict[str, Any],
    started: float,
    tag: Owner,
) -> JobOutcome:
    """The job's ranks, each in its container on the job's network, supervised until they end."""
    import docker.errors

    world = processes(job.params)
    single = backend.create_kwargs(job, run_id, work, image, volumes, tag)
    network = f"{single['name']}-net"
    try:
        ranks = [
            rank_kwargs(single, r, world, network, gpu=job.device == "gpu", gpus=backend.gpus) for r in range(world)
        ]
    except HarnessError as error:
        return job_folder.not_started(logs, job, started, str(error), annotations)
    annotations["container"] = {**backend.container_record(ranks[0]), "network_mode": network}
    record: dict[str, Any] = {
        "world": world,
        "network": {"name": network, "internal": True, "coordinator": COORDINATOR},
        "containers": [{"rank": r, "name": kwargs["name"]} for r, kwargs in enumerate(ranks)],
    }
    annotations["ranks"] = record
    client = backend.engine.client
    tails = [Tail() for _ in range(world)]
    with contextlib.ExitStack() as stack:
        # Left in reverse: every container is removed before the network they are attached to.
        stack.enter_context(JobNetwork(client, network, single["labels"], backend.reaper))
        containers = []
        for r, kwargs in enumerate(ranks):
            containers.append(stack.enter_context(JobContainer(client, kwargs, backend.reaper)).container)
            record["containers"][r]["id"] = containers[r].id
        annotations["container"]["id"] = containers[0].id
        for r, container in enumerate(containers):
            if (why := docker_objects.start_problem(container, job)) is not None:
                return job_folder.not_started(logs, job, started, f"rank {r} of {world}: {why}", annotations)
        pumps = []
        for r, container in enumerate(containers):
            echo = sys.stdout if backend.echo and r == 0 else None  # rank 0 is the job the terminal follows
            pumps += docker_objects.log_pumps(container, logs, rank_log_names(job.framework, r), echo, tails[r])

        def kill(rank: int) -> None:
            with contextlib.suppress(docker.errors.APIError):  # it may have exited meanwhile
                containers[rank].kill()

        supervised = supervise(
            [exit_poll(c) for c in containers], kill, job.timeout_s, sleep=lambda _: time.sleep(RANK_POLL_S)
        )
        for thread in pumps:
            thread.join(timeout=10)
        problem = backend.fetch(job, work, volumes, holder, annotations)
        for container in containers:
            container.reload()
        supervised.first_failed = first_to_fail(supervised, containers)
        # Only the rank that failed first waits for a late OOM event: the others were killed by us (137 too).
        ooms = [
            r
            for r, c in enumerate(containers)
            if oom_killed(c, settle_s=OOM_SETTLE_S if r == supervised.first_failed and not supervised.timed_out else 0)
        ]
    record["exit_codes"] = supervised.exit_codes
    status = reason = None
    if supervised.first_failed is not None:
        status, reason = "failed", supervised.reason(job.timeout_s)
        if supervised.first_failed in ooms:
            reason = f"{reason}; rank {supervised.first_failed} was killed for exceeding its memory limit (raise it with --memory)"
    out_name, err_name = rank_log_names(job.framework, 0)
    shown = supervised.first_failed if supervised.first_failed is not None else 0
    return JobOutcome(
        exit_code=supervised.exit_codes[0],
        timed_out=supervised.timed_out,
        stdout_log=logs / out_name,
        stderr_log=logs / err_name,
        wall_s=time.perf_counter() - started,
        annotations=annotations,
        oom=bool(ooms),  # a failed or timed-out job's status says more, and outranks it
        stderr_tail=tails[shown].text(),
        result_problem=problem,
        status=status,
        reason=reason,
    )
