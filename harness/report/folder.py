"""`harness report RUN`: a self-contained folder with report.md (ready to paste) and figures."""

from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from harness.core.errors import HarnessError
from harness.core.safe_files import real_folder, write_bytes_atomic
from harness.judge.assessment import Assessment
from harness.report.environment import environment_rows
from harness.report.exports import Format, render_run
from harness.report.figures import write_figures
from harness.report.profile_text import profile_markdown
from harness.store.run_folder import Run
from harness.text import escape
from harness.text.escape import utf8

FAIRNESS_PREFIXES = ("settings.", "precision.", "variables.", "machine.cpu.", "device.")


def environment_markdown(run: Run, only: tuple[str, ...] | None = None) -> str:
    frameworks, rows = environment_rows(run)
    md = escape.markdown  # escaped before the bold markers are added, so only the data is inert
    table = [
        [f"**{md(key)}**" if differs else md(key)] + [f"**{md(v)}**" if differs else md(v) for v in values]
        for key, values, differs in rows
        if only is None or key.startswith(only)
    ]
    return tabulate(table, headers=["field"] + [md(fw) for fw in frameworks], tablefmt="github", disable_numparse=True)


def write_report(judged: Assessment, out: Path, figures: bool = True) -> Path:
    # A folder the user named may be a link; one inside the run folder (the default) may not.
    real_folder(out, allow_link=judged.run.path.resolve() not in out.absolute().parents)
    try:
        return _write_report(judged, out, figures)
    except OSError as error:
        raise HarnessError(f"--out {out}: cannot write the report ({error.strerror}); choose another folder") from None


def _write_report(judged: Assessment, out: Path, figures: bool) -> Path:
    run = judged.run
    parts = [f"# {escape.markdown(run.summary.get('suite'))} - run {escape.markdown(run.summary.get('run_id'))}", ""]
    parts.append(render_run(judged, Format.markdown))
    profiles = profile_markdown(judged.breakdowns, judged.run.baseline)
    if profiles:
        parts += ["", profiles]
    if figures:
        images = write_figures(judged, out / "figures")
        if images:
            # file names come from the validated suite name only (figures.py)
            parts += ["", "## Figures", ""]
            for image in images:
                parts += [f"![{escape.markdown(image.alt)}](figures/{image.path.name})", ""]
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
    write_bytes_atomic(path, utf8("\n".join(parts)))
    return path
