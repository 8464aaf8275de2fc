"""Copy a child's output to a log file and, line by line, to the terminal while it runs.

The log is a file the harness created itself (see safe_files.create) and the stderr tail that
goes into a failed result is kept here in memory: nothing the job later plants at a log's path
is ever read or written through.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from typing import IO, BinaryIO

from harness.text.escape import plain

TAIL_BYTES = 16 * 1024
LONGEST_ECHO_LINE = 64 * 1024  # a job printing without newlines must not grow our memory


class Tail:
    """The last bytes a stream carried, for the stderr tail of a failed result."""

    def __init__(self, keep: int = TAIL_BYTES) -> None:
        self.keep = keep
        self.data = bytearray()
        self.lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self.lock:
            self.data += chunk
            if len(self.data) > self.keep:
                del self.data[: len(self.data) - self.keep]

    def text(self, lines: int = 30, max_chars: int = 4000) -> str:
        with self.lock:
            return tail_text(bytes(self.data), lines, max_chars)


def tail_text(data: bytes, lines: int = 30, max_chars: int = 4000) -> str:
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])[-max_chars:]


def pump(chunks: Iterable[bytes], sink: BinaryIO, echo: IO[str] | None, tail: Tail | None = None) -> threading.Thread:
    """A thread copying `chunks` into `sink` (closed at the end), echoing whole lines with controls escaped."""

    def show(line: bytes) -> None:
        nonlocal echo
        if echo is None:
            return
        try:
            echo.write("  " + plain(line.decode("utf-8", "replace")) + "\n")
            echo.flush()
        except (OSError, ValueError):  # the terminal went away (SIGHUP): keep logging, stop echoing
            echo = None

    def copy() -> None:
        pending = b""
        with sink:
            for chunk in chunks:
                sink.write(chunk)
                sink.flush()
                if tail is not None:
                    tail.add(chunk)
                if echo is not None:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        show(line)
                    if len(pending) > LONGEST_ECHO_LINE:
                        show(pending)
                        pending = b""
            if pending:
                show(pending)

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def read_chunks(source: IO[bytes]) -> Iterable[bytes]:
    """What a pipe carries, as it arrives, until the writer closes it."""
    try:
        while True:
            chunk = source.read1(1 << 16)  # type: ignore[attr-defined]
            if not chunk:
                return
            yield chunk
    finally:
        source.close()


def stdout_echo(enabled: bool) -> IO[str] | None:
    return sys.stdout if enabled else None
