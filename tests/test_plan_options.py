"""The plan's options are declared once (harness/cli/options.py): an axis added to the bundle reaches
the plan of every command that plans, with no command file changed. The test plants one, `--planted N`,
that sets the xla suite's matrix size, and reads it back from each command's plan: run, ab, noise and
bisect print theirs with --dry-run, the exports write theirs beside their scripts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, harness
from tests.planted import harness_in, planted_repo

# One more axis, written where a contributor would write it: the end of the bundle's own declaration.
PLANTED = """

def _planted_into(fields, value, given):
    if value is not None:
        fields["params"] = (*fields.get("params", ()), f"matrix_size={value}")


PLAN_OPTIONS.append(
    PlanOption("planted", Annotated[Optional[int], typer.Option("--planted", help="a planted axis")], None, _planted_into)
)
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this checkout's code (harness, suites, stack locks) with the planted option in the bundle."""
    root = planted_repo(tmp_path_factory.mktemp("planted"), {}, parts=("harness", "suites", "images"))
    bundle = root / "harness" / "cli" / "options.py"
    bundle.write_text(bundle.read_text(encoding="utf-8") + PLANTED, encoding="utf-8")
    return root


def planted(checkout: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The copy's CLI, as a user runs it from that folder."""
    return harness_in(
        checkout, *args, env={"HARNESS_CACHE_HOME": str(home / "cache"), "HARNESS_RESULTS_DIR": str(home / "results")}
    )


def printed_plan(stdout: str) -> dict[str, Any]:
    """The plan record a --dry-run prints (after a summary line, for ab and noise)."""
    start = stdout.index("\n{") + 1 if not stdout.startswith("{") else 0
    found: dict[str, Any] = json.loads(stdout[start:])
    return found


def sizes(record: dict[str, Any]) -> set[Any]:
    return {job["params"]["matrix_size"] for job in record["jobs"]}


DRY_RUNS = {
    "run": ["run", "--suite", "xla", "--backend", "local"],
    "ab": ["ab", "BASE", "--suite", "xla", "--backend", "local"],  # BASE: the copy itself, a checkout
    "noise": ["noise", "--suite", "xla", "--backend", "local"],
    "bisect": [
        "bisect",
        "--suite",
        "xla",
        "--metric",
        "matmul",
        "--stack",
        "numpy",
        "--package",
        "threadpoolctl",
        "--versions",
        "3.7.0,3.8.0",
    ],  # fmt: skip
}


@pytest.mark.parametrize("command", sorted(DRY_RUNS))
def test_a_planted_option_reaches_the_plan_of_every_command_that_runs_one(
    command: str, checkout: Path, tmp_path: Path
) -> None:
    args = [str(checkout) if a == "BASE" else a for a in DRY_RUNS[command]]
    proc = planted(checkout, *args, "--planted", "96", "--dry-run", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sizes(printed_plan(proc.stdout)) == {96}
    # Without it the suite's default stands: the option, not the test, set the size.
    proc = planted(checkout, *args, "--dry-run", home=tmp_path)
    assert proc.returncode == 0 and sizes(printed_plan(proc.stdout)) != {96}, proc.stderr
    assert "--planted" in planted(checkout, command, "--help", home=tmp_path).stdout


@pytest.mark.parametrize("scheduler", ["slurm", "k8s"])
def test_a_planted_option_reaches_both_exports(scheduler: str, checkout: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = planted(checkout, "export", scheduler, "--suite", "xla", "--out", str(out), "--planted", "96", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sizes(json.loads((out / "plan.json").read_text())) == {96}
    assert "--planted" in planted(checkout, "export", scheduler, "--help", home=tmp_path).stdout


def test_selftest_offers_the_planted_option_too(checkout: Path, tmp_path: Path) -> None:
    """selftest picks its suites itself (a suite's parameter is not its to set), but every other axis
    of the bundle reaches its plans: the planted one is on its command line."""
    assert "--planted" in planted(checkout, "selftest", "--help", home=tmp_path).stdout


def test_a_bad_value_of_a_bundle_option_is_one_line_on_every_command(tmp_path: Path) -> None:
    """The bundle's checks are the same everywhere: --profile-steps without --profile, for one."""
    for args in (*DRY_RUNS.values(), ["export", "slurm", "--suite", "xla", "--out", str(tmp_path / "o")]):
        args = [str(REPO) if a == "BASE" else a for a in args]
        proc = harness(*args, "--profile-steps", "3", env={"HARNESS_CACHE_HOME": str(tmp_path / "cache")})
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.strip().count("\n") == 0 and "--profile-steps goes with --profile" in proc.stderr, args
