"""Whether a suites/ tree (a checkout's folder, or a commit's) is one `harness ab` may run.

A side's jobs import the `suites` package from the tree given; if it is not a package of its own
(no `__init__.py`), Python finds the installed one instead and the side silently runs other code.
A link inside it could make a job read (and its digest hash) files outside the tree, and a FIFO or
a folder named `*.py` would hang or crash the digest. So a tree holds folders and regular files
only, with the package's two entry files, and is refused, in one line, before anything runs.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.safe_files import kind
from harness.text.escape import plain

ENTRY_FILES = ("__init__.py", "__main__.py")
_REGULAR_MODES = ("100644", "100755")  # git's modes of a plain file; 120000 is a link, 160000 a submodule


def folder_problem(suites: Path) -> str | None:
    """Why the folder `suites` cannot be run as a side, or None. Links are never followed."""
    try:
        top = os.lstat(suites)
    except OSError:
        return "has no suites/ folder"
    if not stat.S_ISDIR(top.st_mode):
        return f"has a {kind(top.st_mode)} at suites/, not a folder"
    for name in ENTRY_FILES:
        try:
            mode = os.lstat(suites / name).st_mode
        except OSError:
            return f"has no suites/{name}: not the suites package"
        if not stat.S_ISREG(mode):
            return f"has a {kind(mode)} at suites/{name}, not a file"
    for folder, dirs, files in os.walk(suites):  # os.walk never descends into a linked folder
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            path = Path(folder, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return f"has a {kind(mode)} at {plain(path.relative_to(suites.parent))}; a suites tree holds folders and files only"
    return None


def revision_problem(repo: Path, sha: str) -> str | None:
    """Why `suites/` as committed at `sha` cannot be run as a side, or None."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "ls-tree", "-r", "-z", "--full-tree", sha, "--", "suites"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot be listed ({plain(error)})"
    if proc.returncode != 0:
        return "cannot be listed (git ls-tree failed)"
    paths = set()
    for entry in proc.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        path = raw.decode("utf-8", "backslashreplace")
        if (mode := meta.split(b" ")[0].decode("ascii", "replace")) not in _REGULAR_MODES:
            what = "link" if mode == "120000" else "submodule" if mode == "160000" else f"entry of mode {mode}"
            return f"has a {what} at {plain(path)}; a suites tree holds folders and files only"
        paths.add(path)
    missing = [name for name in ENTRY_FILES if f"suites/{name}" not in paths]
    return f"has no suites/{missing[0]}: not the suites package" if missing else None


def check_folder(suites: Path, given: str) -> None:
    if problem := folder_problem(suites):
        raise HarnessError(
            f"{plain(given)} {problem}; give a checkout of this project (`git worktree add DIR REV` makes one) "
            "or a git revision"
        )
