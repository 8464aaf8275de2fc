"""What a finished run means for the shell: the exit codes `run`, `reproduce` and `main` share."""

from __future__ import annotations

from harness import assessment
from harness.assessment import Assessment
from harness.run_reader import Run

BAD_INPUT = 2  # a one-line message, nothing started
INTERRUPTED = 130  # the shell's convention for SIGINT


def run_exit_code(loaded: Run, judged: Assessment | None = None) -> int:
    """0: every job ok or skipped, every check passed, every number plausible (`Assessment.passed`);
    130 interrupted; else 1. `judged`: the assessment the command rendered from (else made here)."""
    judged = assessment.of(loaded, judged)
    if judged.interrupted:
        return INTERRUPTED
    return 0 if judged.passed else 1
