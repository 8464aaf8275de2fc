"""The modules a reader follows through one `harness run`: those whose code runs on the way.

Runs the CLI in this process under a profiler and lists every harness module that had one of its
functions called after the command started (module-level code that only defines things does not
count; a module imported but never called is not on the path). A folder of registered plugins
(judge/guards/: every guard runs on every run) is one stop: its registry and the modules it finds. docs/extending.md lists the
result as "the path of one run", and tests/test_run_path.py keeps that list true.

    python benchmarks/run_path.py                      # a local xla run, numpy and jax, table output
    python benchmarks/run_path.py -- run --suite mnist --frameworks numpy --backend local ...
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HARNESS = str(ROOT / "harness")
# Folders of registered plugins (one module each, one interface, found by convention): a reader
# follows the registry and any one plugin, so the folder counts as one stop on the path.
PLUGIN_PACKAGES = ("harness.judge.guards",)
DEFAULT = [
    "run",
    "--suite",
    "xla",
    "--frameworks",
    "numpy,jax",
    "--backend",
    "local",
    "--param",
    "matrix_size=64",
    "--repeat",
    "3",
    "-q",
]


def modules_on_path(argv: list[str]) -> tuple[dict[str, int], int]:
    """harness module (dotted) -> its line count, for every module whose functions `harness argv` called;
    and the command's exit code."""
    sys.path.insert(0, str(ROOT))
    from harness.cli.main import main

    called: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name != "<module>" and code.co_filename.startswith(HARNESS):
            called.add(code.co_filename)

    saved = sys.argv
    sys.argv = ["harness", *argv]
    sys.setprofile(profile)
    threading.setprofile(profile)
    code = 0
    try:
        main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.argv = saved
    found: dict[str, int] = {}
    for filename in called:
        path = Path(filename)
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for package in PLUGIN_PACKAGES:
            if name.startswith(package + "."):
                name = package  # one stop: the registry and its plugins, which share one interface
        found[name] = found.get(name, 0) + len(path.read_text(encoding="utf-8").splitlines())
    return dict(sorted(found.items())), code


def main() -> None:
    args = sys.argv[1:]
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    argv = args[args.index("--") + 1 :] if "--" in args else DEFAULT
    found, code = modules_on_path(argv)
    if as_json:
        print(json.dumps(found))
    else:
        for name, lines in found.items():
            print(f"{lines:5d}  {name}")
        print(f"{len(found)} modules, {sum(found.values())} lines", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
