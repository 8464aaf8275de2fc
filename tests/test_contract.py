"""The framework contract: every framework has its adapter, image, locks, compose service, build probe and
host declaration (harness/stack_facts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.stack_facts import STACKS
from harness.execute.contract import problems
from tests.conftest import REPO


def test_every_framework_in_this_checkout_fulfils_the_contract() -> None:
    assert problems() == []


def copy_checkout(root: Path) -> Path:
    repo = root / "repo"
    for item in ("harness", "suites", "images"):
        shutil.copytree(REPO / item, repo / item, ignore=shutil.ignore_patterns("__pycache__", "wheelhouse"))
    shutil.copy(REPO / "compose.yaml", repo / "compose.yaml")
    return repo


def contract_in(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.execute.contract"], cwd=repo, capture_output=True, text=True,
                          env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"}, timeout=120)  # fmt: skip


def test_a_framework_added_without_its_pieces_is_named_for_each_one(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    assert contract_in(repo).returncode == 0
    frameworks = repo / "suites" / "contract" / "frameworks.py"
    text = frameworks.read_text()
    anchor = '        Framework("pytorch",'
    new = '        Framework("tinygrad", "tinygrad", "suites.runtime.adapter_tinygrad", "tinygrad", ("tinygrad",)),\n'
    frameworks.write_text(text.replace(anchor, new + anchor, 1))
    proc = contract_in(repo)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert any("adapter module suites.runtime.adapter_tinygrad cannot be imported" in line for line in lines)
    assert "stack tinygrad: images/tinygrad/Dockerfile is missing" in lines
    assert "stack tinygrad: images/tinygrad/lock-cuda12.txt is missing" in lines
    assert "stack tinygrad: compose.yaml has no service 'tinygrad'" in lines
    assert "stack tinygrad: images/lock.sh does not lock it by default" in lines
    assert "stack tinygrad: suites/contract/build_info.py has no entry in PROBES" in lines
    assert "stack tinygrad: no host declaration: add harness/core/stack_facts/stack_tinygrad.py" in lines


def test_a_framework_added_to_a_stack_without_its_host_declaration_is_named(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    frameworks = repo / "suites" / "contract" / "frameworks.py"
    anchor = '        Framework("pytorch",'
    new = '        Framework("haiku", "jax", "suites.runtime.adapter_jax", "Haiku on JAX", ("jax", "haiku")),\n'
    frameworks.write_text(frameworks.read_text().replace(anchor, new + anchor, 1))
    proc = contract_in(repo)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == ["framework haiku: harness/core/stack_facts/stack_jax.py does not declare it"]


def test_a_gpu_stack_whose_declaration_has_no_gpu_checks_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """What once happened silently: image_probe branched on "pytorch"/"jax", so another stack got no checks."""
    monkeypatch.setitem(STACKS, "jax", replace(STACKS["jax"], gpu=None))
    monkeypatch.setitem(STACKS, "numpy", replace(STACKS["numpy"], gpu=STACKS["pytorch"].gpu))
    assert problems() == [
        "stack jax: its frameworks run on a GPU, but its declaration has no GPU checks",
        "stack numpy: its declaration has GPU checks, but none of its frameworks runs on a GPU",
    ]


def test_an_adapter_missing_a_function_is_named(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path)
    adapter = repo / "suites" / "runtime" / "adapter_numpy.py"
    adapter.write_text(adapter.read_text().replace("def barrier_for(", "def _barrier_for("))
    proc = contract_in(repo)
    assert (
        proc.returncode == 1
        and "framework numpy: adapter suites.runtime.adapter_numpy lacks barrier_for" in proc.stderr
    )


@pytest.mark.slow
def test_the_suite_template_copied_and_renamed_runs_and_passes(tmp_path: Path) -> None:
    """docs/extending.md's recipe: copy suites/_template, rename, run --smoke."""
    from tests.conftest import finished, read, run_folder
    from tests.planted import harness_in, planted_repo

    repo = planted_repo(tmp_path, {})
    target = repo / "suites" / "mysuite"
    shutil.copytree(repo / "suites" / "_template", target)
    for path in target.glob("*.py"):
        path.write_text(path.read_text().replace("_template", "mysuite"))
    proc = harness_in(repo, "run", "--suite", "mysuite", "--smoke", "--backend", "local", "-q",
                      "--results-dir", str(tmp_path / "results"))  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    for fw in ("numpy", "jax", "pytorch"):
        doc = read(run_folder(proc.stdout) / f"{fw}.json")
        assert doc["status"] == "ok" and doc["metrics"][0]["sync"]["state"] == "ok"
