"""Docker backend: one container per job, one at a time, in the job's pinned stack image.

Each container gets no network, `suites/` and the data folder mounted read-only, a `/results` of
its own for its result file and artefacts (a size-capped tmpfs volume, never a host folder:
docker_transfer.RESULTS_CAP_BYTES; what comes back lands in its job folder, backends/job_folder.py),
a read-only root filesystem with a size-capped tmpfs /tmp, a memory limit (by default a share of
the engine's memory), no capabilities, no-new-privileges and a pids limit. It runs as the invoking
user's uid:gid (as the image's `bench` user when the harness runs as root; nothing on the host is
ever handed to that user). Its output reaches the harness through the Docker API only, so logs
and stderr tails are written and kept host-side. Containers carry labels (run id, suite,
framework) so leftovers can be found and removed. A data-parallel job (`devices` >= 2) runs as one
such container per rank on an internal network of its own (backends/docker_ranks.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import sys
import time
from pathlib import Path
from typing import IO, Any

from harness.backends import docker_objects, job_folder
from harness.backends.base import BackendOptions, JobOutcome, Limits, job_command
from harness.backends.docker_objects import NVIDIA_HINT as NVIDIA_HINT
from harness.backends.docker_objects import GpuRequest as GpuRequest
from harness.backends.docker_objects import JobContainer, engine_errors, engine_message, oom_killed
from harness.backends.docker_objects import Owner as Owner
from harness.backends.docker_transfer import (
    OUT_SUBDIR,
    RESULTS_CAP_BYTES,
    RESULTS_MOUNT,
    fetch_results,
    job_volumes,
    results_full,
    results_volume,
    results_volume_name,
    tar_folder,
    tar_writable_dir,
    transfer_mode,
    whole_json,
)
from harness.backends.job_folder import Tail
from harness.backends.reaper import Reaper
from harness.core.errors import HarnessError
from harness.store.images import (
    DEFAULT_BASE_IMAGE,
    IMAGE_USER,
    LABEL,
    Engine,
    Ensured,
    StackImage,
    built_on,
    connect,
    ensure,
    stack_image,
    variant_for,
)
from harness.store.plan import Job
from suites.contract import job_spec
from suites.contract.job_spec import JobSpec
from suites.contract.ranks import processes
from suites.contract.registry import SUITES_DIR

WORKDIR = "/opt/harness"
SUITES_MOUNT = f"{WORKDIR}/suites"
DATA_MOUNT = "/data"
SPEC_IN_CONTAINER = f"{RESULTS_MOUNT}/{job_spec.JOB_FILE}"  # in its capped /results (copy mode: beside out/)
PIDS_LIMIT = 4096  # threads count too: OpenMP pools on many-core GPU hosts plus compile workers
# exec: torch.compile and Triton load the shared objects they compile into /tmp. Capped: tmpfs
# pages are memory, and a job filling /tmp must hit a limit of its own, not the host's RAM.
TMPFS_SIZE = "2g"
TMPFS = {"/tmp": f"rw,exec,nosuid,nodev,mode=1777,size={TMPFS_SIZE}"}
# Without --memory a job still gets a limit: this share of the engine's memory, so a runaway job
# is OOM-killed (status oom) instead of pushing the host into swap or its own OOM killer.
DEFAULT_MEMORY_SHARE = 0.8


class DockerBackend:
    name = "docker"

    def __init__(
        self,
        engine: Engine,
        echo: bool = True,
        limits: Limits | None = None,
        gpus: GpuRequest | None = None,
        wheelhouse: Path | None = None,
        pinned: dict[str, dict[str, Any]] | None = None,
        transfer: str = "bind",
        suites_dir: Path = SUITES_DIR,
    ) -> None:
        self.engine = engine
        self.suites_dir = suites_dir  # mounted read-only as the jobs' code (another checkout's in `harness ab`)
        self.pinned = pinned or {}  # stack -> a result's recorded image, used as is (harness reproduce)
        self.transfer = transfer  # bind: host folders mounted; copy: named volumes via the API (remote)
        self.echo = echo
        self.limits = limits or Limits()
        self.gpus = gpus
        self.wheelhouse = wheelhouse
        self._images: dict[tuple[str, str], Ensured] = {}
        self.reaper = Reaper()
        info = engine.client.info()
        if self.limits.cpus is not None:
            available = int(info.get("NCPU") or 0)
            if available and self.limits.cpus > available:
                raise HarnessError(f"--cpus {self.limits.cpus:g} is more than the Docker host's {available} CPUs")
        total = int(info.get("MemTotal") or 0)
        self.memory_bytes = self.limits.memory_bytes
        if self.memory_bytes is None and total:
            self.memory_bytes = int(total * DEFAULT_MEMORY_SHARE) // 2**20 * 2**20  # whole MiB, as the kernel pages it

    # -- images -------------------------------------------------------------------------------

    def image_for(self, job: Job, build_log: Path | None = None) -> Ensured:
        """The job's stack image, built now (output streamed and kept) if it is missing."""
        if (key := (job.stack, variant_for(job.device))) not in self._images and job.stack in self.pinned:
            record = self.pinned[job.stack]
            image = StackImage(
                job.stack, record["variant"], record.get("base_image") or DEFAULT_BASE_IMAGE, record["lock_hash"], ""
            )
            found = self.engine.client.images.get(record["tag"])
            self._images[key] = Ensured(image, str(found.id), False, 0.0, built_on(self.engine, str(found.id)))
        if key not in self._images:
            image = stack_image(job.stack, key[1], DEFAULT_BASE_IMAGE)
            sink: IO[str] | None = None

            def echo(line: str) -> None:
                nonlocal sink
                if sink is None and build_log is not None:  # only a build that happens leaves a log
                    sink = io.TextIOWrapper(job_folder.open_log(build_log.parent, build_log.name), encoding="utf-8")
                    if self.echo:
                        print(f"   building {image.tag} (first use; later runs reuse it)", flush=True)
                if sink is not None:
                    sink.write(line + "\n")
                    sink.flush()
                if self.echo:
                    print(f"   [{image.stack} image] {line}", flush=True)

            try:
                self._images[key] = ensure(self.engine, image, self.wheelhouse, echo)
            finally:
                if sink is not None:
                    sink.close()
        return self._images[key]

    # -- containers ---------------------------------------------------------------------------

    @staticmethod
    def container_user() -> tuple[int, int]:
        """The invoking user, so results are theirs; root on the host maps to the image's user."""
        uid, gid = os.getuid(), os.getgid()
        return IMAGE_USER if uid == 0 else (uid, gid)

    def create_kwargs(
        self,
        job: Job,
        run_id: str,
        work: Path,
        image: Ensured,
        volumes: dict[str, str] | None = None,
        owner_run: Owner | None = None,
    ) -> dict[str, Any]:
        """Everything the container is created with: pure, so tests can read the isolation.

        `work` is the job's own host-side folder, which names its capped results volume (writable
        at /results, in every mode); `volumes` (mount point -> named volume) replaces the bind
        mounts of suites and data in copy mode; `owner_run`: the run it is named and labelled after
        (default: `run_id`'s).
        """
        from docker.types import Mount

        tag = owner_run or Owner(run_id)
        uid, gid = self.container_user()
        if volumes is None:
            # Absolute, as a bind mount must be (the CLI makes its folders absolute; this is the engine's rule).
            mounts = [Mount(SUITES_MOUNT, str(self.suites_dir.absolute()), type="bind", read_only=True)]
            if job.data_dir is not None and Path(job.data_dir).is_dir():
                mounts.append(Mount(DATA_MOUNT, str(Path(job.data_dir).resolve()), type="bind", read_only=True))
        else:
            mounts = [Mount(target, volume, type="volume", read_only=True) for target, volume in volumes.items()]
        mounts.append(Mount(RESULTS_MOUNT, results_volume_name(tag.name, work), type="volume", read_only=False))
        kwargs: dict[str, Any] = {
            "image": image.image_id,
            "command": job_command(SPEC_IN_CONTAINER),
            "name": f"fw-harness-{tag.name}-{job.framework}-{secrets.token_hex(2)}",
            "labels": {**tag.labels(job), f"{LABEL}.stack": job.stack},
            "user": f"{uid}:{gid}",
            "working_dir": WORKDIR,
            "environment": {"HOME": "/tmp", "PYTHONPATH": WORKDIR, "PYTHONUNBUFFERED": "1"},
            "network_mode": "none",
            "mounts": mounts,
            "read_only": True,
            "tmpfs": dict(TMPFS),
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": PIDS_LIMIT,
            "shm_size": "1g",  # PyTorch DataLoader workers pass batches through /dev/shm
            # tini as PID 1: signals reach the job (abort gives 134, not a PID-1 SIGSEGV) and
            # compile workers are reaped.
            "init": True,
            "detach": True,
        }
        if self.limits.cpus is not None:
            kwargs["nano_cpus"] = int(self.limits.cpus * 1e9)
        if self.memory_bytes is not None:
            kwargs["mem_limit"] = self.memory_bytes
            kwargs["memswap_limit"] = self.memory_bytes  # no swap: a swapping job times nothing real
        if job.device == "gpu":
            kwargs["device_requests"] = [(self.gpus or GpuRequest()).device_request()]
        return kwargs

    def job_spec(self, job: Job, run_id: str) -> JobSpec:
        """The job's job.json, every location as the container sees it (caches stay cold: no cache mount)."""
        out_dir = RESULTS_MOUNT if self.transfer != "copy" else f"{RESULTS_MOUNT}/{OUT_SUBDIR}"
        return job.spec(
            run_id=run_id,
            backend=self.name,
            result_path=f"{out_dir}/{job.result_file()}",
            data_dir=DATA_MOUNT if job.data_dir is not None else None,
            cache_dir=None,
        )

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        outcome, found = job_folder.run_in_folder(
            run_dir, job, lambda work: self._run_job(job, run_id, run_dir / "logs", work, Owner.of(run_id, run_dir))
        )
        found.skipped = outcome.annotations.pop("artifacts_skipped", []) + found.skipped  # left in the container
        return job_folder.note_harvest(outcome, found)

    def _run_job(self, job: Job, run_id: str, logs: Path, work: Path, tag: Owner) -> JobOutcome:
        started = time.perf_counter()
        try:
            image = self.image_for(job, logs / f"{job.stack}-{variant_for(job.device)}.build.log")
        except HarnessError as error:
            return job_folder.not_started(logs, job, started, f"image for the {job.stack} stack: {error}")
        except engine_errors() as error:  # the engine refused or dropped the image's lookup or build
            message = f"image for the {job.stack} stack: the Docker engine failed: {engine_message(error)}"
            return job_folder.not_started(logs, job, started, message)
        import docker.errors

        annotations: dict[str, Any] = {"image": image.record()}
        spec = self.job_spec(job, run_id)
        with contextlib.ExitStack() as stack:
            volumes = None
            if self.transfer == "copy":
                volumes = stack.enter_context(self._volumes(job, tag, image))
            try:
                holder = stack.enter_context(self._results(job, tag, work, image, job_spec.dumps(spec).encode()))
            except (docker.errors.APIError, HarnessError) as error:
                why = error.explanation if isinstance(error, docker.errors.APIError) else None
                message = f"its /results volume could not be made: {why or error}"
                return job_folder.not_started(logs, job, started, message, annotations)
            try:
                if processes(job.params) > 1:
                    from harness.backends import docker_ranks  # built on this module's containers: imported late

                    return docker_ranks.run_ranks(
                        self, job, run_id, logs, work, image, volumes, holder, annotations, started, tag
                    )
                return self._run_container(job, run_id, logs, work, image, volumes, holder, annotations, started, tag)
            except engine_errors() as error:
                # The engine refused the container (e.g. a mount it cannot make) or went away during
                # the job: the job failed for that reason, one line in its result, never a traceback
                # that ends the run with the other jobs unstarted.
                message = f"the Docker engine failed it: {engine_message(error)}"
                return job_folder.not_started(logs, job, started, message, annotations)

    def _volumes(self, job: Job, tag: Owner, image: Ensured) -> Any:
        fills = {SUITES_MOUNT: tar_folder(self.suites_dir)}
        if job.data_dir is not None and Path(job.data_dir).is_dir():
            fills[DATA_MOUNT] = tar_folder(Path(job.data_dir), skip_caches=False)
        name = f"fw-harness-{tag.name}-{job.framework}-{secrets.token_hex(2)}"
        return job_volumes(self.engine.client, name, tag.labels(job), image.image_id, fills, self.reaper)

    def _results(self, job: Job, tag: Owner, work: Path, image: Ensured, spec: bytes) -> Any:
        """The job's capped /results, holding its job.json (copy mode: beside the writable out/)."""
        uid, gid = self.container_user()
        copy = self.transfer == "copy"
        layout = tar_writable_dir(OUT_SUBDIR, uid, gid, {job_spec.JOB_FILE: spec}, folder=copy)
        return results_volume(
            self.engine.client,
            results_volume_name(tag.name, work),
            tag.labels(job),
            image.image_id,
            (uid, gid),
            layout,
            owned_by_job=not copy,
            reaper=self.reaper,
        )

    def _run_container(
        self,
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
        import docker.errors
        import requests.exceptions

        stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
        kwargs = self.create_kwargs(job, run_id, work, image, volumes, tag)
        annotations["container"] = self.container_record(kwargs)
        timed_out, exit_code, oom = False, None, False
        tail = Tail()
        problem: str | None = None
        with JobContainer(self.engine.client, kwargs, self.reaper) as job_container:
            container = job_container.container
            annotations["container"]["id"] = container.id
            if (why := docker_objects.start_problem(container, job)) is not None:
                return job_folder.not_started(logs, job, started, why, annotations)
            echo = sys.stdout if self.echo else None
            pumps = docker_objects.log_pumps(container, logs, (stdout_log.name, stderr_log.name), echo, tail)
            try:
                exit_code = int(container.wait(timeout=job.timeout_s)["StatusCode"])
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                timed_out = True
                with contextlib.suppress(docker.errors.APIError):  # it may have exited meanwhile
                    container.kill()
            for thread in pumps:
                thread.join(timeout=10)
            problem = self.fetch(job, work, volumes, holder, annotations)
            oom = not timed_out and oom_killed(container)  # reloads it: the state below is the latest
            if exit_code is None and not timed_out:
                exit_code = (container.attrs.get("State") or {}).get("ExitCode")
        return JobOutcome(
            exit_code=exit_code,
            timed_out=timed_out,
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            wall_s=time.perf_counter() - started,
            annotations=annotations,
            oom=oom,
            stderr_tail=tail.text(),
            result_problem=problem,
        )

    def container_record(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """What the result records of a job container's creation: its isolation, as asked for."""
        return {
            "name": kwargs["name"],
            "user": kwargs["user"],
            "network_mode": kwargs.get("network_mode") or kwargs.get("network"),
            "read_only_rootfs": kwargs["read_only"],
            "nano_cpus": kwargs.get("nano_cpus"),
            "mem_limit": kwargs.get("mem_limit"),
            "gpus": bool(kwargs.get("device_requests")),
            "transfer": self.transfer,
            "mounts": [{"target": m["Target"], "read_only": bool(m.get("ReadOnly"))} for m in kwargs["mounts"]],
            "results_cap_bytes": RESULTS_CAP_BYTES,
        }

    def fetch(
        self, job: Job, work: Path, volumes: dict[str, str] | None, holder: Any, annotations: dict[str, Any]
    ) -> str | None:
        """The job's result and artefacts, from its /results (held by `holder`) into `work`; the
        problem that refuses its result, if any."""
        out_dir = f"{RESULTS_MOUNT}/{OUT_SUBDIR}" if volumes is not None else RESULTS_MOUNT
        fetched = fetch_results(holder, out_dir, work, job.result_file(), job_folder.artifacts_name(job))
        problem = fetched.problem
        if fetched.skipped:
            annotations["artifacts_skipped"] = fetched.skipped
        if (full := results_full(holder)) is not None:
            annotations["results_full"] = full
            if problem is None and not whole_json(work / job.result_file()):
                problem = f"wrote no whole result file: {full}"
        return problem


def check_options(options: BackendOptions) -> tuple[GpuRequest | None, str]:
    """--gpus and --transfer, checked without contacting the engine (`run --dry-run` calls it too)."""
    return (GpuRequest.parse(options.gpus) if options.gpus is not None else None), transfer_mode(options.transfer)


def from_options(options: BackendOptions) -> DockerBackend:
    request, mode = check_options(options)  # fails before connecting
    engine = connect(hint="start Docker, or run with --backend local")
    return DockerBackend(
        engine,
        echo=options.echo,
        limits=options.limits,
        gpus=request,
        wheelhouse=options.wheelhouse,
        transfer=mode,
        pinned=dict(options.pinned),
        suites_dir=options.suites_dir,
    )
