"""Progress of a long `harness publish`, one line on stderr at a time.

A results folder of 1,500 runs takes minutes; without a word the command looks hung. Each step
says what it is doing and how far it got (`publish: suite xla: run pages 300/1500 (95 s)`), at most
one line every `every` seconds for a step, and its last count always, so a log stays short. A small
folder (under SHOW_FROM entries, written in a second or two) says nothing unless stderr is a
terminal: there is nothing to watch, and scripts read stderr for the skipped folders. Text from a
run file (a suite's name) is made inert by the caller before it gets here.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

Clock = Callable[[], float]
SHOW_FROM = 200  # entries in the results folder (as `harness history` counts them)


class Progress:
    def __init__(self, stream: TextIO | None = None, every: float = 2.0, clock: Clock = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.clock = clock
        self.started = clock()
        self.loud = False  # until `expect` sees a large folder or a terminal
        self._said = -float("inf")

    def expect(self, results_dir: Path) -> None:
        """Speak for a large results folder, or on a terminal."""
        try:
            entries = len(os.listdir(results_dir))
        except OSError:
            entries = 0  # collect() says why, in its own words
        self.loud = entries >= SHOW_FROM or self.stream.isatty()

    def _say(self, text: str) -> None:
        self._said = self.clock()
        if self.loud:
            print(f"publish: {text} ({self._said - self.started:.0f} s)", file=self.stream, flush=True)

    def step(self, what: str, done: int, total: int) -> None:
        """`done` of `total` items of step `what`: said when `every` seconds passed, and at the end."""
        if done >= total or self.clock() - self._said >= self.every:
            self._say(f"{what} {done}/{total}")

    def note(self, text: str) -> None:
        """A step without a count (said at once)."""
        self._say(text)
