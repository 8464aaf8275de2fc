"""The `harness` command: one Typer app, each command group in its own module of this package.

Every user-facing problem is a HarnessError, caught once in `main`: one line on stderr,
exit code 2, no traceback. Typer's own usage errors take the same one-line form.
"""

from __future__ import annotations

import contextlib
import errno
import io
import signal
import sys
from types import FrameType

import typer
from typer.exceptions import TyperException

from harness.cli.ab import ab_command
from harness.cli.bisect import bisect
from harness.cli.catalog import describe, list_suites
from harness.cli.checks import doctor, selftest
from harness.cli.cluster import collect_command, export_app
from harness.cli.data import app as data_app
from harness.cli.history import history
from harness.cli.noise import noise
from harness.cli.publish import publish
from harness.cli.reproduce import reproduce
from harness.cli.results import compare, report, show
from harness.cli.run import calibrate_command, run
from harness.cli.stacks import build, clean, wheelhouse
from harness.core.errors import BAD_INPUT, HarnessError
from harness.core.exit_codes import INTERRUPTED
from harness.core.safe_files import FULL
from harness.text.escape import plain

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Compare ML frameworks fairly: synchronised, compile time separated, same data and precision.",
)
# In the order `harness --help` lists them: discover, run, read back, stacks, machines, elsewhere.
app.command("list")(list_suites)
app.command("describe")(describe)
app.command("run")(run)
app.command("calibrate")(calibrate_command)
app.command("show")(show)
app.command("compare")(compare)
app.command("history")(history)
app.command("noise")(noise)
app.command("bisect")(bisect)
app.command("ab")(ab_command)
app.command("report")(report)
app.command("publish")(publish)
app.command("reproduce")(reproduce)
app.command("build")(build)
app.command("wheelhouse")(wheelhouse)
app.command("clean")(clean)
app.command("doctor")(doctor)
app.command("selftest")(selftest)
app.add_typer(data_app, name="data")
app.add_typer(export_app, name="export")
app.command("collect")(collect_command)


def _lenient_streams() -> None:
    """The terminal end of the one rule for text leaving the harness (escape.utf8 is the files' end):
    a character the terminal's encoding cannot take is written as a visible escape, never a crash
    half-way through a table."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C from here on: the command unwinds (a job stopped, finished ones kept) and
    exits INTERRUPTED. harness/__init__.py covered the imports before this (exit 130 at once); the
    runner installs its own while jobs run and puts this one back after."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    _lenient_streams()
    try:
        if argv is None:  # the command itself (not a test calling main): its own process's SIGTERM
            with contextlib.suppress(ValueError):  # not the main thread: nothing to install
                signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        code = app(args=args, prog_name="harness", standalone_mode=False)
    except HarnessError as error:
        typer.echo(f"error: {plain(error)}", err=True)
        sys.exit(getattr(error, "exit_code", BAD_INPUT))  # a full disk is not bad input (safe_files.NoSpace)
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:  # a path option or argument the file system cannot hold
            typer.echo(
                f"error: {plain(error.filename or 'a path')}: a name in it is longer than the file system allows "
                "(255 bytes a name); give a shorter path",
                err=True,
            )
            sys.exit(BAD_INPUT)
        if error.errno not in FULL:
            raise
        # A write not made through safe_files met a full disk: still one line, not a traceback.
        typer.echo(
            f"error: {plain(error.strerror)} ({plain(error.filename or '')}); free some space and run again", err=True
        )
        sys.exit(1)
    except TyperException as error:
        commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
        command = next((a for a in args if a in commands), None)
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        if not message.strip():  # no arguments at all: the help was shown, which is the answer
            sys.exit(0)
        hint = f"harness {command} --help" if command else "harness --help"
        typer.echo(f"error: {message} (see `{hint}`)", err=True)
        sys.exit(BAD_INPUT)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
