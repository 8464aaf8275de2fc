"""The text of one job's Slurm batch script, and of the script that prepares a stack's venv.

Pure functions, so the tests read every line. `harness run --backend slurm` writes them beside the
run's logs and submits them; `harness export slurm` writes them into a folder for a cluster the
host cannot reach. Inside the allocation the job runs in its pinned stack, one of:

- `venv`: a virtual environment made from the stack image's own lock file
  (images/<stack>/lock-<variant>.txt, `pip install --require-hashes --only-binary=:all:`, as the
  Dockerfiles do), kept in a shared folder under the lock's hash and reused until the lock changes;
- `apptainer`: the stack image as a SIF file (or pulled from a registry), `apptainer exec --containall`;
- `podman`: the stack image, `podman run` with the docker backend's isolation.

Every path the script uses is a shell word given by a `Layout` (a quoted literal for `run`,
`"$root"/...` for an export), so one generator serves both.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.base import Limits, job_command
from harness.backends.ranks import checked_fault
from harness.backends.slurm import tasks
from harness.backends.slurm.settings import SlurmSettings
from harness.core.errors import HarnessError
from harness.store.images import DEFAULT_BASE_IMAGE, stack_image
from harness.store.plan import Job
from suites.contract.job_spec import JOB_FILE, JobSpec
from suites.contract.ranks import FAULT_VAR, data_parallel

# Slurm's own limit is a backstop behind the harness's timeout: room for the environment check,
# interpreter start and Slurm's KillWait before it cuts the job off.
TIME_MARGIN_S = 60.0
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PREPARE_FAILED = 97  # exit code of a job whose stack environment could not be prepared
WORKDIR, OUT_MOUNT, DATA_MOUNT = "/opt/harness", "/results", "/data"  # in a container, as the docker backend
PIDS_LIMIT, TMPFS_SIZE = 4096, "2g"


@dataclass(frozen=True)
class Stack:
    """One stack's pinned environment: named by its lock's hash, like the docker image tag."""

    stack: str
    variant: str
    lock_hash: str

    @classmethod
    def of(cls, stack: str, variant: str) -> Stack:
        return cls(stack, variant, stack_image(stack, variant).lock_hash)

    @property
    def name(self) -> str:
        return f"{self.stack}-{self.variant}-{self.lock_hash[:12]}"

    @property
    def tag(self) -> str:
        return stack_image(self.stack, self.variant).tag

    @property
    def lock_file(self) -> Path:
        return stack_image(self.stack, self.variant).lock_file

    def image_ref(self, runtime: str, images: str | None) -> str:
        if runtime == "apptainer":
            if images is None:
                raise HarnessError(
                    "the apptainer runtime needs HARNESS_SLURM_IMAGES: a folder of <stack>-<variant>-<hash>.sif "
                    "files or docker://REGISTRY"
                )
            if "://" in images:
                return f"{images.rstrip('/')}/{self.tag}"
            return f"{images.rstrip('/')}/{self.name}.sif"
        if runtime == "podman":
            return f"{images.rstrip('/')}/{self.tag}" if images else self.tag
        raise HarnessError(f"runtime {runtime!r} runs no image")

    def record(self, runtime: str, settings: SlurmSettings, env_dir: str | None) -> dict[str, Any]:
        """The result's `image` field: what ran, named by the lock hash the docker backend records too."""
        container = runtime != "venv"
        return {
            "runtime": runtime,
            "tag": self.tag if container else None,
            "id": self.image_ref(runtime, settings.images) if container else env_dir,
            "stack": self.stack,
            "variant": self.variant,
            "lock_hash": self.lock_hash,
            "base_image": DEFAULT_BASE_IMAGE if container else None,
            "python": None if container else settings.python,
        }


@dataclass(frozen=True)
class Layout:
    """Where the script finds things, as shell words (quoted literals, or expressions such as "$root"/x)."""

    code: str  # the folder that holds suites/
    out: str  # the job's own folder: it writes its result and artefacts here, nowhere else
    lock: str  # images/<stack>/lock-<variant>.txt
    envs: str  # the folder of the venvs (shared by every node)
    data: str | None = None  # absolute dataset folder on the nodes
    cache: str | None = None  # absolute warm compiler-cache folder on the nodes (venv only)
    preamble: tuple[str, ...] = ()  # lines run first (an export finds its own folder here)


def literal(path: object) -> str:
    if "\n" in (text := str(path)) or "\0" in text:
        raise HarnessError(f"the path {text!r} holds a newline; Slurm scripts cannot name it")
    return shlex.quote(text)


def time_minutes(timeout_s: float) -> int:
    """sbatch --time in whole minutes (Slurm rounds seconds up anyway), with the margin."""
    return max(1, math.ceil((timeout_s + TIME_MARGIN_S) / 60))


def gpu_option(job: Job, settings: SlurmSettings) -> str | None:
    if job.device != "gpu":
        return None
    if settings.gpus in (None, "all"):
        # One GPU requested puts the job on a GPU node; --exclusive then allocates all of the
        # node's GRES (sbatch(1), --exclusive), so the job sees every GPU, like docker's "all".
        return "--gres=gpu:1"
    return f"--gpus={settings.gpus}"


def job_name(framework: str) -> str:
    """The Slurm job name of a framework's job (sbatch --job-name)."""
    return f"fw-harness-{framework}"


def run_comment(run_id: str) -> str:
    """The comment every job of a run carries (sbatch --comment): how its jobs are found again."""
    return f"fw-harness:{run_id}"


def directives(
    job: Job,
    run_id: str,
    settings: SlurmSettings,
    limits: Limits,
    output: str | None = None,
    error: str | None = None,
    place: tasks.Placement | None = None,
) -> list[str]:
    """The #SBATCH lines: one task on one node of its own (a data-parallel job: one task per rank,
    on nodes of their own), for the job's time limit."""
    memory = f"{math.ceil(limits.memory_bytes / 2**20)}M" if limits.memory_bytes is not None else "0"
    ranked = place is not None and place.world > 1
    options = [
        f"--job-name={job_name(job.framework)}",
        f"--comment={run_comment(run_id)}",
        *(tasks.allocation_options(place) if place is not None and ranked else ["--nodes=1", "--ntasks=1"]),
        "--exclusive",  # a benchmark owns its node: no other job competes for cores, caches or GPUs
        f"--mem={memory}",  # 0: all of the node's memory (sbatch(1): --exclusive alone gives only what is asked)
        f"--time={time_minutes(job.timeout_s)}",
        "--export=PATH",  # the submitter's PATH finds python/apptainer; nothing else of its environment
    ]
    if output is not None:
        options.append(f"--output={output}")
    if error is not None:
        options.append(f"--error={error}")
    gpus = gpu_option(job, settings)
    if ranked and job.device == "gpu":
        gpus = "--gpus-per-task=1"  # one device per rank
    if gpus is not None:
        options.append(gpus)
    if limits.cpus is not None:
        options.append(f"--cpus-per-task={math.ceil(limits.cpus)}")
    options += settings.sbatch_options
    return [f"#SBATCH {shlex.quote(option)}" for option in options]


def _index_args(settings: SlurmSettings) -> list[str]:
    args = ["--no-index", "--find-links", settings.wheelhouse] if settings.wheelhouse else []
    for folder in settings.find_links:
        args += ["--find-links", folder]
    return args


def env_function(stack: Stack, settings: SlurmSettings) -> list[str]:
    """`ensure_env`: make "$env_dir" from "$lock" unless it already holds exactly that lock.

    A copy of the lock is written into the venv last, after pip succeeded, so its hash is the
    readiness mark; flock makes concurrent jobs on a shared folder wait for one build.
    """
    py = shlex.quote(settings.python)
    ready = f'echo "{stack.lock_hash}  $env_dir/lock.txt" | sha256sum -c --status 2>/dev/null'
    pip = shlex.join(["--require-hashes", "--only-binary=:all:", *_index_args(settings)])
    return [
        "ensure_env() {",
        f"  if {ready}; then return 0; fi",
        '  mkdir -p "$(dirname "$env_dir")" || return 1',
        "  (",
        "    flock 9 || exit 1",
        f"    if {ready}; then exit 0; fi",
        f'    if ! echo "{stack.lock_hash}  $lock" | sha256sum -c --status; then',
        f'      echo "harness: $lock is not the lock with sha256 {stack.lock_hash}" >&2; exit 1',
        "    fi",
        f"    if ! {py} -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then",
        f'      echo "harness: {settings.python} is not CPython 3.11, which the locks are resolved for;'
        ' set HARNESS_SLURM_PYTHON (run) or --python (export)" >&2; exit 1',
        "    fi",
        '    echo "harness: building $env_dir from $lock"',
        '    rm -rf "$env_dir"',
        f'    {py} -m venv "$env_dir" || exit 1',
        f'    PIP_DISABLE_PIP_VERSION_CHECK=1 "$env_dir/bin/python" -m pip install {pip} -r "$lock" || exit 1',
        '    cp "$lock" "$env_dir/lock.txt"',
        '  ) 9>"$env_dir.flock"',
        "}",
    ]


def _variables(layout: Layout, stack: Stack, *, job: bool = True) -> list[str]:
    where = [f"code={layout.code}", f"out={layout.out}"] if job else []
    return [*layout.preamble, *where, f"lock={layout.lock}", f"env_dir={layout.envs}/{stack.name}"]


def prepare_script(stack: Stack, layout: Layout, settings: SlurmSettings) -> str:
    """Builds the stack's venv now (run on a login node, or by the harness before submitting)."""
    lines = [
        "#!/bin/bash",
        f"# Prepares the {stack.stack} stack's venv ({stack.variant}, lock sha256 {stack.lock_hash[:12]}...).",
        "set -u",
        *_variables(layout, stack, job=False),
        *env_function(stack, settings),
        "ensure_env",
    ]
    return "\n".join(lines) + "\n"


def job_spec_for(job: Job, run_id: str, runtime: str, layout: Layout) -> JobSpec:
    """The job's job.json (written into its folder, `$out`), each location as the job sees it.

    venv: the job runs in `$out` on the node, with the data and cache folders as they are there;
    a container sees `$out` at /results and the data at /data, and keeps its caches cold.
    """
    if runtime == "venv":
        result, data, cache = job.result_file(), layout.data, layout.cache
    else:
        result, data, cache = f"{OUT_MOUNT}/{job.result_file()}", DATA_MOUNT if layout.data else None, None
    return job.spec(run_id=run_id, backend="slurm", result_path=result, data_dir=data, cache_dir=cache)


def _job_args(runtime: str) -> str:
    """The in-job command line after the interpreter (the same for every backend: job_command)."""
    spec = JOB_FILE if runtime == "venv" else f"{OUT_MOUNT}/{JOB_FILE}"
    return shlex.join(job_command(spec)[1:])


def _cuda_env(flag: str) -> str:
    """Passes Slurm's GPU binding on into a cleaned environment, when Slurm set one."""
    return f'${{CUDA_VISIBLE_DEVICES+{flag}"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"}}'


@dataclass(frozen=True)
class Lines:
    """A runtime's part of the script: `prepare` runs once, in the batch script; `task` starts the job
    (once in the batch script, or in each rank's task); `exported`: the script's variables `task` reads."""

    prepare: list[str]
    task: list[str]
    exported: list[str]


def _passed(flag: str, names: list[str]) -> list[str]:
    """The variables a task hands on into the job's clean environment, each as it has it."""
    return [f'{flag}"{name}=${name}"' for name in names]


def _venv_lines(
    job: Job, stack: Stack, layout: Layout, settings: SlurmSettings, passed: list[str], ranked: bool
) -> Lines:
    prepare = [
        *env_function(stack, settings),
        f'ensure_env || {{ echo "harness: the {stack.stack} environment could not be prepared" >&2; '
        f"exit {PREPARE_FAILED}; }}",
    ]
    variables = "".join(f" {word}" for word in _passed("", passed))
    task = [
        'scratch=$(mktemp -d "${TMPDIR:-/tmp}/fw-harness.XXXXXX") || exit 1',
        "trap 'rm -rf \"$scratch\"' EXIT",
        'cd "$out" || exit 1',
        "# Nothing of the submitter's environment reaches the job: only what it needs, as in a container.",
        f'env -i PATH="$PATH" HOME="$scratch" TMPDIR="$scratch" PYTHONPATH="$code" PYTHONUNBUFFERED=1{variables} '
        f'{_cuda_env("")} "$env_dir/bin/python" {_job_args("venv")}',
    ]
    return Lines(prepare, task, ["code", "out", "env_dir"])


def _container_mounts(flag: str, layout: Layout) -> list[str]:
    mounts = [("$code/suites", f"{WORKDIR}/suites", ":ro"), ("$out", OUT_MOUNT, "")]
    if layout.data is not None:
        mounts.append(("$data", DATA_MOUNT, ":ro"))
    return [f'{flag} "{source}:{target}{mode}"' for source, target, mode in mounts]


def _apptainer_lines(
    job: Job, stack: Stack, layout: Layout, settings: SlurmSettings, passed: list[str], ranked: bool
) -> Lines:
    image = stack.image_ref("apptainer", settings.images)
    prepare = [
        "cli=$(command -v apptainer || command -v singularity) || "
        f'{{ echo "harness: neither apptainer nor singularity is on PATH on $(hostname)" >&2; exit {PREPARE_FAILED}; }}',
        f"image={shlex.quote(image)}",
    ]
    if "://" not in image:
        prepare.append(
            f'[ -f "$image" ] || {{ echo "harness: $image is missing; build it from the stack image '
            f'(apptainer build $image docker-daemon://{stack.tag})" >&2; exit {PREPARE_FAILED}; }}'
        )
    if layout.data is not None:
        prepare.append(f"data={literal(layout.data)}")
    # --containall: own PID/IPC namespaces, an empty /tmp and $HOME, a clean environment;
    # only suites/ (read-only), the job's own folder and the data (read-only) are bound in.
    # (It keeps the host's network, where the ranks of a data-parallel job meet.)
    options = [
        "exec",
        "--containall",
        "--no-home",
        "--cleanenv",
        f"--pwd {WORKDIR}",
        *_container_mounts("--bind", layout),
        f"--env PYTHONPATH={WORKDIR}",
        "--env PYTHONUNBUFFERED=1",
        *_passed("--env ", passed),  # none holds a comma, which --env would split at
    ]
    task = []
    if job.device == "gpu":
        options.append("--nv")
        # Not --env: it splits its value at commas, and a node's GPUs are a list ("0,1"). A variable
        # named APPTAINERENV_X (SINGULARITYENV_X before Apptainer) reaches a --cleanenv container as X.
        task.append(
            '[ -z "${CUDA_VISIBLE_DEVICES+x}" ] || export APPTAINERENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES" '
            'SINGULARITYENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"'
        )
    task.append('"$cli" ' + " ".join(options) + f' "$image" python {_job_args("apptainer")}')
    return Lines(prepare, task, ["code", "out", "cli", "image", *(["data"] if layout.data is not None else [])])


def _podman_lines(
    job: Job, stack: Stack, layout: Layout, settings: SlurmSettings, passed: list[str], ranked: bool
) -> Lines:
    image = stack.image_ref("podman", settings.images)
    prepare = [
        f'command -v podman >/dev/null || {{ echo "harness: podman is not on PATH on $(hostname)" >&2; '
        f"exit {PREPARE_FAILED}; }}",
    ]
    if layout.data is not None:
        prepare.append(f"data={literal(layout.data)}")
    # Rootless podman maps the user onto itself (keep-id), so the result file is theirs; root may not use it.
    task = ['userns=--userns=keep-id; [ "$(id -u)" = 0 ] && userns=--userns=host']
    if ranked:
        task.append("# The host's network: the ranks meet over TCP at rank 0's port, from this node and the others.")
    # The docker backend's isolation (docs/isolation.md), in podman-run(1)'s words.
    options = [
        "run",
        "--rm",
        f"--name fw-harness-{job.framework}-$SLURM_JOB_ID" + ("-$SLURM_PROCID" if ranked else ""),
        "--pull=missing" if settings.images else "--pull=never",
        "--network=host" if ranked else "--network=none",
        "--read-only",
        f"--tmpfs /tmp:rw,exec,nosuid,nodev,mode=1777,size={TMPFS_SIZE}",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--pids-limit={PIDS_LIMIT}",
        "--init",
        '"$userns"',
        '--user "$(id -u):$(id -g)"',
        *_container_mounts("-v", layout),
        f"-w {WORKDIR}",
        f"-e PYTHONPATH={WORKDIR}",
        "-e PYTHONUNBUFFERED=1",
        "-e HOME=/tmp",
        *_passed("-e ", passed),
    ]
    if job.device == "gpu":
        # CDI names the NVIDIA devices (NVIDIA Container Toolkit: nvidia-ctk cdi generate).
        options += ["--device nvidia.com/gpu=all", _cuda_env("-e ")]
    task.append("podman " + " ".join(options) + f" {shlex.quote(image)} python {_job_args('podman')}")
    return Lines(prepare, task, ["code", "out", *(["data"] if layout.data is not None else [])])


def batch_script(
    job: Job,
    run_id: str,
    stack: Stack,
    layout: Layout,
    settings: SlurmSettings,
    limits: Limits,
    *,
    output: str | None = None,
    error: str | None = None,
    origin: str = "harness run --backend slurm",
    nodes: int = 1,
    fault: str | None = None,
    task_logs: tuple[str, str] | None = None,
) -> str:
    """The job's batch script. A data-parallel job (processes > 1) is one allocation of one task per
    rank on `nodes` nodes, started by one srun (harness/backends/slurm/tasks.py), each task's logs at
    `task_logs` (srun --output/--error words with %t; default: the job's folder). `fault`: FAULT_VAR
    from the harness's environment, handed on to every rank of a data-parallel job."""
    if (runtime := settings.runtime) != "venv" and any(c in text for text in (layout.code, layout.out) for c in ":,"):
        raise HarnessError(f"a folder with ':' or ',' cannot be bound into a container: {layout.out}")
    place = tasks.placement(job, nodes)
    ranked = place.world > 1
    planted = checked_fault(fault) if data_parallel(job.params) else None
    if ranked and job.device == "gpu":
        tasks.check_gpus(settings.gpus, place.world)
    passed = tasks.rank_variables(planted) if ranked else [FAULT_VAR] if planted is not None else []
    lines_for = {"venv": _venv_lines, "apptainer": _apptainer_lines}.get(runtime, _podman_lines)
    parts = lines_for(job, stack, layout, settings, passed, ranked)
    if ranked:
        body = [
            *parts.prepare,
            *tasks.coordinator_lines(place, planted),
            *tasks.function_lines(parts.exported, parts.task),
            tasks.srun_line(task_logs or tasks.job_folder_logs(), job.device == "gpu"),
        ]
        what = (
            f" Data-parallel: {place.world} ranks, {place.per_node} on each of {place.nodes} node(s), one srun task "
            "each; rank 0 writes the result."
        )
    else:
        planted_line = [f"export {FAULT_VAR}={shlex.quote(planted)}"] if planted is not None else []
        body = [*parts.prepare, *planted_line, *parts.task]
        what = ""
    lines = [
        "#!/bin/bash",
        *directives(job, run_id, settings, limits, output, error, place),
        f"# fw-harness job {job.suite}/{job.framework} of run {run_id}: the {stack.stack} stack "
        f"(lock sha256 {stack.lock_hash[:12]}...) through {runtime}. Written by `{origin}`.{what}",
        "# Its whole spec is job.json in its own folder, where its one result file goes; the harness takes it back from there.",
        "set -u",
        f'export PATH="${{PATH:-{SAFE_PATH}}}"',
        *_variables(layout, stack),
        *body,
    ]
    return "\n".join(lines) + "\n"
