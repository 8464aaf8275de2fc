"""What the harness's exit status means, in one place for every command (judge/assessment.py decides
which applies to a run; cli/ only passes it on). BAD_INPUT (2, a one-line refusal) is core/errors.py's."""

from __future__ import annotations

INTERRUPTED = 130  # the shell's convention for SIGINT
FAILED = 1
# Measured, but the machine disturbed it (contended or throttled beyond the rule) and nothing else
# is wrong: "rerun on a quiet machine", which a script must tell from FAILED ("the code is wrong").
DISTURBED = 3
# When several apply, the most telling wins: an interruption, then a wrong answer, then a busy machine.
_PRECEDENCE = (INTERRUPTED, FAILED, DISTURBED)


def worst(*codes: int) -> int:
    """The exit status of several outcomes together (`ab`'s two sides and its gate, a compare's rows)."""
    for code in _PRECEDENCE:
        if code in codes:
            return code
    return max(codes, default=0)  # another non-zero status (2) passes through; else 0
