"""A backend is one module plus one table entry: every entry of harness/core/backend_table.py brings the rest.

Fails when a backend is registered without its module, its class (the `Backend` Protocol), its
`from_options`, its place in `--backend`'s choices and in the plan's list, or its row in
docs/extending.md; and when a backend writes result files itself (the runner does).
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from harness.backends import base
from harness.backends import base as factory
from harness.cli.options import BackendName
from harness.core.backend_table import EXPORTS, RUNS
from harness.store.plan import BACKENDS

ROOT = Path(__file__).resolve().parent.parent
EXTENDING = ROOT / "docs" / "extending.md"


def _source_file(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def backend_class(name: str, module_path: str) -> type:
    module = importlib.import_module(module_path)
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and obj.__module__ == module.__name__ and getattr(obj, "name", None) == name
    ]
    assert len(found) == 1, f"{module_path} holds no single class with name = {name!r}"
    return found[0]


@pytest.mark.parametrize(("name", "module_path"), sorted(RUNS.items()))
def test_a_backend_module_satisfies_the_protocol(name: str, module_path: str) -> None:
    cls = backend_class(name, module_path)
    wanted = list(inspect.signature(base.Backend.run_job).parameters)
    assert list(inspect.signature(cls.run_job).parameters) == wanted, f"{cls.__name__}.run_job({wanted[1:]})"
    make = importlib.import_module(module_path).from_options
    assert list(inspect.signature(make).parameters) == ["options"], f"{module_path}.from_options(options)"


@pytest.mark.parametrize(("name", "module_path"), sorted({**RUNS, **EXPORTS}.items()))
def test_an_entry_is_importable_and_documented(name: str, module_path: str) -> None:
    importlib.import_module(module_path)
    path = _source_file(module_path).relative_to(ROOT)
    rows = [line for line in EXTENDING.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `{name}` |")]
    assert rows and f"`{path}`" in rows[0], f"docs/extending.md has no table row for {name} naming {path}"
    assert name in BACKENDS, f"{name} is not in the names a plan may record (harness/store/plan.py BACKENDS)"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_backend_that_runs_jobs_is_a_cli_choice_and_made_by_the_factory(name: str) -> None:
    assert name in factory.FACTORIES and name in factory.CHOICES
    assert BackendName(name).value == name  # `--backend NAME`
    assert set(BACKENDS) == set(RUNS) | set(EXPORTS) and not set(RUNS) & set(EXPORTS)
    assert [m.value for m in BackendName] == ["auto", *RUNS]


def test_the_backend_contract_imports_no_backend_module_until_asked() -> None:
    text = _source_file("harness.backends.base").read_text(encoding="utf-8")
    for module_path in RUNS.values():
        assert module_path not in re.findall(r"^\s*(?:from|import) ([\w.]+)", text, re.MULTILINE)


@pytest.mark.parametrize(("name", "module_path"), sorted(RUNS.items()))
def test_no_backend_writes_a_result_file(name: str, module_path: str) -> None:
    """A status only the scheduler knows travels in JobOutcome.status; the runner writes results."""
    text = _source_file(module_path).read_text(encoding="utf-8")
    for writer in ("placeholder_result", "write_json_atomic", "finalize("):
        assert writer not in text, f"{module_path} uses {writer}: report through JobOutcome instead"
