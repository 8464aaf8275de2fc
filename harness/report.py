"""`harness report RUN`: a self-contained folder with report.md (ready to paste) and figures."""

from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from harness.environment_view import environment_rows
from harness.exports import Format, render_run
from harness.figures import write_figures
from harness.runs import Run
from suites.runtime.files import write_text_atomic

FAIRNESS_PREFIXES = ("settings.", "precision.", "variables.", "machine.cpu.", "device.")


def environment_markdown(run: Run, only: tuple[str, ...] | None = None) -> str:
    frameworks, rows = environment_rows(run)
    table = [
        [f"**{key}**" if differs else key] + [f"**{v}**" if differs else v for v in values]
        for key, values, differs in rows
        if only is None or key.startswith(only)
    ]
    return tabulate(table, headers=["field"] + frameworks, tablefmt="github", disable_numparse=True)


def write_report(run: Run, out: Path, figures: bool = True) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    parts = [f"# {run.summary.get('suite')} - run {run.summary.get('run_id')}", ""]
    parts.append(render_run(run, Format.markdown))
    if figures:
        images = write_figures(run, out / "figures")
        if images:
            parts += ["", "## Figures", ""] + [f"![{p.stem}](figures/{p.name})" for p in images]
    parts += [
        "",
        "## Fairness settings",
        "",
        "Precision, threads and device of every job; **bold** rows differ between frameworks.",
        "",
        environment_markdown(run, FAIRNESS_PREFIXES),
        "",
        "## Environment",
        "",
        environment_markdown(run),
        "",
    ]
    path = out / "report.md"
    write_text_atomic(path, "\n".join(parts))
    return path
