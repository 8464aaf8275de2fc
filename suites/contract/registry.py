"""Suites are found by convention: every package `suites/<name>/` with a `spec.py` defining SPEC.

Adding a suite touches no central list. `impl_<framework>.py` in the same folder holds
that framework's implementation, imported only inside the job.

A folder is code someone is still writing: a broken one (a syntax error, an import that fails,
`sys.exit` at import, no SPEC or the wrong one) costs one line on stderr and that suite alone;
every other suite, and every command that does not need the broken one, still works.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from suites.contract.spec import SuiteSpec

SUITES_DIR = Path(__file__).resolve().parent.parent
# Folders under suites/ that are the contract and the job's runtime, not suites.
NOT_SUITES = frozenset({"contract", "runtime"})
_LINE_LIMIT = 300


@dataclass(frozen=True)
class Discovery:
    """The suites that loaded, and each broken folder's one line (its problem and the fix)."""

    suites: dict[str, SuiteSpec] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def _one_line(text: str) -> str:
    """A message from a spec's own code, made safe for one terminal line: no control characters
    (a planted escape sequence must not reach the terminal), and short."""
    flat = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return flat if len(flat) <= _LINE_LIMIT else flat[: _LINE_LIMIT - 3] + "..."


def _import_problem(error: BaseException, where: str) -> str:
    """What went wrong while importing a suite's spec.py, in the user's words."""
    if isinstance(error, SyntaxError):
        return f"{where} has a syntax error at line {error.lineno}: {_one_line(str(error.msg))}"
    if isinstance(error, SystemExit):
        return f"{where} calls sys.exit({_one_line(repr(error.code))}) at import"
    if isinstance(error, ImportError):
        return f"{where} cannot be imported: {_one_line(f'{type(error).__name__}: {error}')}"
    return f"{where} raises {_one_line(f'{type(error).__name__}: {error}')} at import"


def _load(root: Path, package: str, name: str) -> SuiteSpec | str:
    """The folder's SPEC, or its problem and fix as one line."""
    folder = f"{root.name}/{name}"
    where = f"{folder}/spec.py"
    fix = f"fix {where} or move the folder out of {root.name}/"
    if not name.isidentifier():
        return (
            f"{_one_line(folder)}: the folder name is not a Python identifier; rename it (letters, digits, underscores)"
        )
    if (root / name).is_symlink() or (root / name / "spec.py").is_symlink():
        return f"{folder}: a symbolic link, not the suite's own file; replace it with the real folder and spec.py"
    if not (root / name / "spec.py").is_file():
        return f"{folder}: spec.py is not a file; {fix}"
    if not (root / name / "__init__.py").is_file():
        return f"{folder}: no __init__.py beside spec.py; add an empty {folder}/__init__.py"
    try:
        module = importlib.import_module(f"{package}.{name}.spec")
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001  (a spec's sys.exit must not end the harness)
        return f"{_import_problem(error, where)}; {fix}"
    spec = getattr(module, "SPEC", None)
    if spec is None:
        return f"{where} defines no SPEC; add SPEC = SuiteSpec(name={name!r}, ...)"
    if not isinstance(spec, SuiteSpec):
        return (
            f"{where}: SPEC is of type {type(spec).__name__}, not a SuiteSpec; set SPEC = SuiteSpec(name={name!r}, ...)"
        )
    if spec.name != name:
        shown = _one_line(repr(spec.name))
        return f"{where}: SPEC.name is {shown} but the folder is {name!r}; make them the same"
    return spec


def discover(root: Path = SUITES_DIR, package: str = "suites") -> Discovery:
    """Every suite folder under `root` (importable as `package`): loaded, or its one line.

    A folder without spec.py is not a suite (shared code, an empty folder) and is skipped quietly;
    so are names starting with "_" or "." (the template, caches)."""
    found = Discovery()
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        name = entry.name
        if name.startswith(("_", ".")) or name in NOT_SUITES or not entry.is_dir():
            continue
        try:
            if not (entry / "spec.py").exists() and not (entry / "spec.py").is_symlink():
                continue
            loaded = _load(root, package, name)
        except OSError as error:  # a folder this user may not read: that suite, not the whole registry
            loaded = f"{root.name}/{_one_line(name)}: cannot be read ({error.strerror}); fix its permissions"
        if isinstance(loaded, str):
            found.broken[name] = loaded
        else:
            found.suites[name] = loaded
    return found


@lru_cache(maxsize=1)
def _discovered() -> Discovery:
    return discover()


_said: set[str] = set()  # broken folders already named in this process: one line each, not one per call


def all_suites() -> dict[str, SuiteSpec]:
    """The suites that loaded; a broken folder is left out and named once on stderr."""
    found = _discovered()
    for name, problem in found.broken.items():
        if name not in _said:
            _said.add(name)
            print(f"warning: suite {_one_line(name)} skipped: {problem}", file=sys.stderr, flush=True)
    return found.suites


def broken_suites() -> dict[str, str]:
    """Folder name -> why that suite is left out and how to fix it (one line, without the name)."""
    return dict(_discovered().broken)


def broken_problem(name: str) -> str | None:
    """Why the suite `name` asked for by the user is broken (None: it is not). The caller's error is
    then that suite's one line: the warning `all_suites` would give it is not printed as well."""
    problem = _discovered().broken.get(name)
    if problem is not None:
        _said.add(name)
    return problem


def implementation_module(suite: str, framework: str) -> str:
    return f"suites.{suite}.impl_{framework}"
