"""A session's fork servers, shared by its sides wherever the code they run before forking is the same.

Why share: a side's forked rounds are all children of one server, so whatever the server passes on
(the physical pages its imports landed in, its heap's layout) marks every round of that side and
none of the other's: in `harness ab` that is a difference between the sides the code did not make,
and the rounds cannot average it out (2 of 20 JAX A/A sessions called a change with a server per
side, against 0 of 20 with fresh processes; docs/method.md). With one server for both sides, its
mark falls on A's and B's rounds alike and, the rounds alternating, cancels in the comparison.

A server runs the `suites` code of one checkout before it forks (the job spec reader, the settings
that shape the import, the adapter). It forks another checkout's job only when every file it
loaded is byte for byte the same there; its children then import their own checkout's `suites` from
scratch (suites/runtime/fork_server.py). A checkout whose files differ gets a server of its own.
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
    the environment but for the checkout's own folder); each serves every checkout whose code matches."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, list[_Entry]] = {}

    def server_for(self, key: Hashable, root: str, start: Callable[[], ForkServer | None]) -> ForkServer | None:
        """The server for a job of `key` from the checkout `root` (started by `start` when none fits), or None."""
        entries = self._entries.setdefault(key, [])
        for entry in entries:
            if root in entry.roots or (entry.server is not None and same_code(entry.server, root)):
                entry.roots.add(root)
                if entry.server is not None and not entry.server.alive():
                    entry.server.close()
                    entry.server = None  # every side it served runs fresh from now: the sides stay alike
                return entry.server
        entry = _Entry(start(), {root})
        entries.append(entry)
        return entry.server

    def servers(self) -> list[ForkServer]:
        return [entry.server for entries in self._entries.values() for entry in entries if entry.server is not None]

    def close(self) -> None:
        for server in self.servers():
            server.close()
        self._entries = {}
