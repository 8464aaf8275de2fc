"""Every option declared once. The plan's options are a bundle: every command that plans jobs (run, ab,
noise, bisect, selftest, export slurm|k8s) takes it, and the bundle alone builds the `PlanRequest` its plan
is made from.

A command is decorated with `plans(...)`: the bundle's options join its own Typer parameters (Typer
reads the signature), and the function receives them as one `PlanOptions`, never one by one. So an
axis added to `PLAN_OPTIONS` (an option, and how its value enters the request) reaches every planning
command, its `--help` and its plan, with no command file changed (tests/test_plan_options.py plants
one). The session's options (backend, rounds, budget ...) are a second bundle, `SESSION_OPTIONS`,
taken by the commands that also run what they plan (not the exports). The options several commands
share beyond the bundles (`--format`, `--fail-above`, `--stacks` ...) are declared at the end.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from harness.core.errors import HarnessError
from harness.core.safe_files import kind
from harness.execute.session import CHOICES, PlanRequest, Settings
from harness.report.exports import Format
from harness.text.escape import plain
from suites.contract.job_spec import DEVICES
from suites.contract.profiles import MAX_STEPS as MAX_PROFILE_STEPS
from suites.contract.settings import PRECISIONS

PROFILE_STEPS = 5  # enough steady steps to see the median step, few enough to cost seconds

Device = Enum("Device", [(name, name) for name in DEVICES], type=str)  # type: ignore[misc]


# --backend for commands that run jobs: `auto` and every backend of the one table (harness/core/backend_table.py).
BackendName = Enum("BackendName", [(name, name) for name in CHOICES], type=str)  # type: ignore[misc]


# The choices a job's spec declares (suites/contract/job_spec.py, settings.py), offered as they are.
Precision = Enum("Precision", [(name, name) for name in PRECISIONS], type=str)  # type: ignore[misc]


class Transfer(str, Enum):
    auto = "auto"
    bind = "bind"
    copy = "copy"


class Processes(str, Enum):
    forked = "forked"
    fresh = "fresh"


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


def absolute(path: Path) -> Path:
    """`path` from the current folder, spelled as given (no link resolved)."""
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


def default_wheelhouse() -> Path | None:
    """$HARNESS_WHEELHOUSE: the wheels every image build (also on demand in `run`) takes, no index."""
    value = os.environ.get("HARNESS_WHEELHOUSE", "").strip()
    return Path(value) if value else None


Fields = dict[str, Any]  # the PlanRequest's keyword arguments, filled option by option


@dataclass(frozen=True)
class PlanOption:
    """One option of a bundle: its Typer parameter (name, `Annotated[type, typer.Option(...)]`, default)
    and how its value enters what the bundle builds (`into`: fields, value, every value given)."""

    name: str
    annotation: Any
    default: Any
    into: Callable[[Fields, Any, Mapping[str, Any]], None]


def _field(field: str, convert: Callable[[Any], Any] = lambda v: v) -> Callable[[Fields, Any, Mapping[str, Any]], None]:
    def into(fields: Fields, value: Any, _: Mapping[str, Any]) -> None:
        fields[field] = convert(value)

    return into


def _value(choice: Any) -> Any:
    """An Enum choice's string (Device, Precision ...)."""
    return choice.value


def _data_dir(value: Path | None) -> str:
    return str((value or default_data_dir()).resolve())


def _profile(fields: Fields, _: Any, given: Mapping[str, Any]) -> None:
    fields["profile"] = profile_steps(bool(given.get("profile")), given.get("profile_steps"))


SuiteOption = Annotated[Optional[str], typer.Option("--suite", "-s", help="suite name (see `harness list`)")]
FrameworksOption = Annotated[
    Optional[str], typer.Option("--frameworks", "-f", help="comma-separated; default: all of the suite's")
]
ParamOption = Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value; repeatable")]
RepeatOption = Annotated[Optional[int], typer.Option(help="timed steady-state calls per metric [default: suite's]")]
WarmupOption = Annotated[Optional[int], typer.Option(help="untimed calls after the first call [default: suite's]")]
BaselineOption = Annotated[Optional[str], typer.Option(help="framework the ratios refer to [default: first listed]")]
TimeoutOption = Annotated[Optional[float], typer.Option(help="per-job time limit in seconds [default: suite's]")]
SmokeOption = Annotated[
    bool, typer.Option("--smoke", help="the suite's smallest real size (its declared smoke parameters), 3 samples")
]
CacheOption = Annotated[
    str,
    typer.Option(
        "--cache",
        envvar="HARNESS_CACHE",
        help="compiler caches (JAX persistent cache, Inductor, Triton): cold = empty for every job; warm = kept in "
        "the cache home per stack and lock ($HARNESS_CACHE_HOME/compile) and reused by later jobs",
    ),
]

# The plan's axes, in `--help` order. `into` runs in this order, so one may read what an earlier one set.
PLAN_OPTIONS: list[PlanOption] = [
    PlanOption("suite", SuiteOption, None, _field("suite", lambda v: v or "")),
    PlanOption("frameworks", FrameworksOption, None, _field("frameworks")),
    PlanOption("param", ParamOption, [], _field("params", tuple)),
    PlanOption("repeat", RepeatOption, None, _field("repeat")),
    PlanOption("warmup", WarmupOption, None, _field("warmup")),
    PlanOption("device", DeviceOption, Device("cpu"), _field("device", _value)),
    PlanOption("threads", ThreadsOption, None, _field("threads")),
    PlanOption("precision", PrecisionOption, Precision("fp32"), _field("precision", _value)),
    PlanOption("baseline", BaselineOption, None, _field("baseline")),
    PlanOption("timeout", TimeoutOption, None, _field("timeout_s")),
    PlanOption("data_dir", DataDir, None, _field("data_dir", _data_dir)),
    PlanOption("smoke", SmokeOption, False, _field("smoke")),
    PlanOption("cache", CacheOption, "cold", _field("cache")),
    PlanOption("profile", ProfileOption, False, _profile),
    PlanOption("profile_steps", ProfileStepsOption, None, _profile),
]

RoundsOption = Annotated[
    Optional[int],
    typer.Option(
        help="processes per framework (per side in `ab`, per version in `bisect`), run round-robin and pooled "
        "[default: the command's; with --budget: as many as it buys]"
    ),
]
DetectOption = Annotated[
    Optional[str],
    typer.Option(
        "--detect",
        metavar="PCT",
        help="pick the rounds that detect a change of PCT % (from this machine's noise floor: `harness noise`)",
    ),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="validate and print the plan; start nothing")]
PythonOption = Annotated[
    list[str], typer.Option("--python", help="local backend: STACK=PATH interpreter for a stack; repeatable")
]

# How the planned jobs run: the commands that run what they plan take these too.
SESSION_OPTIONS: list[PlanOption] = [
    PlanOption("backend", BackendOption, BackendName("auto"), _field("backend", _value)),
    PlanOption("rounds", RoundsOption, None, _field("rounds")),
    PlanOption("budget", BudgetOption, None, _field("budget")),
    PlanOption("detect", DetectOption, None, _field("detect")),
    PlanOption("results_dir", ResultsDir, None, _field("results_dir", lambda v: v or default_results_dir())),
    PlanOption("quiet", Quiet, False, _field("quiet")),
    PlanOption("processes", ProcessesOption, Processes.fresh, _field("processes", _value)),
    PlanOption("memory", MemoryOption, None, _field("memory")),
    PlanOption("cpus", CpusOption, None, _field("cpus")),
    PlanOption("gpus", GpusOption, None, _field("gpus")),
    PlanOption("transfer", TransferOption, Transfer.auto, _field("transfer", _value)),
    PlanOption("python", PythonOption, [], _field("pythons", tuple)),
    PlanOption("dry_run", DryRunOption, False, _field("dry_run")),
]


@dataclass(frozen=True)
class PlanOptions:
    """What a command line gave the bundles, by option name; `request` and `settings` build from it."""

    given: Mapping[str, Any]
    bundle: tuple[PlanOption, ...]
    session: tuple[PlanOption, ...]

    def request(self, **fixed: Any) -> PlanRequest:
        """The PlanRequest of these options; `fixed`: fields the command sets itself (bisect's framework)."""
        fields: Fields = {}
        for option in self.bundle:
            option.into(fields, self.given[option.name], self.given)
        return PlanRequest(**(fields | fixed))

    def settings(self, **fixed: Any) -> Settings:
        fields: Fields = {"results_dir": default_results_dir(), "wheelhouse": default_wheelhouse()}
        for option in self.session:
            option.into(fields, self.given[option.name], self.given)
        return Settings(**(fields | fixed))

    def __getitem__(self, name: str) -> Any:
        return self.given[name]


F = TypeVar("F", bound=Callable[..., Any])


def plans(*, skip: Collection[str] = (), session: bool = True) -> Callable[[F], F]:
    """Give the decorated command the plan's options (and, with `session`, the session's), less those it
    `skip`s (it declares its own, or cannot honour them), as one keyword argument `plan: PlanOptions`."""

    def decorate(command: F) -> F:
        own = inspect.signature(command, eval_str=True)
        bundle = tuple(o for o in PLAN_OPTIONS if o.name not in skip)
        extra = tuple(o for o in SESSION_OPTIONS if o.name not in skip) if session else ()
        mine = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own.parameters.values() if p.name != "plan"]
        added = [
            inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default, annotation=o.annotation)
            for o in (*bundle, *extra)
        ]
        clash = {p.name for p in mine} & {p.name for p in added}
        if clash:
            raise TypeError(f"{command.__name__} declares {sorted(clash)} itself: skip them in plans(skip=...)")
        defaults = {o.name: o.default for o in (*PLAN_OPTIONS, *SESSION_OPTIONS)}

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in [p.name for p in added]}
            # An option a command skips keeps its default, so `request` builds every field the same way.
            options = PlanOptions(defaults | given, bundle, extra)
            return command(plan=options, **kwargs)

        signature = own.replace(parameters=[*mine, *added])
        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        del wrapper.__wrapped__  # Typer must read the signature above, not the wrapped function's
        return wrapper  # type: ignore[return-value]

    return decorate


class Variant(str, Enum):
    cpu = "cpu"
    cuda12 = "cuda12"


class ProfileSide(str, Enum):
    both = "both"
    baseline = "baseline"
    candidate = "candidate"


FormatOption = Annotated[Format, typer.Option("--format", help="output format")]


WheelhouseOption = Annotated[
    Optional[Path],
    typer.Option(help="build missing images only from the wheels in DIR, no index; default $HARNESS_WHEELHOUSE"),
]
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
