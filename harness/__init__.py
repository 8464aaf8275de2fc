"""Host side of the benchmark harness: plans jobs, runs them isolated, reads JSON, reports.

Never imports a framework: everything it knows about a job comes from the result file.

Launched as the `harness` command (or `python -m harness.cli`), this file is the first of the
harness that Python runs, before the second of imports the command needs: SIGTERM there ended the
process by the signal (exit -15), not with the README's 130. So the command's first handler is
installed here, for the command alone (never in a process that merely imports the package: tests,
the reaper, a fork server); `harness.cli.main` replaces it once the command can unwind cleanly.
"""

import contextlib
import os
import signal
import sys

__version__ = "0.1.0"

INTERRUPTED = 130  # harness.judge.assessment.INTERRUPTED, not imported here: nothing slow before the handler
CLI_MODULES = ("harness.cli", "harness.cli.__main__")


def launched_as_cli(argv: list[str], orig_argv: list[str]) -> bool:
    """Whether this process is the `harness` command: its script, or `python -m harness.cli`."""
    if argv and os.path.basename(argv[0]) == "harness":
        return True
    return any(flag == "-m" and module in CLI_MODULES for flag, module in zip(orig_argv, orig_argv[1:], strict=False))


def _interrupted_before_start(signum: int, frame: object) -> None:
    """SIGTERM while the command is still importing: nothing has started, so nothing to keep or to
    clean up; the README's exit status for an interrupted command, at once."""
    os.write(2, b"aborted\n")
    os._exit(INTERRUPTED)


if launched_as_cli(sys.argv, getattr(sys, "orig_argv", [])):
    with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to install
        signal.signal(signal.SIGTERM, _interrupted_before_start)
