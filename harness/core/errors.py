"""The one user-facing error type: caught once in the CLI, printed as one line, exit code 2."""

BAD_INPUT = 2  # the exit code of a HarnessError: a one-line message, nothing started


class HarnessError(Exception):
    """A problem the user can fix; the message names the problem and the fix."""


class Unreachable(HarnessError):
    """A network or server fault (a mirror down, a 404/500, a body that does not match): one line like
    any HarnessError, but exit 1, because the input was fine and the same command may work later."""

    exit_code = 1


class Disturbed(HarnessError):
    """The machine, not the input: every observation a command needed was contended or throttled, so it
    has nothing it can stand behind. One line like any HarnessError, but exit 3 (DISTURBED, as a run the
    machine disturbed): a script can tell a busy machine from a wrong option."""

    exit_code = 3
