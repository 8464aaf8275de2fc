"""Every suite x framework in the registry (not a list kept by hand) at its declared smoke size.

A suite conforms when each framework it names has an implementation, `harness run --smoke`
finishes with every check passing, and every timed metric carries barrier evidence that the
clock stopped after the work (`sync: ok`) and the precision the job really computed in.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from harness.core.schema import load_result
from harness.judge.assessment import assess
from harness.judge.breakdown import OVERHEAD_BOUND
from harness.report.profile_text import reconciliation
from harness.store.run_folder import load_run
from suites.contract.frameworks import FRAMEWORKS
from suites.contract.registry import SUITES_DIR, all_suites
from tests.conftest import finished, run_folder

SUITES = sorted(all_suites())


@pytest.mark.parametrize("name", SUITES)
def test_every_named_framework_has_an_implementation_and_the_smoke_size_is_valid(name: str) -> None:
    spec = all_suites()[name]
    for fw in spec.frameworks:
        assert fw in FRAMEWORKS, f"{name} names unknown framework {fw}"
        assert (SUITES_DIR / name / f"impl_{fw}.py").is_file(), f"{name}: no impl_{fw}.py"
    assert set(spec.unsupported) <= set(FRAMEWORKS) and not set(spec.unsupported) & set(spec.frameworks)
    spec.resolve(spec.smoke)  # raises on a smoke parameter the suite does not accept


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITES)
def test_smoke_run_passes_its_checks_with_every_metric_synchronised(
    name: str, smoke_run: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    spec = all_suites()[name]
    proc = smoke_run(name)  # shared with the suite's own tests (tests/conftest.py)
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    for fw in spec.all_frameworks:
        doc = load_result(run / f"{fw}.json")
        if fw in spec.unsupported:
            assert doc["status"] == "skipped" and doc["reason"] == spec.unsupported[fw]
            continue
        assert doc["status"] == "ok", doc["reason"]
        measured = doc["environment"]["precision"]["measured"]
        assert measured["matmul"]["class"] == "fp32"  # every CPU computes float32 as float32
        timed = [m for m in doc["metrics"] if m["kind"] == "time"]
        assert timed, f"{name}/{fw} recorded no time metric"
        for metric in timed:
            assert metric["sync"]["state"] == "ok", (fw, metric["name"], metric["sync"])
            if not spec.hidden:
                assert metric["warnings"] == [], (fw, metric["name"], metric["warnings"])


# Frameworks with a profiler the harness reads (suites/runtime/adapter_*.py `profiler`).
PROFILED = ("jax", "flax", "pytorch")


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITES)
def test_smoke_run_profiles_close_on_their_step_and_say_what_the_profiler_cost(
    name: str, smoke_run: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    proc = smoke_run(name)  # run with --profile (tests/conftest.py)
    assert finished(proc), proc.stdout + proc.stderr
    judged = assess(load_run(run_folder(proc.stdout)))
    for problem in judged.profile_problems:  # only a framework or a loop with nothing to profile
        assert "no profile (" in problem and "could not" not in problem, problem
    for b in judged.breakdowns:
        total = sum(c.seconds for c in b.categories) + b.unattributed_s
        assert total == pytest.approx(b.step_s, rel=1e-9), (b.framework, b.metric)
        assert b.timed_step_s is not None and b.overhead is not None, (b.framework, b.metric)
        # Past the bound, the breakdown says so: never an unmarked one that describes another program.
        if abs(b.overhead) > OVERHEAD_BOUND:
            assert b.flag is not None and "OVERHEAD" in b.flag, (b.framework, b.metric, b.overhead)
        assert f"{b.framework}: profiled step" in reconciliation(b) and "profiler overhead" in reconciliation(b)
    spec = all_suites()[name]
    ran = {fw for fw, r in judged.run.results.items() if r["status"] == "ok"}
    for fw in sorted(ran & set(PROFILED)):
        timed = [m for m in judged.run.results[fw]["metrics"] if m["kind"] == "time"]
        if timed and not spec.hidden:  # every visible suite's timed work has a step to look inside
            assert any(b.framework == fw for b in judged.breakdowns), f"{name}/{fw}: no profile"
