"""`harness selftest --mistakes`: the corpus of planted benchmarking mistakes, through the real CLI,
backend, job runtime and assessment; and the proof that it would notice a guard taken away."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.execute.mistakes import CONTROL, LIMITATIONS, Outcome, corpus, guard_names, planted_corpus, table
from harness.judge import guards
from tests.conftest import harness
from tests.planted import harness_in, planted_repo


def lines(stdout: str) -> list[str]:
    marks = ("CAUGHT", "MISSED", "UNDECIDED", "QUIET", "FALSE", "n/a")
    return [x for x in stdout.splitlines() if x.split()[:1] and x.split()[0] in marks]


@pytest.mark.slow
def test_every_planted_mistake_is_caught_by_its_own_guard(tmp_path: Path) -> None:
    proc = harness("selftest", "--mistakes", "--results-dir", str(tmp_path))
    got = lines(proc.stdout)
    assert len(got) == 1 + len(corpus("cpu")), proc.stdout
    assert got[0].startswith("QUIET   none"), got[0]  # the control: honest code raises nothing
    undecided = 0
    for row, mistake in zip(got[1:], corpus("cpu"), strict=True):
        guard = guards.by_name(mistake.guard)
        if row.startswith("UNDECIDED"):
            # Only extra_threads needs what a busy machine may withhold (a second free core); every
            # other row is planted to be caught whatever the machine's speed.
            assert mistake.name == "extra_threads" and guard is not None and guard.timing, row
            assert "machine disturbed: " in row, row
            undecided += 1
            continue
        assert row.startswith(f"CAUGHT  {mistake.name}") and f"must raise {mistake.guard}; raised" in row, row
        assert "against the honest" not in row, row
    assert proc.returncode == (3 if undecided else 0), proc.stdout + proc.stderr
    assert len(list(tmp_path.iterdir())) == len(got)  # one kept run folder each, for `harness show`
    assert f"mistakes: {len(got) - undecided} caught (the control included), 0 missed, {undecided} undecided" in (
        proc.stdout
    )
    # What no guard catches yet is in the table as a limitation, never as a catch.
    limits = [row for row in proc.stdout.splitlines() if "| limitation: " in row]
    assert len(limits) == len(LIMITATIONS) and all("| not planted |" in row for row in limits), limits
    assert f"{len(LIMITATIONS)} documented limitations" in proc.stdout


# Each edit takes one guard away, as a careless change could; the corpus must then fail, naming the row.
REMOVED = {
    "plausibility": ("harness/judge/plausibility.py",
                     ("return self.ceiling is None or self.achieved <= self.ceiling", "return True"), "memoised"),
    "agreement": ("harness/judge/guards/agreement.py",
                  ("if not agrees(value, base, rtol, atol):", "if False:"), "own_data"),
    "sync barrier": ("harness/judge/plausibility.py",
                     ('return state if state in ("ok", "escaped", "unchecked") else "unchecked"', 'return "ok"'),
                     "unsynchronised"),
    "compile mark": ("suites/runtime/context.py", ("if recompiled and not compiles:", "if False:"), "retrace"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(REMOVED))
def test_the_corpus_fails_when_a_guard_is_removed(guard: str, tmp_path: Path) -> None:
    path, edit, mistake = REMOVED[guard]
    repo = planted_repo(tmp_path, {}, {path: edit})
    proc = harness_in(repo, "selftest", "--mistakes", "--only", mistake, "--results-dir", str(tmp_path / "r"))
    got = lines(proc.stdout)
    assert got[0].startswith("QUIET"), got  # the control still passes: nothing else broke
    timing = guards.by_name(next(m for m in planted_corpus() if m.name == mistake).guard)
    if got[1].startswith(f"UNDECIDED  {mistake}"):
        # Only a timing guard's silence may be the machine's doing, and only with the evidence named.
        assert timing is not None and timing.timing and "machine disturbed: " in got[1], got
        assert proc.returncode == 3, proc.stdout + proc.stderr
    else:
        assert got[1].startswith(f"MISSED  {mistake}"), got
        assert proc.returncode == 1, proc.stdout + proc.stderr


def test_the_corpus_on_a_gpu_adds_the_cuda_mistake_and_drops_what_a_gpu_cannot_show() -> None:
    gpu = corpus("gpu")
    assert any(m.culprit == "pytorch" and m.name == "unsynchronised" for m in gpu)
    assert not any(m.culprit == "numpy" for m in gpu)  # numpy has no GPU variant
    assert {m.guard for m in planted_corpus()} <= set(guard_names())
    assert corpus("cpu", ["memoised"]) == [m for m in planted_corpus() if m.name == "memoised" and "cpu" in m.devices]


def test_a_catch_needs_the_guard_and_no_blame_on_the_honest_framework() -> None:
    m = next(m for m in planted_corpus() if m.name == "own_data")
    assert Outcome(m, ("check",), (), 1, "r").caught is True
    assert Outcome(m, ("check",), ("check",), 1, "r").caught is False  # blame spread: not a catch
    assert Outcome(m, ("plausible",), (), 1, "r").caught is False  # another guard: luck, not proof
    assert Outcome(m, ("check",), (), 0, "r").caught is False  # the run passed: the user saw nothing
    assert Outcome(m, (), (), 0, "", ran=False, why="jax not installed").caught is None
    assert Outcome(CONTROL, (), (), 0, "r").caught is True and Outcome(CONTROL, ("sync",), (), 1, "r").caught is False
    rows = list(table([Outcome(m, ("check",), (), 1, "r")]))
    assert rows[2].startswith("| its own random inputs") and rows[2].endswith("| yes |")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mistakes", "--only", "nosuch"], "no planted mistake 'nosuch'"),
        (["--mistakes", "--only", "memoised,memoised"], "empty or repeated"),
        (["--only", "memoised"], "add --mistakes"),
        (["--mistakes", "--suites", "xla"], "leave out --suites"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    proc = harness("selftest", *args, "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()  # refused before any folder or job
