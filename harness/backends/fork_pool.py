"""A session's fork servers, shared by its sides wherever the code they run before forking is the same.

Why share: a side's forked rounds are all children of one server, so whatever the server passes on
(the physical pages its imports landed in, its heap's layout) marks every round of that side and
none of the other's: in `harness ab` that is a difference between the sides the code did not make,
and the rounds cannot average it out. With one server for both sides, its mark falls on A's and
B's rounds alike and, the rounds alternating, cancels in the comparison. (It did not change the JAX
A/A record on the development machine, 2 of 20 either way: what still differs between the sides'
children is their checkout's folder, which a forked child does not re-randomise; docs/method.md.)

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
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends.fork_server import ForkServer
from harness.core.errors import HarnessError
from harness.core.safe_files import read_bytes

MAX_SOURCE = 16 << 20  # a module file larger than this is not one the servers compare
_NAME = re.compile(r"suites(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")


@dataclass
class _Entry:
    server: ForkServer | None  # None: it could not start, or died; its roots' jobs run fresh
    roots: set[str] = field(default_factory=set)  # the checkouts whose jobs it forks


def same_code(server: ForkServer, root: str) -> bool:
    """Whether every `suites` file the server loaded has the same sha256 below `root` (no link followed)."""
    for name, digest in server.code.items():
        if not _NAME.fullmatch(name) or ".." in name.split("/"):
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
        self._entries: dict[Hashable, _Entry] = {}
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
        """The server for a job of `key` from the checkout `root` (started by `start` on the key's
        first job), or None: run this job fresh."""
        if self.fresh_because is not None:
            return None
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(start(), {root, *self._sides})
            others = sorted(entry.roots - {root})
        elif root not in entry.roots:  # a side that did not join first (harness's own callers all do)
            entry.roots.add(root)
            others = [root]
        else:
            others = []
        for other in others:
            if entry.server is not None and not same_code(entry.server, other):
                self._fresh(f"the suites code the servers run before forking is not the same in {other}")
                return None
        if entry.server is not None and not entry.server.alive():
            entry.server.close()
            entry.server = None  # every side it served runs fresh from now: the sides stay alike
        return entry.server

    def notice(self) -> str | None:
        """Why this session's jobs run fresh, the first time it is asked (once a session), else None."""
        if self._told or self.fresh_because is None:
            return None
        self._told = True
        return self.fresh_because

    def _fresh(self, why: str) -> None:
        if self.fresh_because is None:
            self.fresh_because = why
        for entry in self._entries.values():
            if entry.server is not None:
                entry.server.close()
                entry.server = None

    def servers(self) -> list[ForkServer]:
        return [entry.server for entry in self._entries.values() if entry.server is not None]

    def close(self) -> None:
        for server in self.servers():
            server.close()
        self._entries = {}
