"""The path of one run stays short, and docs/extending.md lists it as it is.

A real local `harness run` (xla, numpy and jax, table output, calibrating as a first run does) runs under
benchmarks/run_path.py's profiler; every harness module one of whose functions ran is on the path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import finished

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "extending.md"
# 20 since issue 22; 21 since issue 37 split the datasheet peaks (store/peaks.py, which the runner,
# the lint and the roofline read) out of the lint (judge/plausibility.py), which the run reads beside them.
# 23 since issue 61: the run's orchestration moved out of the command into the session
# (execute/session.py) every planning command shares, so the CLI only parses and prints.
MAX_MODULES = 23
JUDGING = "harness.core.statistics"  # the intervals behind every verdict; a disturbed metric gets none
ENTRY = re.compile(r"^\d+\. `harness/([\w/]+)\.py`")


def documented_path() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The path of one run", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in section.splitlines():
        match = ENTRY.match(line)
        if match:
            name = match.group(1).replace("/", ".")
            found.append("harness." + name.removesuffix(".__init__"))
    return found


@pytest.mark.slow
def test_one_local_run_follows_the_documented_path(tmp_path: Path) -> None:
    env = dict(os.environ, HARNESS_CACHE_HOME=str(tmp_path / "home"))
    argv = ["run", "--suite", "xla", "--frameworks", "numpy,jax", "--backend", "local", "--calibrate", "auto"]
    argv += ["--param", "matrix_size=64", "--repeat", "3", "-q", "--results-dir", str(tmp_path / "results")]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_path.py"), "--json", "--", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert finished(proc), proc.stderr[-3000:]
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(measured) <= MAX_MODULES, sorted(measured)
    documented = documented_path()
    assert len(documented) == len(set(documented)), "a module is listed twice"
    unused = set(documented) - set(measured)
    from harness.judge.assessment import DISTURBED  # imported late, as conftest.finished does

    if proc.returncode == DISTURBED:
        # A busy machine disturbed the metrics: a disturbed metric gets no ratio interval (it is left out
        # of every verdict), so the judging module may not run. Nothing else may differ.
        unused -= {JUDGING}
    assert not unused and set(measured) <= set(documented), (
        f"docs/extending.md lists {sorted(unused)} that the run does not call, "
        f"and leaves out {sorted(set(measured) - set(documented))}"
    )


def test_the_documented_path_names_real_modules() -> None:
    documented = documented_path()
    assert documented, "docs/extending.md has no numbered path of one run"
    for name in documented:
        parts = name.split(".")
        path = ROOT.joinpath(*parts).with_suffix(".py")
        assert path.is_file() or (ROOT.joinpath(*parts) / "__init__.py").is_file(), name
