"""What a finished run means for the shell: the exit codes `run`, `reproduce` and `main` share."""

from __future__ import annotations

from harness.plausibility import implausible
from harness.report.table import gate_passed
from harness.run_reader import Run

BAD_INPUT = 2  # a one-line message, nothing started
INTERRUPTED = 130  # the shell's convention for SIGINT


def run_exit_code(loaded: Run) -> int:
    """0: every job ok or skipped, every check passed, every number plausible; 130 interrupted; else 1."""
    if loaded.summary.get("interrupted"):
        return INTERRUPTED
    all_ok = all(r["status"] in ("ok", "skipped") for r in loaded.results.values()) and not loaded.problems
    return 0 if all_ok and gate_passed(loaded) and not implausible(loaded) else 1
