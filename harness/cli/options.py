"""Options and defaults shared by several commands: declared once, so every command spells,
validates and documents `--device`, `--backend`, `--results-dir`... the same way."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

# The bundles' own options (cli/plan_options.py), for the commands that take one of them alone.
from harness.cli.plan_options import (
    PROFILE_STEPS,
    BackendName,
    BackendOption,
    BudgetOption,
    CpusOption,
    DataDir,
    Device,
    DeviceOption,
    GpusOption,
    MemoryOption,
    Precision,
    PrecisionOption,
    Processes,
    ProcessesOption,
    ProfileOption,
    ProfileStepsOption,
    Quiet,
    ResultsDir,
    ThreadsOption,
    Transfer,
    TransferOption,
    absolute,
    default_data_dir,
    default_results_dir,
    default_wheelhouse,
    folder_option,
    profile_steps,
)
from harness.report.exports import Format

__all__ = [
    "BackendName",
    "BackendOption",
    "BudgetOption",
    "CpusOption",
    "DataDir",
    "Device",
    "DeviceOption",
    "GpusOption",
    "MemoryOption",
    "PROFILE_STEPS",
    "Precision",
    "PrecisionOption",
    "Processes",
    "ProcessesOption",
    "ProfileOption",
    "ProfileStepsOption",
    "Quiet",
    "ResultsDir",
    "ThreadsOption",
    "Transfer",
    "TransferOption",
    "absolute",
    "default_data_dir",
    "default_results_dir",
    "default_wheelhouse",
    "folder_option",
    "profile_steps",
    "FailAboveOption",
    "FormatOption",
    "JunitOption",
    "ProfileSide",
    "RunRef",
    "StacksOption",
    "Variant",
    "VariantOption",
    "WheelhouseOption",
]


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
