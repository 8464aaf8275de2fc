"""One broken suite folder costs one line on stderr and that suite alone (suites/contract/registry.py).

Every breakage is a real folder: in a package of its own under tmp_path for the registry itself, and
in a private copy of the project (tests/planted.py) for the CLI, so the real suites/ is never touched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.contract import registry
from tests.factories import result, write_run
from tests.planted import harness_in, planted_repo

GOOD = 'from suites.contract.spec import SuiteSpec\nSPEC = SuiteSpec(name="{name}", description="d", frameworks=("numpy",))\n'

# folder -> (spec.py source, words its one line must hold)
BROKEN: dict[str, tuple[str, tuple[str, ...]]] = {
    "syntax": ("SPEC = (\n", ("syntax error at line 1",)),
    "imports": ("import no_such_module_anywhere\n", ("cannot be imported", "no_such_module_anywhere")),
    "raises": ("raise RuntimeError('boom at import')\n", ("raises RuntimeError: boom at import",)),
    "exits": ("import sys\nsys.exit(3)\n", ("calls sys.exit(3) at import",)),
    "integer": ("SPEC = 42\n", ("SPEC is of type int, not a SuiteSpec",)),
    "nospec": ("X = 1\n", ("defines no SPEC",)),
    "mismatch": (GOOD.format(name="other"), ("SPEC.name is 'other' but the folder is 'mismatch'",)),
}


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """An importable package of suite folders of its own (its name unique to this test)."""
    package = f"broken_suites_{abs(hash(tmp_path)) % 10**8}"
    root = tmp_path / package
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    return root, package


def _suite(root: Path, name: str, source: str | None, init: bool = True) -> Path:
    folder = root / name
    folder.mkdir()
    if init:
        (folder / "__init__.py").write_text("")
    if source is not None:
        (folder / "spec.py").write_text(source)
    return folder


def test_each_broken_folder_is_one_line_naming_it_and_the_good_suite_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, package = _package(tmp_path, monkeypatch)
    _suite(root, "good", GOOD.format(name="good"))
    for name, (source, _) in BROKEN.items():
        _suite(root, name, source)
    _suite(root, "specdir", None)
    (root / "specdir" / "spec.py").mkdir()  # spec.py as a folder: imports as a namespace package
    _suite(root, "noinit", GOOD.format(name="noinit"), init=False)
    _suite(root, "helpers", None)  # shared code without spec.py: not a suite, no line
    (root / "real").mkdir()
    (root / "linked").symlink_to(root / "real")  # a planted link: never followed
    (root / "real" / "spec.py").write_text(GOOD.format(name="linked"))

    found = registry.discover(root, package)  # sys.exit(3) in `exits` must not end this test

    assert list(found.suites) == ["good"]
    expected = {*BROKEN, "specdir", "noinit", "linked", "real"}
    assert set(found.broken) == expected  # `real` has spec.py but no __init__.py
    for name, (_, words) in BROKEN.items():
        line = found.broken[name]
        assert "\n" not in line and f"{root.name}/{name}" in line, line
        assert all(word in line for word in words), line
        assert "fix" in line or "set SPEC" in line or "add SPEC" in line or "make them the same" in line, line
    assert "spec.py is not a file" in found.broken["specdir"]
    assert "add an empty" in found.broken["noinit"] and "__init__.py" in found.broken["noinit"]
    assert "symbolic link" in found.broken["linked"]


def test_a_spec_that_raises_keyboard_interrupt_still_interrupts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, package = _package(tmp_path, monkeypatch)
    _suite(root, "ctrlc", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        registry.discover(root, package)


def test_a_spec_s_message_reaches_the_line_without_control_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, package = _package(tmp_path, monkeypatch)
    _suite(root, "escapes", "raise ValueError('\\x1b[2J\\x1b]0;owned\\x07 ' + 'x' * 1000)\n")
    line = registry.discover(root, package).broken["escapes"]
    assert "\x1b" not in line and "\x07" not in line and len(line) < 500


def test_the_real_suites_have_no_broken_folder() -> None:
    assert registry.broken_suites() == {}


@pytest.fixture(scope="module")
def broken_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project with every breakage planted beside the real suites."""
    root = tmp_path_factory.mktemp("broken")
    repo = planted_repo(root, {name: {"spec.py": source} for name, (source, _) in BROKEN.items()})
    (repo / "suites" / "specdir").mkdir()
    (repo / "suites" / "specdir" / "__init__.py").write_text("")
    (repo / "suites" / "specdir" / "spec.py").mkdir()
    return repo


BROKEN_NAMES = sorted({*BROKEN, "specdir"})


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: suite ")]


def test_list_shows_the_good_suites_and_each_broken_one_once(broken_checkout: Path) -> None:
    proc = harness_in(broken_checkout, "list")
    assert proc.returncode == 0, proc.stderr
    assert "xla: float64" in proc.stdout and "--param matrix_size=5000" in proc.stdout
    assert "Traceback" not in proc.stderr
    warnings = _warnings(proc.stderr)
    assert len(warnings) == len(BROKEN_NAMES), proc.stderr  # one line a folder, and only one
    for name in BROKEN_NAMES:
        assert sum(f"suite {name} skipped: suites/{name}" in w for w in warnings) == 1, proc.stderr
        assert f"{name}: BROKEN" in proc.stdout


def test_describe_and_run_of_a_good_suite_work_beside_broken_ones(broken_checkout: Path, tmp_path: Path) -> None:
    described = harness_in(broken_checkout, "describe", "xla")
    assert described.returncode == 0, described.stderr
    assert "--param matrix_size=5000" in described.stdout and "residual: |v| <= 1e-06" in described.stdout
    planned = harness_in(broken_checkout, "run", "--suite", "xla", "--frameworks", "numpy", "--dry-run",
                         "--param", "matrix_size=8", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert "xla" in planned.stdout and "Traceback" not in planned.stderr
    run = write_run(tmp_path / "run", [result("numpy", [])])
    shown = harness_in(broken_checkout, "show", str(run))
    assert shown.returncode == 0, shown.stderr
    assert "suite xla" in shown.stdout and "Traceback" not in shown.stderr


@pytest.mark.parametrize("name", ["exits", "syntax", "mismatch"])
def test_describe_of_a_broken_suite_is_that_line_and_exit_2(broken_checkout: Path, name: str) -> None:
    proc = harness_in(broken_checkout, "describe", name)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"suite {name} is broken: suites/{name}/spec.py" in errors[0], proc.stderr
    assert not any(f"suite {name} skipped" in w for w in _warnings(proc.stderr))  # said once, as the error
    assert "Traceback" not in proc.stderr


def test_run_of_a_broken_suite_exits_2_naming_it(broken_checkout: Path, tmp_path: Path) -> None:
    proc = harness_in(broken_checkout, "run", "--suite", "exits", "--dry-run", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    # its line: the registry's warning, or (once get_suite asks the registry) the error itself
    assert "suite exits " in proc.stderr and "suites/exits/spec.py calls sys.exit(3) at import" in proc.stderr
    assert "Traceback" not in proc.stderr
