"""`harness publish RESULTS_DIR --out SITE`: every run as a static site (open SITE/index.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import default_results_dir
from harness.core.errors import HarnessError
from harness.publish import DEFAULT_MAX_PAIRS, publish_site
from harness.publish.progress import Progress
from harness.text.escape import plain


def publish(
    out: Annotated[Path, typer.Option("--out", help="the site's folder (created; open OUT/index.html)")],
    results_dir: Annotated[
        Optional[Path],
        typer.Argument(
            metavar="RESULTS_DIR", help="the folder of run folders (default: ./results or $HARNESS_RESULTS_DIR)"
        ),
    ] = None,
    max_pairs: Annotated[
        int,
        typer.Option(
            "--max-pairs",
            help="per suite, compare every pair of runs up to this many pairs; beyond it each run with the one "
            "before and with the newest",
        ),
    ] = DEFAULT_MAX_PAIRS,
    workers: Annotated[
        Optional[int],
        typer.Option(
            "--workers",
            help="processes writing the run pages and comparisons (each run's intervals with them); "
            "default: one per CPU this process may use",
        ),
    ] = None,
) -> None:
    """Write a static site: each suite's runs over time with intervals, any two runs compared, every flag shown."""
    if max_pairs < 0:
        raise HarnessError(f"--max-pairs {max_pairs} must be 0 or more")
    if workers is not None and workers < 1:
        raise HarnessError(f"--workers {workers} must be 1 or more (1: everything in this process)")
    results = results_dir or default_results_dir()
    progress = Progress()  # on stderr: a large folder takes minutes
    progress.expect(results)
    published = publish_site(results, out, max_pairs, progress, workers)
    for line in published.skipped:
        typer.echo(plain(line), err=True)
    typer.echo(
        f"site: {plain(published.index)} ({published.runs} runs of {published.suites} suites, "
        f"{published.comparisons} comparisons, {published.bisects} bisects; {len(published.skipped)} folders skipped)"
    )
