"""One venv per generated lock, built like the images: `pip install --require-hashes --only-binary=:all:`.

The venv is named by its lock's hash and reused while the copy of the lock inside it (written last,
after pip succeeded, as the Dockerfiles and the Slurm venvs do) still has that hash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.store.images import pip_sources, sha256_file
from harness.text.escape import plain

INSTALL_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Env:
    stack: str
    lock_hash: str
    folder: Path

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    @property
    def ready(self) -> bool:
        lock = self.folder / "lock.txt"
        return self.python.exists() and lock.is_file() and sha256_file(lock) == self.lock_hash

    def record(self) -> dict[str, Any]:
        """The result's `image` field, in the docker backend's shape (stack, variant, lock hash)."""
        return {
            "runtime": "venv",
            "id": str(self.folder),
            "stack": self.stack,
            "variant": "cpu",
            "lock_hash": self.lock_hash,
        }


def env_for(stack: str, lock_text: str) -> Env:
    """The venv of one generated lock, in the cache home: every results folder's bisects share it."""
    digest = hashlib.sha256(lock_text.encode()).hexdigest()
    return Env(stack, digest, cache_home.bisect_venvs_dir() / f"{stack}-{digest[:12]}")


def venv_command(folder: Path, with_pip: bool) -> list[str]:
    # A venv's own pip (ensurepip) costs 5.6 s a version here and installs nothing the job uses.
    return [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(folder)]


def install_command(
    python: Path, lock: Path, find_links: list[Path], no_index: bool, with_pip: bool = True
) -> list[str]:
    """pip install of `lock` into the venv of `python`: by the venv's own pip, or (with_pip False) by
    this interpreter's pip pointed at it."""
    pip = [str(python), "-m", "pip"] if with_pip else [sys.executable, "-m", "pip", "--python", str(python)]
    cmd = [*pip, "install", "--require-hashes", "--only-binary=:all:"]
    return cmd + ["--disable-pip-version-check", "--quiet", "-r", str(lock), *pip_sources(find_links, no_index)]


def ensure_env(env: Env, lock: Path, label: str, find_links: list[Path], no_index: bool) -> bool:
    """Builds the venv from `lock` unless it is ready; True when it was built now."""
    if sha256_file(lock) != env.lock_hash:
        raise HarnessError(f"{lock} changed while the bisect ran; start it again")
    if env.ready:
        return False
    if sys.version_info[:2] != (3, 11):
        raise HarnessError("harness bisect builds CPython 3.11 venvs (the locks' interpreter); run harness with 3.11")
    shutil.rmtree(env.folder, ignore_errors=True)
    env.folder.parent.mkdir(parents=True, exist_ok=True)
    # Where this interpreter has pip, it installs into a venv made without one (`pip --python`).
    own_pip = importlib.util.find_spec("pip") is None
    steps = [venv_command(env.folder, own_pip), install_command(env.python, lock, find_links, no_index, own_pip)]
    for cmd in steps:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            shutil.rmtree(env.folder, ignore_errors=True)
            raise HarnessError(f"{label}: building its venv took over {INSTALL_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            shutil.rmtree(env.folder, ignore_errors=True)
            lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
            why = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "no message")
            raise HarnessError(
                f"{label}: its venv could not be built from {lock.name} ({plain(why)}); the other packages stay "
                "as the stack locked them, so a version needing other dependencies cannot be bisected this way"
            )
    shutil.copyfile(lock, env.folder / "lock.txt")  # last: the readiness mark
    return True
