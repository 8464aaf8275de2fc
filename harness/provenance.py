"""Which code produced a run: the suites' content hash, and the git commit when there is one.

The suites folder is what every job executes (mounted read-only into containers), so its
content hash identifies the measured code even in a tarball or a copy without `.git`; the git
commit, and whether the checkout had uncommitted changes, say where to find it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SUITES = REPO / "suites"
COMMIT = re.compile(r"[0-9a-f]{40}")


def suites_digest(root: Path = SUITES) -> str:
    """sha256 over every .py file under `root` (relative path and bytes), in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or path.is_symlink():
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _git(*args: str) -> str | None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return None
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # reading must never take the index lock
    try:
        proc = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def describe() -> dict[str, Any]:
    """`code` of a run's summary: suites digest, git commit (or None) and whether it was dirty."""
    head = (_git("rev-parse", "HEAD") or "").strip()
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "suites_sha256": suites_digest(),
        "git_commit": head if COMMIT.fullmatch(head) else None,
        "git_dirty": None if status is None else bool(status.strip()),
    }


def problem(code: Any) -> str | None:
    """Why a `code` record read back from disk is malformed, or None."""
    if not isinstance(code, dict):
        return "code: expected an object"
    digest, commit, dirty = code.get("suites_sha256"), code.get("git_commit"), code.get("git_dirty")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        return "code.suites_sha256: expected 64 hex digits"
    if commit is not None and not (isinstance(commit, str) and COMMIT.fullmatch(commit)):
        return "code.git_commit: expected 40 hex digits or null"
    if dirty is not None and not isinstance(dirty, bool):
        return "code.git_dirty: expected true, false or null"
    return None


def label(code: Any) -> str | None:
    """`code: suites 1a2b3c4d5e6f, git 0123abcd (uncommitted changes)` for a report, None if absent."""
    if code is None or problem(code):
        return None
    text = f"code: suites {code['suites_sha256'][:12]}"
    if code.get("git_commit"):
        text += f", git {code['git_commit'][:12]}" + (" (uncommitted changes)" if code.get("git_dirty") else "")
    return text
