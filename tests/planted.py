"""A private copy of the project with a suite planted in it, as a careless contributor would write it.

The copy holds harness/ and suites/ (a few hundred KB), so the real CLI, the real job runner and
the real frameworks run it through the local backend, and nothing planted ever lands in the repo.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def planted_repo(
    root: Path,
    suites: dict[str, dict[str, str]],
    edits: dict[str, tuple[str, str]] | None = None,
    parts: tuple[str, ...] = ("harness", "suites"),
) -> Path:
    """Copy the project's `parts` under `root` (add "images" where the stack locks are read); `suites`:
    name -> {file name: source}; `edits`: path -> (old, new)."""
    repo = root / "repo"
    for package in parts:
        shutil.copytree(REPO / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, files in suites.items():
        folder = repo / "suites" / name
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        for file, source in files.items():
            (folder / file).write_text(source)
    for path, (old, new) in (edits or {}).items():
        target = repo / path
        text = target.read_text()
        assert old in text, f"{path} no longer contains {old!r}: update the planted edit"
        target.write_text(text.replace(old, new))
    return repo


def harness_in(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(repo), **(env or {})},
    )
