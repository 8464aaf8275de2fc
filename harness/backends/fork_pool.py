"""A session's fork servers, shared by its sides wherever the code they run before forking is the same.

Why share: a side's forked rounds are all children of one server, so whatever the server passes on
(the physical pages its imports landed in, its heap's layout) marks every round of that side and
none of the other's: in `harness ab` that is a difference between the sides the code did not make,
and the rounds cannot average it out. With one server for both sides, its mark falls on A's and
B's rounds alike and, the rounds alternating, cancels in the comparison. (It did not change the JAX
A/A record on the development machine, 2 of 20 either way; a copy's forked rounds still ran about
0.7 % apart from the checkout's in 20 of 20 sessions, where fresh processes showed no side, and
moving each child's heap, mappings and small-object blocks at random did not remove it:
docs/method.md, "Forked rounds". Forking stays opt-in.)

A server runs the `suites` code of one checkout before it forks (the job spec reader, the settings
that shape the import, the adapter). It forks another checkout's job only when every file it
loaded is byte for byte the same there; its children then import their own checkout's `suites` from
scratch (suites/runtime/fork_server.py).

Where one server cannot serve every side (the sides' code before the fork differs, or they are
different interpreters or limits: `bisect`'s versions), a server per side would bring back the
mark forking must not leave on one side only; so that session runs every job in a fresh process,
and says why once. A session of one side (`run --rounds`, each `noise` session) always forks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable
from pathlib import Path

from harness.backends.fork_server import ForkServer
from harness.core.errors import HarnessError
from harness.core.safe_files import read_bytes

MAX_SOURCE = 16 << 20  # a module file larger than this is not one the servers compare
_NAME = re.compile(r"suites(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")


def same_code(server: ForkServer, root: str) -> bool:
    """Whether every `suites` file the server loaded has the same sha256 below `root` (no link followed)."""
    for name, digest in server.code.items():
        if not _NAME.fullmatch(name):  # no component starts with a dot: no `..`, nothing hidden
            return False
        try:
            data = read_bytes(Path(root, name), MAX_SOURCE, what="module")
        except (HarnessError, OSError):
            return False
        if hashlib.sha256(data).hexdigest() != digest:
            return False
    return bool(server.code)


class ServerPool:
    """The servers of one session by key (interpreter, framework, the settings that shape the import,
    the environment but for the checkout's own folder); each serves every side of the session."""

    def __init__(self) -> None:
        self._servers: dict[Hashable, ForkServer | None] = {}  # None: it could not start, or died
        self._sides: dict[str, Hashable] = {}  # each side's checkout -> how its backend starts jobs
        self.fresh_because: str | None = None  # set: no job of this session forks, for this reason
        self._told = False

    def join(self, root: str, identity: Hashable) -> None:
        """A side of the session: its checkout, and what its servers would inherit from its backend
        (interpreters, limits). Sides that differ there cannot share a server: all run fresh."""
        if any(theirs != identity for theirs in self._sides.values()):
            self._fresh("the sides run different interpreters or limits")
        self._sides.setdefault(root, identity)

    def server_for(self, key: Hashable, root: str, start: Callable[[], ForkServer | None]) -> ForkServer | None:
        """The server for a job of `key` from the checkout `root`, a side that joined (started by
        `start` on the key's first job), or None: run this job fresh."""
        if self.fresh_because is not None:
            return None
        if key not in self._servers:
            server = self._servers[key] = start()
            for other in sorted(set(self._sides) - {root}):
                if server is not None and not same_code(server, other):
                    self._fresh(f"the suites code the servers run before forking is not the same in {other}")
                    return None
        if (server := self._servers[key]) is not None and not server.alive():
            server.close()
            server = self._servers[key] = None  # every side it served runs fresh from now: the sides stay alike
        return server

    def notice(self) -> str | None:
        """Why this session's jobs run fresh, the first time it is asked (once a session), else None."""
        if self._told or self.fresh_because is None:
            return None
        self._told = True
        return self.fresh_because

    def _fresh(self, why: str) -> None:
        if self.fresh_because is None:
            self.fresh_because = why
        for key, server in self._servers.items():
            if server is not None:
                server.close()
                self._servers[key] = None

    def servers(self) -> list[ForkServer]:
        return [server for server in self._servers.values() if server is not None]

    def close(self) -> None:
        for server in self.servers():
            server.close()
        self._servers = {}
