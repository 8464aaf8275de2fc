"""One home for machine-wide state: what stays valid across results folders, keyed by what makes it valid.

A results folder holds runs; what belongs to the machine rather than to a run lives here, so a
new `--results-dir` neither recalibrates nor rebuilds:

    $HARNESS_CACHE_HOME               (default $XDG_CACHE_HOME/harness, else ~/.cache/harness)
      calibration/<fingerprint>.json  ceilings per machine fingerprint (calibration.fingerprint)
      calibration/<fingerprint>.lock  held while that fingerprint is being measured
      calibration/runs/<run-id>/      the calibration runs the ceilings came from
      venvs/<stack>-<variant>-<lock>/ the Slurm backend's stack venvs (built under their own flock)
      compile/<stack>-<variant>-<lock>/<stack>/  warm compiler caches (--cache warm)
      bisect-venvs/<stack>-<lock>/    `harness bisect`'s venvs, one per generated lock

`<lock>` is the first 12 hex digits of the sha256 of the stack's lock file (as in the image tag
and harness/backends/slurm/script.py's Stack.name): a changed lock gets a fresh folder, an unchanged one is
reused. Everything is created on first use, folder by folder, never through a symbolic link; what
must be built once (a calibration) is built under an flock, so concurrent harnesses wait for one
another instead of both measuring (and disturbing each other) or racing on one file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.safe_files import flock_file
from harness.text.escape import plain

ENV_VAR = "HARNESS_CACHE_HOME"
CALIBRATION, RUNS, VENVS, COMPILE, BISECT = "calibration", "runs", "venvs", "compile", "bisect-venvs"


def home(environ: Mapping[str, str] | None = None) -> Path:
    """The cache home named by the environment (not created here); a bad value is one HarnessError."""
    env = os.environ if environ is None else environ
    if (given := env.get(ENV_VAR, "")).strip():
        return _check(given, ENV_VAR)
    xdg = env.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative XDG_CACHE_HOME is invalid and is ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) and "\0" not in xdg else _user_home(env) / ".cache"
    return _check(str(base / "harness"), f"the default cache home (set {ENV_VAR} to choose another)")


def _user_home(env: Mapping[str, str]) -> Path:
    if (text := env.get("HOME", "")) and os.path.isabs(text):
        return Path(text)
    try:
        return Path.home()
    except RuntimeError:
        raise HarnessError(
            f"no home folder to keep the harness's caches in; set {ENV_VAR} to an absolute path"
        ) from None


def _check(text: str, source: str) -> Path:
    shown = plain(text)
    if "\0" in text or "\n" in text:
        raise HarnessError(
            f"{source}={shown!r} is not a path; set {ENV_VAR} to an absolute folder, e.g. /var/tmp/harness"
        )
    if not os.path.isabs(text):
        raise HarnessError(f"{source}={shown!r} is not an absolute path; give one, e.g. {ENV_VAR}=$HOME/.cache/harness")
    path = Path(os.path.normpath(text))
    if ".." in Path(text).parts:
        raise HarnessError(f"{source}={shown!r} goes up with '..'; give the folder itself, e.g. {path}")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as error:
        raise HarnessError(f"{source}={shown!r} cannot be used ({error.strerror}); choose another folder") from None
    if stat.S_ISLNK(info.st_mode):
        target = plain(os.path.realpath(path))
        raise HarnessError(
            f"{source}={shown!r} is a symbolic link (to {target}); set {ENV_VAR}={target} to use that folder itself"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise HarnessError(f"{source}={shown!r} is not a folder; remove it or choose another {ENV_VAR}")
    return path


def folder(*parts: str, environ: Mapping[str, str] | None = None) -> Path:
    """`<home>/<parts...>`, created level by level as folders of our own (a planted link is refused)."""
    path = root = home(environ)
    _make(path, top=True)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\0" in part:
            raise HarnessError(f"{plain(part)!r} is not a folder name inside the cache home")
        path = path / part
        sys.audit("harness.write", str(root), str(path))  # tests/test_planted_links.py lists writes
        _make(path, top=False)
    return path


def _make(path: Path, *, top: bool) -> None:
    try:
        # Private to this user (the XDG spec's mode): runs of other users have no business here.
        path.mkdir(mode=0o700, parents=top, exist_ok=True)
        info = os.lstat(path)
    except OSError as error:
        raise HarnessError(
            f"{path}: cannot create the harness cache home ({error.strerror}); set {ENV_VAR} to a writable folder"
        ) from None
    if not stat.S_ISDIR(info.st_mode):  # a symbolic link (mkdir's exist_ok follows it) or a file
        raise HarnessError(f"{path} is not a plain folder (a link or a file); remove it, the harness recreates it")


def stack_key(stack: str, variant: str, lock_hash: str) -> str:
    """`<stack>-<variant>-<lock hash[:12]>`: what a venv or a compile cache is valid for (Stack.name's form)."""
    for part in (stack, variant, lock_hash):
        if not part.replace("_", "").isalnum() or not part.isascii():
            raise HarnessError(f"{plain(part)!r} cannot name a folder in the cache home")
    return f"{stack}-{variant}-{lock_hash[:12]}"


def calibration_dir(environ: Mapping[str, str] | None = None) -> Path:
    return folder(CALIBRATION, environ=environ)


def calibration_runs_dir(environ: Mapping[str, str] | None = None) -> Path:
    return folder(CALIBRATION, RUNS, environ=environ)


def venvs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the Slurm backend keeps its stack venvs (created by the venv build itself, on first use)."""
    return home(environ) / VENVS


def bisect_venvs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where `harness bisect` keeps one venv per generated lock (harness/execute/bisect/envs.py)."""
    return folder(BISECT, environ=environ)


def compile_cache_dir(stack: str, variant: str, lock_hash: str, environ: Mapping[str, str] | None = None) -> Path:
    """The warm compiler caches for one stack and lock (the backends add a `<stack>/` folder below)."""
    return folder(COMPILE, stack_key(stack, variant, lock_hash), environ=environ)


@contextlib.contextmanager
def locked(path: Path, what: str) -> Iterator[None]:
    """Hold the lock file `path`; wait, saying so, while another harness holds it."""

    def wait(holder: str) -> None:
        print(f"waiting for the {what} that {plain(holder)} is doing", file=sys.stderr, flush=True)

    with flock_file(path, what, wait, mode=0o600):
        yield
