"""`harness describe` says what a suite takes and checks; a job says each metric as it finishes."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cli import catalog, main
from suites.contract.registry import all_suites
from suites.runtime.context import Context
from tests.planted import planted_repo


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: str | int | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    return int(code or 0), out.getvalue(), err.getvalue()


def test_describe_shows_every_parameter_with_its_default_and_meaning_and_each_check_s_tolerance() -> None:
    code, out, err = _cli("describe", "xla")
    assert code == 0, err
    lines = out.splitlines()
    spec = all_suites()["xla"]
    for p in spec.params:  # default and meaning, as `--param` takes it
        assert any(line.strip().startswith(f"--param {p.name}={p.default} ") and p.help in line for line in lines), p
    assert "  residual: |v| <= 1e-06 -- max |C inv(C) - I| on the shared C" in lines
    assert "  product_sum: rtol 1e-09 vs baseline -- sum of C = A @ B on the shared A, B" in lines
    assert "metrics: generate, mean_sum, matmul, inverse" in lines
    assert "  --smoke: matrix_size=64" in lines
    # a range's end as typed, not rounded by %g (2.14748e+09 reads as another limit)
    assert "<= 2147483647)" in next(line for line in lines if "--param seed=" in line)


def test_describe_names_a_checks_frameworks_and_a_check_that_depends_on_the_parameters() -> None:
    code, out, _ = _cli("describe", "jit")
    assert code == 0
    spec = all_suites()["jit"]
    for check in spec.checks:
        line = next(line for line in out.splitlines() if line.startswith(f"  {check.name}: "))
        assert (check.frameworks is None) != ("reported by " in line), line
        assert check.required != ("only where the parameters produce it" in line), line


def test_gpt_describes_its_train_step_s_share_of_peak_as_mfu() -> None:
    assert all_suites()["gpt"].peak_shares == {"train step": "MFU"}  # the suite's declaration
    code, out, _ = _cli("describe", "gpt")
    assert code == 0
    assert "  train step: its % of peak (achieved FLOP/s over the datasheet peak) is the MFU" in out.splitlines()


def test_the_word_comes_from_the_suite_s_declaration_not_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = replace(all_suites()["xla"], peak_shares={"matmul": "HFU"})
    monkeypatch.setattr(catalog, "get_suite", lambda name: declared)
    code, out, _ = _cli("describe", "xla")
    assert code == 0 and "  matmul: its % of peak (achieved FLOP/s over the datasheet peak) is the HFU" in out
    assert "MFU" not in out


def _context() -> Context:
    spec = all_suites()["xla"]
    return Context(spec, "numpy", spec.resolve({"matrix_size": 8}), repeat=2, warmup=0, device=None,
                   device_kind="cpu", sync=lambda out: None)  # fmt: skip


def test_each_metric_is_said_as_it_finishes_not_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    ctx = _context()
    ctx.measure("generate", lambda: sum(range(100)))
    first = capsys.readouterr().out
    assert first.startswith("[xla/numpy] generate done: median ") and "s (n=2), first call " in first
    assert first.count("\n") == 1  # one line, before the next metric starts
    ctx.record_time("matmul", first_call=0.5, samples=[0.1, 0.2, 0.3])
    assert capsys.readouterr().out == "[xla/numpy] matmul done: median 0.2 s (n=3), first call 0.5 s\n"
    ctx.value("rows/s", [10.0, 30.0], unit="rows/s", derived_from="matmul")
    assert capsys.readouterr().out == "[xla/numpy] rows/s done: median 20 rows/s (n=2)\n"
    ctx.value("iterations", 7.0, unit="")
    assert capsys.readouterr().out == "[xla/numpy] iterations done: median 7 (n=1)\n"


SLOW_SPEC = """from suites.contract.spec import Param, SuiteSpec

SPEC = SuiteSpec(name="slowpair", description="test: a quick metric, then a slow one", frameworks=("numpy",),
                 params=(Param("pause_s", "float", 1.0, "seconds each call of the slow metric sleeps", min=0),),
                 repeat=1, warmup=0, timeout_s=120, metrics=("quick", "slow"))
"""
SLOW_IMPL = """import time


def run(ctx):
    ctx.measure("quick", lambda: None)
    ctx.measure("slow", lambda: time.sleep(float(ctx.params["pause_s"])))
"""


@pytest.mark.slow
def test_a_finished_metric_reaches_the_terminal_while_the_next_one_runs(tmp_path: Path) -> None:
    """Through the real CLI and the local backend: the quick metric's line is on the user's screen
    before the slow metric (a first call and a sample of 1 s each) has finished."""
    repo = planted_repo(tmp_path, {"slowpair": {"spec.py": SLOW_SPEC, "impl_numpy.py": SLOW_IMPL}})
    command = [sys.executable, "-m", "harness.cli", "run", "--suite", "slowpair", "--backend", "local",
               "--results-dir", str(tmp_path / "results")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(repo)}
    seen: dict[str, float] = {}
    with subprocess.Popen(
        command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            for name in ("quick", "slow"):
                if f"[slowpair/numpy] {name} done: median" in line:
                    seen.setdefault(name, time.monotonic())
        stderr = proc.stderr.read() if proc.stderr is not None else ""
    assert proc.returncode in (0, 3), stderr  # 3: a busy machine shared the CPUs (the lines are what is tested)
    assert set(seen) == {"quick", "slow"}, stderr
    assert seen["slow"] - seen["quick"] >= 1.5  # two 1 s calls came after the quick line was shown
