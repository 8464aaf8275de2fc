"""Supervising the N processes of one data-parallel job (suites/contract/ranks.py), for every backend
that starts the ranks itself (local: subprocesses; docker: containers).

A data-parallel job is only as alive as its slowest rank: when one exits non-zero the others block
in a collective that will never complete. So the first failure starts a grace period
(`GRACE_S`) for the others to end by themselves (their own collective timeout, a clean exit),
after which they are killed; the job's timeout kills everything. What happened is told in one line
naming the rank, and the backend records it as the job's status (JobOutcome.status/reason), whatever
rank 0 managed to write.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.core.errors import HarnessError
from suites.contract.ranks import GRACE_S, RankError, fault_from

POLL_S = 0.05
RANK_LOGS = "(each rank's log is in the run's logs/)"  # where a failed job's reason sends the reader


@dataclass
class Supervised:
    exit_codes: list[int | None]  # per rank; None: killed by us (at the grace period's end or the timeout)
    first_failed: int | None  # the rank that failed first, if any did
    timed_out: bool
    killed: list[int]  # ranks still running when we killed them

    @property
    def failed(self) -> bool:
        return self.first_failed is not None or self.timed_out

    def reason(self, timeout_s: float | None = None) -> str | None:
        """One line for the result's reason; None when every rank exited 0."""
        world = len(self.exit_codes)
        several = len(self.killed) > 1
        stopped = (f"; rank{'s' if several else ''} {', '.join(map(str, self.killed))} "
                   f"{'were' if several else 'was'} stopped") if self.killed else ""  # fmt: skip
        if self.first_failed is not None:
            code = self.exit_codes[self.first_failed]
            how = (
                f"exited with code {code}" if code is not None and code >= 0 else f"was killed by signal {-(code or 0)}"
            )
            return f"rank {self.first_failed} of {world} {how}{stopped} {RANK_LOGS}"
        if self.timed_out:
            limit = f" of {timeout_s:g} s" if timeout_s is not None else ""
            return f"the job's timeout{limit} passed with ranks {', '.join(map(str, self.killed))} of {world} still running"
        return None


def supervise(
    polls: Sequence[Callable[[], int | None]],
    kill: Callable[[int], None],
    timeout_s: float | None,
    grace_s: float = GRACE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    ended: Callable[[int], float | None] | None = None,
) -> Supervised:
    """Wait for every rank. `polls[r]()`: rank r's exit code, None while it runs; `kill(r)` ends it
    (and must make its poll answer soon). A rank's failure gives the others `grace_s` to end.

    `ended(r)`: when rank r ended, where the backend knows it. A crashed rank's peers fail moments
    after it (a broken connection), often before the next poll: of the failures one poll finds, the
    first to end is named, not the lowest rank."""
    world = len(polls)
    codes: list[int | None] = [None] * world
    done = [False] * world
    first_failed: int | None = None
    killed: list[int] = []
    deadline = None if timeout_s is None else clock() + timeout_s
    grace_end: float | None = None
    timed_out = False
    while not all(done):
        failures = []
        for r in range(world):
            if done[r]:
                continue
            if (code := polls[r]()) is None:
                continue
            done[r], codes[r] = True, code
            if code != 0:
                failures.append(r)
        if failures and first_failed is None:
            first_failed = min(failures, key=lambda r: (_when(ended, r), r))
            grace_end = clock() + grace_s
        if all(done):
            break
        now = clock()
        over_time = deadline is not None and now >= deadline
        over_grace = grace_end is not None and now >= grace_end
        if over_time or over_grace:
            timed_out = over_time and first_failed is None
            for r in range(world):
                if not done[r]:  # its code stays None: killed by us
                    kill(r)
                    killed.append(r)
            break
        sleep(POLL_S)
    return Supervised(codes, first_failed, timed_out, killed)


def _when(ended: Callable[[int], float | None] | None, rank: int) -> float:
    found = ended(rank) if ended is not None else None
    return found if found is not None else float("inf")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free now on `host` for rank 0 to listen on (another program may take it before rank
    0 does; the job then fails to meet its ranks, and says so)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def rank_log_names(framework: str, rank: int) -> tuple[str, str]:
    """Rank 0 writes the job's usual logs; rank r > 0 its own beside them."""
    stem = framework if rank == 0 else f"{framework}.rank{rank}"
    return f"{stem}.stdout.log", f"{stem}.stderr.log"


def checked_fault(text: str | None) -> str | None:
    """FAULT_VAR from the harness's environment, checked here so a typo is one line before anything is submitted."""
    if not text:
        return None
    try:
        fault_from(text)
    except RankError as error:
        raise HarnessError(str(error)) from None
    return text
