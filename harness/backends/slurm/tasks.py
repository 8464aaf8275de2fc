"""Data-parallel jobs on Slurm: a job's N ranks as the N tasks of one allocation (suites/contract/ranks.py).

One batch script holds the allocation (`--ntasks=N`, spread over `--nodes` with N/nodes a node) and
starts every rank with one `srun`, which gives each task its rank in Slurm's own variables
(SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID: what `from_environment` reads). The script itself sets what
Slurm cannot know: HARNESS_WORLD_SIZE, and HARNESS_COORDINATOR, rank 0's host:port -- the first host
of the node list (where srun's block distribution puts task 0) on a port taken from the job id, so two
jobs sharing a node do not meet at one port.

srun ends the step when a task fails (`--kill-on-bad-exit=1`) and bounds how long the others may
outlive the first to end (`--wait`), and says on its own stderr -- the batch script's -- how each task
that did not exit 0 ended (`srun: error: NODE: task R: Exited with exit code C`). That report says
which ranks failed (sacct records steps, not tasks, and a cluster without accounting has no sacct at
all); each task's own last line (`exit_lines`: its code and the time it ended) says which failed
first, as srun may hear of a peer's consequent failure before the cause. Each task writes its own logs (srun --output/--error with %t); rank 0's become the job's usual logs,
the other ranks' go beside them under `rank_log_names`.

Pure functions, so the tests read every line; script.py, backend.py and export.py use them.
"""

from __future__ import annotations

import re
import shlex
import signal
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness.backends.job_folder import tail_text
from harness.backends.ranks import RANK_LOGS, Supervised
from harness.core.errors import HarnessError
from harness.store.plan import Job
from harness.text.escape import plain
from suites.contract.ranks import (
    COORDINATOR_VAR,
    FAULT_VAR,
    LOCAL_WORLD_VAR,
    MAX_DEVICES,
    WORLD_VAR,
    processes,
)

PORT_BASE, PORT_SPAN = 20000, 20000  # rank 0's port: PORT_BASE + SLURM_JOB_ID % PORT_SPAN (20000..39999)
TASK_FUNCTION = "rank_task"  # the shell function each task runs (exported to srun's tasks)
# What each task's clean environment gets from the task's own (Slurm's words for who it is) and from
# the script (what the script computed once for all ranks).
SLURM_RANK_VARS = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")
SCRIPT_RANK_VARS = (WORLD_VAR, COORDINATOR_VAR, LOCAL_WORLD_VAR)
# Where rank 0's log (or a failed rank's stderr tail) goes on with the batch script's own output.
BATCH_HEADING = "the batch script (srun, slurmstepd)"


@dataclass(frozen=True)
class Placement:
    """Where a job's ranks run: `world` tasks, `per_node` on each of `nodes` nodes."""

    world: int
    nodes: int = 1

    @property
    def per_node(self) -> int:
        return self.world // self.nodes


def placement(job: Job, nodes: int = 1) -> Placement:
    """The job's ranks on `nodes` nodes (HarnessError: a count that does not divide evenly)."""
    world = processes(job.params)
    if nodes < 1:
        raise HarnessError(f"--nodes {nodes}: give a number of nodes, 1 or more")
    if world == 1 and nodes > 1:
        raise HarnessError(
            f"--nodes {nodes} spreads a data-parallel job's ranks (--param devices=N), but {job.suite}/{job.framework} "
            "runs one process: drop --nodes"
        )
    if world % nodes:
        raise HarnessError(
            f"--nodes {nodes} does not divide devices={world} evenly (each node runs devices/nodes ranks): "
            f"use a --nodes that divides {world}"
        )
    return Placement(world, nodes)


def check_gpus(gpus: str | None, world: int) -> None:
    """A data-parallel job takes one GPU per rank (--gpus-per-task=1): a GPU count of its own is a contradiction."""
    if gpus not in (None, "all"):
        raise HarnessError(
            f"--gpus {plain(gpus or '')}: a data-parallel job (devices={world}) takes one GPU per rank; drop --gpus"
        )


def allocation_options(place: Placement) -> list[str]:
    """The sbatch options of a data-parallel job's allocation (in place of one node, one task)."""
    return [f"--nodes={place.nodes}", f"--ntasks={place.world}", f"--ntasks-per-node={place.per_node}"]


def coordinator_lines(place: Placement, fault_text: str | None) -> list[str]:
    """Lines of the batch script, before srun: what every rank is told besides its own rank."""
    lines = [
        "# The ranks meet at rank 0: task 0 runs on the first node of the allocation (srun's block distribution),",
        "# on a port of this job's own (two jobs sharing a node must not meet at one port).",
        'coordinator_host=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
        '[ -n "$coordinator_host" ] || { echo "harness: no host in SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST" >&2; exit 1; }',
        f'export {COORDINATOR_VAR}="$coordinator_host:$(( {PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN} ))"',
        f"export {WORLD_VAR}={place.world}",
        # Ranks sharing a node's cores: each takes its slice, unless srun bound its cores already.
        f"export {LOCAL_WORLD_VAR}={place.per_node}",
    ]
    if fault_text is not None:
        lines.append(f"export {FAULT_VAR}={shlex.quote(fault_text)}  # a planted fault (testing aid), from the harness")
    return lines


def rank_variables(fault_text: str | None) -> list[str]:
    """The variables each task passes on into the job's clean environment."""
    return [*SLURM_RANK_VARS, *SCRIPT_RANK_VARS, *([FAULT_VAR] if fault_text is not None else [])]


def task_log(folder_var: str, relative: str) -> str:
    """A shell word for srun --output/--error: `$folder_var/relative`, the folder's '%' escaped (srun
    reads '%' as a pattern, and `relative` carries %t, the task's rank)."""
    return f'"${{{folder_var}//%/%%}}/{relative}"'


def job_folder_logs() -> tuple[str, str]:
    """`harness run`: each task's logs in the job's folder (`$out`), read back when the job has ended."""
    return task_log("out", "rank%t.stdout.log"), task_log("out", "rank%t.stderr.log")


OUTLIVE_S = 120  # srun --wait: how long ranks may outlive the first to end cleanly


def job_folder_log(rank: int, stream: str) -> str:
    """The name `job_folder_logs` gives rank `rank`'s stdout or stderr."""
    return f"rank{rank}.{stream}.log"


def srun_line(logs: tuple[str, str], gpu: bool) -> str:
    """The job's one step: every rank, each running `rank_task` (exported: srun gives the tasks the
    script's environment with --export=ALL, where sbatch's --export=PATH would give them only PATH)."""
    options = [
        "--export=ALL",
        "--kill-on-bad-exit=1",  # a rank that fails ends the step: the others would wait in a collective forever
        # How long the others may outlive the first rank to end. A failing rank ends the step at once
        # (above); this bounds only a clean end, where rank 0 still records and writes the result after
        # the last collective: generous, so a busy node never loses a finished job.
        f"--wait={OUTLIVE_S}",
        f"--output={logs[0]}",
        f"--error={logs[1]}",
    ]
    if gpu:
        # Every task sees its node's GPUs (not only its own): it takes the one of its local rank
        # (HARNESS_LOCAL_RANK = SLURM_LOCALID), and NCCL sees its neighbours for peer-to-peer.
        options.append("--gpu-bind=none")
    return f"srun {' '.join(options)} bash -c {TASK_FUNCTION}"


def exit_lines() -> list[str]:
    """The end of each task: when its job process ended, and how, as the last line of its stderr
    (`failure` names the rank that failed first by it)."""
    return [
        "code=$?",
        'echo "harness: rank $SLURM_PROCID exited with code $code at $(date +%s.%N)" >&2',
        "exit $code",
    ]


def function_lines(exported: list[str], body: list[str]) -> list[str]:
    """`rank_task() { body; the task's end }`, exported with the script's variables it reads."""
    return [
        f"export {' '.join(exported)}",
        f"{TASK_FUNCTION}() {{",
        *(f"  {line}" for line in (*body, *exit_lines())),
        "}",
        f"export -f {TASK_FUNCTION}",
    ]


# -- what srun said about the ranks ---------------------------------------------------------------

_TASK_LINE = re.compile(r"srun: error: \S+: tasks? \[?([0-9,\-]+)\]?: (.+)")
_EXITED = re.compile(r"Exited with exit code (\d+)")
_FIRST_ENDED = "srun: First task exited"
_SIGNALS = {signal.strsignal(s): int(s) for s in signal.Signals if signal.strsignal(s)}
_STOPPED = (int(signal.SIGTERM), int(signal.SIGKILL))  # how srun ends the tasks it stops
_ENDED = re.compile(rb"harness: rank (\d+) exited with code (\d+) at (\d{1,12}(?:\.\d{1,9})?)")


def _tasks(text: str, world: int) -> list[int]:
    found: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            found += range(int(low), int(high or low) + 1)
    return [t for t in found if 0 <= t < world]


def _code(how: str) -> int | None:
    """A task's end as subprocess reports it (-signal for a signal); None: words we do not know."""
    if exited := _EXITED.fullmatch(how):
        return int(exited.group(1))
    if how == "Out Of Memory":
        return -int(signal.SIGKILL)
    return -_SIGNALS[how.removesuffix(" (core dumped)")] if how.removesuffix(" (core dumped)") in _SIGNALS else None


@dataclass(frozen=True)
class Report:
    """How the ranks ended, as srun told it: the shared Supervised (its reason is the other
    backends' words), and what srun said that fits no code."""

    supervised: Supervised
    unknown: tuple[tuple[int, str], ...] = ()  # (rank, srun's words)
    outlived: tuple[int, ...] = ()  # ranks srun stopped because they outlived the first to end by --wait

    def reason(self) -> str | None:
        world = len(self.supervised.exit_codes)
        if self.supervised.first_failed is not None:
            return self.supervised.reason()
        if self.unknown:
            rank, how = self.unknown[0]
            return f"rank {rank} of {world} ended: {plain(how)[:200]} {RANK_LOGS}"
        if self.outlived:
            names = ", ".join(map(str, self.outlived))
            return (
                f"ranks {names} of {world} were still running {OUTLIVE_S} s after the first rank ended, "
                f"and srun stopped them {RANK_LOGS}"
            )
        return None


def report(batch_stderr: str, world: int) -> Report | None:
    """What srun said on the batch script's stderr about the tasks that did not exit 0; None: nothing."""
    codes: list[int | None] = [0] * world
    first: int | None = None
    killed: list[int] = []
    unknown: list[tuple[int, str]] = []
    outlived = _FIRST_ENDED in batch_stderr
    said = False
    for line in batch_stderr.splitlines():
        if (match := _TASK_LINE.search(line)) is None:
            continue
        how = match.group(2).strip()
        code = _code(how)
        for task in _tasks(match.group(1), world):
            said = True
            if code is not None and -code in _STOPPED and (first is not None or outlived):
                codes[task] = None
                killed.append(task)
            elif code is None:
                unknown.append((task, how))
            else:
                codes[task] = code
                if code != 0 and first is None:
                    first = task
    if not said:
        return None
    supervised = Supervised(codes, first, False, sorted(set(killed)))
    return Report(supervised, tuple(unknown), tuple(sorted(set(killed))) if outlived and first is None else ())


def ended_at(data: bytes, rank: int) -> tuple[int, float] | None:
    """(exit code, epoch seconds) from the line `exit_lines` wrote last into rank `rank`'s stderr."""
    for line in reversed(data.splitlines()[-20:]):
        if (match := _ENDED.fullmatch(line.strip())) is not None and int(match.group(1)) == rank:
            return int(match.group(2)), float(match.group(3))
    return None


def failure(
    batch_stderr: str, world: int, exit_code: int | None, task_stderr: Callable[[int], bytes]
) -> tuple[str, int | None] | None:
    """(the failed result's reason, the rank it names or None) of a data-parallel job whose step ran;
    None: every rank exited 0.

    srun's report says which ranks failed, in the order srun heard of them -- and a rank whose peer
    died fails too, a moment later, sometimes heard first (seen here: gloo's "Connection reset by peer"
    on rank 0 reported before rank 1's planted crash). So among the ranks srun names as failed, the one
    whose own end (`exit_lines`) came first is named. Without srun's report (srun itself was killed, its
    stderr lost): the first rank to end badly by its own line; failing that a non-zero end of the batch
    script still fails the job, naming a rank whose log ends with a Python exception if one does."""
    ranks = range(min(world, MAX_DEVICES))
    ends = {r: end for r in ranks if (end := ended_at(task_stderr(r), r)) is not None and end[0] != 0}
    if (told := report(batch_stderr, world)) is not None and told.supervised.first_failed is not None:
        codes = told.supervised.exit_codes
        if heard := [r for r in ends if codes[r] not in (0, None)]:
            first = min(heard, key=lambda r: ends[r][1])
            told = replace(told, supervised=replace(told.supervised, first_failed=first))
    reason = told.reason() if told is not None else None
    if told is not None and reason is not None:
        if (named := told.supervised.first_failed) is None and told.unknown:
            named = told.unknown[0][0]
        return reason, named
    if ends:
        first = min(ends, key=lambda r: ends[r][1])
        return f"rank {first} of {world} exited with code {ends[first][0]} (srun did not report it) {RANK_LOGS}", first
    if not exit_code:
        return None
    failed = f"a task of the job's {world} ranks failed (the batch script exited with code {exit_code}; srun did not say which)"
    for rank in ranks:
        last = tail_text(task_stderr(rank), lines=1).strip()
        if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b", last):
            return f"{failed}: rank {rank}'s log ends with {plain(last)[:200]} {RANK_LOGS}", rank
    return f"{failed}; each rank's log is in the run's logs/", None


def joined(first: bytes, second: bytes, heading: str) -> bytes:
    """Two streams in one log: the second under a line that says what it is, when both have something."""
    if not first or not second:
        return first + second
    return first + (b"" if first.endswith(b"\n") else b"\n") + f"harness: --- {heading} ---\n".encode() + second
