"""Copy a child's output to a log file and, line by line, to the terminal while it runs."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import IO


def pump(source: IO[bytes], log: Path, echo: IO[str] | None) -> threading.Thread:
    def copy() -> None:
        with log.open("wb") as sink:
            for line in iter(source.readline, b""):
                sink.write(line)
                sink.flush()
                if echo is not None:
                    echo.write("  " + line.decode("utf-8", "replace"))
                    echo.flush()
        source.close()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def tail(path: Path, lines: int = 30, max_chars: int = 4000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-max_chars:]


def stdout_echo(enabled: bool) -> IO[str] | None:
    return sys.stdout if enabled else None
