"""Options several commands share beyond the plan's and the session's (those are the bundles of
plan_options.py): declared once, so every command spells, validates and documents `--format`,
`--fail-above`, `--stacks`... the same way."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.report.exports import Format


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
