"""A comparison of two runs, finished in one place: every medium prints these rows and none assembles its own.

The steps, in order:
1. `compare_runs`: each row's ratio, interval and exact test, Holm-adjusted across the rows; the two
   sides of one `ab` session are tested beyond the margin they recorded (Change.margin);
2. the sequential correction `ab --budget` recorded: the rows judged at the alpha its looks left;
3. the machine's noise floor: a change within the run-to-run noise of runs of this machine is not
   significant (never for the two sides of one session, where drift cancels);
4. the gate (`gate`): the exit status of `--fail-above` and the row each JUnit case fails on.

`harness compare`, `--junit`, `reproduce`, `ab`'s final verdict and the published site's compare
page all call `finish`; two media disagreeing about one pair of runs is a defect. Only `ab`'s
interim looks test a lower step (compare_runs alone, at the look's alpha), and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.judge import noise_floor, records, sequential
from harness.judge.assessment import DISTURBED, FAILED, Assessment, worst
from harness.judge.compare import Comparison, compare_runs

# `--fail-above` over rows it could not judge (README's exit codes): the machine disturbed them, or
# what the runs recorded about judging them cannot be trusted (Comparison.doubts).
UNJUDGED = DISTURBED


def finish(judged_a: Assessment, judged_b: Assessment) -> Comparison:
    """A against B, every step applied (HarnessError when they share nothing to compare). Every
    doubt about the two sides' records is also a warning, so every medium prints it."""
    compared = compare_runs(judged_a, judged_b)
    compared = replace(compared, doubts=records.disagreements(compared.a.summary, compared.b.summary))
    finished = noise_floor.apply(sequential.as_recorded(compared))
    return replace(finished, warnings=[*finished.warnings, *finished.doubts])


@dataclass(frozen=True)
class Gate:
    """The exit status of `--fail-above` over a finished comparison, and why, a line per reason."""

    code: int
    reasons: tuple[str, ...]


def gate(comparison: Comparison, fail_above: float | None) -> Gate:
    """1 on a significant slowdown past `fail_above` or a row with no number on one side, DISTURBED (3)
    when otherwise the machine's disturbance, a doubted record (Comparison.doubts) or a recorded margin
    wider than `fail_above` kept rows from a verdict, else 0 (always 0 without `fail_above`). A gate
    that cannot see a row says so: it is blind there, not passed."""
    if fail_above is None:
        return Gate(0, ())
    codes, reasons = [0], []
    if missing := comparison.without_verdict:
        reasons.append(f"--fail-above cannot judge {len(missing)} row(s) without a verdict ({missing[0].no_verdict})")
    if failed := comparison.failed:
        first = failed[0]
        reasons.append(
            f"{len(failed)} row(s) with no number on one side: {first.framework} {first.metric}: {first.failed}"
        )
        codes.append(FAILED)
    if over := [c for c in comparison.changes if c.failed is None and c.fails(fail_above)]:
        row = max(over, key=lambda c: c.slowdown)
        reasons.append(
            f"significant slowdown above {fail_above:g} %: {row.framework} {row.metric} "
            f"{row.slowdown:.1%} worse (p={row.p_value:.3g}, Holm-adjusted {row.p_adjusted:.3g})"
        )
        codes.append(FAILED)
    if disturbed := comparison.disturbed:
        reasons.append(
            f"--fail-above cannot judge {len(disturbed)} row(s) the machine disturbed "
            f"({disturbed[0].framework} {disturbed[0].metric}: {disturbed[0].excluded}); rerun on a quiet machine"
        )
        codes.append(DISTURBED)
    for doubt in comparison.doubts:
        reasons.append(f"--fail-above cannot trust what the runs recorded: {doubt}")
        codes.append(UNJUDGED)
    masked = [
        c
        for c in comparison.changes
        if c.tested and c.no_verdict is None and c.within_sessions is None and not c.significant
        and 100 * c.margin > fail_above and c.slowdown > fail_above / 100
    ]  # fmt: skip
    if masked:
        row = max(masked, key=lambda c: c.slowdown)
        reasons.append(
            f"--fail-above cannot judge {len(masked)} row(s) within the session's recorded margin "
            f"{row.margin:.1%}, wider than {fail_above:g} %: {row.framework} {row.metric} {row.slowdown:.1%} worse, "
            "not called; rerun the session with a --margin below --fail-above"
        )
        codes.append(UNJUDGED)
    return Gate(worst(*codes), tuple(reasons))
