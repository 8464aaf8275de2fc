"""Options and defaults shared by several commands: declared once, so every command spells,
validates and documents `--device`, `--backend`, `--results-dir`... the same way."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.backends.base import CHOICES, BackendOptions, make_limits
from harness.core.errors import HarnessError
from harness.core.safe_files import kind
from harness.report.exports import Format
from harness.store.data.store import require as require_dataset
from harness.store.plan import Plan
from harness.text.escape import plain
from suites.contract.frameworks import STACKS
from suites.contract.job_spec import DEVICES
from suites.contract.profiles import MAX_STEPS as MAX_PROFILE_STEPS
from suites.contract.settings import PRECISIONS

PROFILE_STEPS = 5  # enough steady steps to see the median step, few enough to cost seconds

Device = Enum("Device", [(name, name) for name in DEVICES], type=str)  # type: ignore[misc]


# --backend for commands that run jobs: `auto` and every backend of the one table (harness/core/backend_table.py).
BackendName = Enum("BackendName", [(name, name) for name in CHOICES], type=str)  # type: ignore[misc]


class Variant(str, Enum):
    cpu = "cpu"
    cuda12 = "cuda12"


# The choices a job's spec declares (suites/contract/job_spec.py, settings.py), offered as they are.
Precision = Enum("Precision", [(name, name) for name in PRECISIONS], type=str)  # type: ignore[misc]


class Transfer(str, Enum):
    auto = "auto"
    bind = "bind"
    copy = "copy"


class ProfileSide(str, Enum):
    both = "both"
    baseline = "baseline"
    candidate = "candidate"


class Processes(str, Enum):
    forked = "forked"
    fresh = "fresh"


def absolute(path: Path) -> Path:
    """`path` from the current folder, spelled as given (no link resolved): a results or data folder is
    resolved here once, so every backend gets a path that means the same from anywhere (a Docker bind
    mount refuses a relative one, and a job runs in another folder)."""
    try:
        return path.absolute()
    except OSError:  # the current folder was removed under the shell
        raise HarnessError(
            f"{plain(path)} is relative to the current folder, which no longer exists; cd somewhere, or give an "
            "absolute path"
        ) from None


def default_results_dir() -> Path:
    return absolute(Path(os.environ.get("HARNESS_RESULTS_DIR", "").strip() or "results"))


def default_data_dir() -> Path:
    return absolute(Path(os.environ.get("HARNESS_DATA_DIR", "").strip() or "data"))


def default_wheelhouse() -> Optional[Path]:
    """$HARNESS_WHEELHOUSE: the wheels every image build (also on demand in `run`) takes, no index."""
    value = os.environ.get("HARNESS_WHEELHOUSE", "").strip()
    return Path(value) if value else None


def parse_pythons(pairs: list[str]) -> dict[str, str]:
    """--python STACK=PATH, each checked as the local backend will use it (for --dry-run too): a known
    stack, named once, and an interpreter that exists (a path, or a name found on PATH)."""
    found: dict[str, str] = {}
    for pair in pairs:
        stack, sep, path = pair.partition("=")
        if not sep or not stack or not path:
            raise HarnessError(
                f"--python {pair!r} is not of the form STACK=PATH (e.g. --python jax=.venv-jax/bin/python)"
            )
        if stack not in STACKS:
            raise HarnessError(
                f"--python {plain(pair)!r}: {plain(stack)!r} is not a stack; use one of {', '.join(STACKS)} "
                "(flax runs in the jax stack)"
            )
        if stack in found:
            raise HarnessError(f"--python names the {stack} stack twice; give one interpreter per stack")
        if not _runnable(path):
            raise HarnessError(
                f"--python {plain(pair)!r}: no executable interpreter at {plain(path)!r}; give the path of a "
                f"Python that has the {stack} stack's packages (or a name on PATH)"
            )
        found[stack] = path
    return found


def _runnable(program: str) -> bool:
    """As the local backend starts it: a path must be an executable file, a bare name is found on PATH."""
    if os.sep in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def backend_options(
    *,
    quiet: bool,
    memory: str | None = None,
    cpus: float | None = None,
    gpus: str | None = None,
    transfer: Transfer = Transfer.auto,
    pythons: dict[str, str] | None = None,
    wheelhouse: Path | None = None,
    processes: Processes = Processes.fresh,
) -> BackendOptions:
    """The options of a command line, as every backend factory takes them."""
    return BackendOptions(
        echo=not quiet,
        limits=make_limits(memory, cpus),
        pythons=pythons or {},
        gpus=gpus,
        wheelhouse=wheelhouse or default_wheelhouse(),
        transfer=transfer.value,
        fork_rounds=processes is Processes.forked,
    )


FormatOption = Annotated[Format, typer.Option("--format", help="output format")]


def folder_option(option: str, example: str) -> Callable[[str], Path]:
    """A folder option's parser: an empty value is refused (Path('') would quietly be the current folder)."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise HarnessError(f"{option} is empty; give a folder (e.g. {option} {example}) or leave the option out")
        path = Path(text)
        if path.exists() and not path.is_dir():  # a file, a FIFO, a device: never a folder to read or fill
            what = "file" if path.is_file() else kind(path.stat().st_mode)
            raise HarnessError(f"{option} {plain(text)} is a {what}; give a directory (e.g. {option} {example})")
        return absolute(path)

    return parse


ResultsDir = Annotated[
    Optional[Path],
    typer.Option(
        "--results-dir",
        parser=folder_option("--results-dir", "results"),
        help="where run folders go [default: ./results or $HARNESS_RESULTS_DIR]",
    ),
]
DataDir = Annotated[
    Optional[Path],
    typer.Option(
        "--data-dir",
        parser=folder_option("--data-dir", "data"),
        help="dataset folder [default: ./data or $HARNESS_DATA_DIR]",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="do not echo job output")]
DeviceOption = Annotated[Device, typer.Option(help="where the frameworks compute")]
BackendOption = Annotated[
    BackendName,
    typer.Option(
        envvar="HARNESS_BACKEND", help="how jobs are isolated; auto: docker when an engine answers, else local"
    ),
]
ThreadsOption = Annotated[Optional[int], typer.Option(help="thread count applied the same way to every framework")]
# A time budget instead of a round count (harness/execute/budget.py); `ab` also looks at the evidence
# on the way and stops early (judge/sequential.py, said in its docstring).
BudgetOption = Annotated[
    Optional[str],
    typer.Option(
        "--budget",
        metavar="DURATION",
        help="run rounds until DURATION (90s, 3m, 1h) is spent: another starts only if it fits; --rounds is then "
        "a cap (docs/usage.md)",
    ),
]
# Rounds on the local backend (harness/backends/fork_server.py): what each round's job process is.
ProcessesOption = Annotated[
    Processes,
    typer.Option(
        "--processes",
        envvar="HARNESS_PROCESSES",
        help="local rounds: fresh = a new interpreter every job (default); forked = each round's job forked from "
        "a server that imported the framework once (cheaper rounds; its A/A record is in docs/method.md)",
    ),
]
MemoryOption = Annotated[
    Optional[str], typer.Option("--memory", help="memory limit per job, e.g. 4g (docker: container limit)")
]
CpusOption = Annotated[Optional[float], typer.Option("--cpus", help="CPU limit per job (local: cores it may use)")]
GpusOption = Annotated[
    Optional[str], typer.Option("--gpus", help="docker, --device gpu: all (default), a count, or device=0,1")
]
TransferOption = Annotated[
    Transfer,
    typer.Option(
        envvar="HARNESS_TRANSFER",
        help="docker: bind (mount host folders), copy (through the API, for remote engines) or auto",
    ),
]
WheelhouseOption = Annotated[
    Optional[Path],
    typer.Option(help="build missing images only from the wheels in DIR, no index; default $HARNESS_WHEELHOUSE"),
]
PrecisionOption = Annotated[
    Precision,
    typer.Option(
        help="matmul/conv arithmetic of the suites with a precision axis, the same in every framework: fp32 "
        "(default, for comparisons); tf32 (float32 operands, TF32 tensor cores allowed: GPU only, a CPU computes "
        "fp32); bf16 (bfloat16 operands, float32 accumulation and master weights: autocast, dtype=bfloat16 "
        "layers). The precision probe records what really ran (docs/method.md)"
    ),
]
ProfileOption = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="after each time metric's samples, a few more steady steps under the framework's own profiler "
        "(never among the timed samples); the traces are kept in the run folder (Chrome trace-event JSON: "
        "Perfetto, chrome://tracing) and `harness show RUN --profile` says where each step's time went",
    ),
]
ProfileStepsOption = Annotated[
    Optional[int],
    typer.Option(
        "--profile-steps", metavar="N", help=f"with --profile: steps profiled per metric [default: {PROFILE_STEPS}]"
    ),
]


def profile_steps(profile: bool, steps: int | None) -> int:
    """The steps each job profiles per time metric (0: no profile), from --profile and --profile-steps."""
    if steps is None:
        return PROFILE_STEPS if profile else 0
    if not profile:
        raise HarnessError("--profile-steps goes with --profile; add --profile, or drop --profile-steps")
    if not 1 <= steps <= MAX_PROFILE_STEPS:
        raise HarnessError(f"--profile-steps {steps} must be a whole number from 1 to {MAX_PROFILE_STEPS}")
    return steps


StacksOption = Annotated[
    Optional[str], typer.Option("--stacks", help="comma-separated stacks (default: all of jax, numpy, pytorch)")
]
VariantOption = Annotated[Variant, typer.Option(help="cpu, or cuda12 for --device gpu")]
RunRef = Annotated[str, typer.Argument(metavar="RUN", help="run folder, or run id under --results-dir")]


FailAboveOption = Annotated[
    Optional[float], typer.Option("--fail-above", help="exit 1 on a significant slowdown above PCT percent")
]
JunitOption = Annotated[
    Optional[Path],
    typer.Option("--junit", help="also write a JUnit XML report here: one test case per verdict, for CI"),
]


def require_datasets(plan: Plan) -> None:
    """A missing dataset is one line naming the fetch command, before any job starts."""
    named = plan.jobs[0].params.get("dataset") if plan.jobs else None
    if isinstance(named, str) and plan.jobs[0].data_dir is not None:
        require_dataset(Path(plan.jobs[0].data_dir), named, plan.suite)
