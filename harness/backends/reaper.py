"""Removes the job containers (volumes, and a data-parallel job's network) of a harness that died without removing them itself.

Ctrl-C, SIGTERM and SIGHUP let the harness remove its container on the way out; SIGKILL (or an
out-of-memory kill of the harness) does not. So the docker backend starts this small watcher in a
session of its own (terminal signals do not reach it) and tells it, through a pipe, each container
and volume before it is created and again once it is removed. When the pipe closes -- the harness
ended, however it ended -- the watcher removes whatever is still listed, and exits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import IO


class Reaper:
    """The harness's end of the pipe; a watcher that cannot be started or written to is skipped."""

    def __init__(self) -> None:
        self._pipe: IO[str] | None = None
        self._proc: subprocess.Popen[str] | None = None

    def _send(self, line: str) -> None:
        if self._proc is None or self._proc.poll() is not None:
            env = dict(os.environ)
            root = str(Path(__file__).resolve().parents[2])  # the folder holding the harness package
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "harness.backends.reaper"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    text=True,
                    env=env,
                )
            except OSError:
                return
            self._pipe = self._proc.stdin
        with contextlib.suppress(OSError, ValueError):
            assert self._pipe is not None
            self._pipe.write(line + "\n")
            self._pipe.flush()

    def track(self, kind: str, name: str) -> None:
        self._send(f"+{kind} {name}")

    def untrack(self, kind: str, name: str) -> None:
        self._send(f"-{kind} {name}")


def main() -> int:
    live: dict[str, set[str]] = {"container": set(), "volume": set(), "network": set()}
    for line in sys.stdin:
        sign, (kind, _, name) = line[:1], line.strip()[1:].partition(" ")
        if kind in live and name:
            (live[kind].add if sign == "+" else live[kind].discard)(name)
    if not any(live.values()):
        return 0
    import docker

    client = docker.from_env(timeout=60)
    for collection, names in ((client.containers, live["container"]), (client.volumes, live["volume"])):
        for name in names:
            with contextlib.suppress(Exception):
                collection.get(name).remove(force=True)
    for name in live["network"]:  # last: a network with containers on it cannot be removed
        with contextlib.suppress(Exception):
            client.networks.get(name).remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
