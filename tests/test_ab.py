"""`harness ab`: two versions of the suites, interleaved round by round in one session, compared
without the run-to-run allowance (harness/execute/ab.py, run_folder.partners, rounds.execute_interleaved)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.base import JobOutcome
from harness.core.errors import HarnessError
from harness.core.schema import load_summary
from harness.execute import ab
from harness.execute.rounds import Side, execute_interleaved
from harness.judge import noise_floor
from harness.judge.assessment import assess
from harness.store.plan import Job, PlanRequest, make_plan
from harness.store.run_folder import REPO, interleaved_record, load_run, partners, suites_digest
from tests.conftest import finished, harness, interrupt_at, run_folder
from tests.test_noise_floor import rounds_run

HARNESS = [sys.executable, "-m", "harness.cli"]
PLANT = ('size = ctx.params["work"]', 'raise JobError("planted in the candidate")')


def partner(path: Path, run_id: str, side: str, other: str | None) -> Path:
    """Give a factory run its own id (summary and results) and, with `other`, its A/B partner."""
    summary = json.loads((path / "summary.json").read_text())
    summary["run_id"] = run_id
    if other is not None:
        summary.update(interleaved_record(side, other))
    (path / "summary.json").write_text(json.dumps(summary))
    for entry in summary["jobs"]:
        doc = json.loads((path / entry["file"]).read_text())
        doc["run_id"] = run_id
        (path / entry["file"]).write_text(json.dumps(doc))
    return path


def test_two_runs_are_one_session_only_when_each_names_the_other_as_the_other_side() -> None:
    a = {"run_id": "ra", **interleaved_record("baseline", "rb")}
    b = {"run_id": "rb", **interleaved_record("candidate", "ra")}
    assert partners(a, b) and partners(b, a)
    assert not partners(a, {"run_id": "rb"})  # one-sided claim
    assert not partners(a, {"run_id": "rb", **interleaved_record("baseline", "ra")})  # same side
    assert not partners(a, {"run_id": "rc", **interleaved_record("candidate", "ra")})  # not its partner
    assert not partners(a, {"run_id": "rb", "interleaved": {"side": "candidate", "partner": "../ra"}})


def test_a_malformed_interleaved_field_makes_the_summary_unreadable(tmp_path: Path) -> None:
    run = rounds_run(tmp_path / "a", 0.01, 1)
    summary = json.loads((run / "summary.json").read_text())
    for bad in ({"side": "both", "partner": "r2"}, {"side": "baseline", "partner": "a/b"}, "baseline", {"side": "x"}):
        summary["interleaved"] = bad
        (run / "summary.json").write_text(json.dumps(summary))
        with pytest.raises(HarnessError, match="interleaved"):
            load_summary(run / "summary.json")


def test_the_drift_gate_holds_separate_runs_but_not_the_two_sides_of_one_session(tmp_path: Path) -> None:
    """A machine whose runs drift apart by several %: a 4 % change between two separate runs is
    within that drift (held); the same 4 % between the two sides of one session is a verdict."""
    drifted = [rounds_run(tmp_path / f"s{i}", 0.005, i, scale=f) for i, f in enumerate((0.95, 1.0, 1.05))]
    assert harness("noise", *map(str, drifted)).returncode == 0
    a = partner(rounds_run(tmp_path / "a", 0.005, 10), "ra", "baseline", None)
    b = partner(rounds_run(tmp_path / "b", 0.005, 11, scale=1.04), "rb", "candidate", None)
    from harness.judge.compare import compare_runs

    separate = noise_floor.apply(compare_runs(assess(load_run(a)), assess(load_run(b))))
    assert not any(c.significant for c in separate.changes)
    assert all(c.within_sessions is not None for c in separate.changes)
    partner(a, "ra", "baseline", "rb")
    partner(b, "rb", "candidate", "ra")
    session = noise_floor.apply(compare_runs(assess(load_run(a)), assess(load_run(b))))
    assert all(c.significant and c.within_sessions is None for c in session.changes)
    assert any("one interleaved session" in line for line in session.floor)
    assert not any("run to run" in line for line in session.floor)
    proc = harness("compare", str(a), str(b))
    assert "% slower" in proc.stdout and "one interleaved session (harness ab)" in proc.stdout, proc.stdout


def test_detect_for_one_session_plans_past_the_drift_that_stops_separate_runs(tmp_path: Path) -> None:
    drifted = [rounds_run(tmp_path / f"s{i}", 0.005, i, scale=f) for i, f in enumerate((0.95, 1.0, 1.05))]
    assert harness("noise", *map(str, drifted)).returncode == 0
    plan = make_plan(PlanRequest(suite="xla", frameworks="numpy,jax", params=("matrix_size=8",)), backend="local")
    with pytest.raises(HarnessError, match="drift apart so far.*harness ab BASELINE CANDIDATE"):
        noise_floor.plan_rounds(plan, "5%", interleaved=False)
    rounds, line = noise_floor.plan_rounds(plan, "5%", interleaved=True)
    assert 4 <= rounds <= noise_floor.MAX_ROUNDS and f"{rounds} rounds a side" in line
    proc = harness("ab", "HEAD", "--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=8", "--detect", "5%",
                   "--dry-run", "--backend", "local")  # fmt: skip
    assert proc.returncode == 0 and f"{rounds} rounds a side" in proc.stdout + proc.stderr, proc.stderr


class Recorder:
    """A backend that only notes the order it was asked to run jobs in (and writes no result)."""

    name = "local"

    def __init__(self, label: str, order: list[str]) -> None:
        self.label, self.order = label, order

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        self.order.append(f"{self.label}{run_id.removeprefix('round-')}")
        return JobOutcome(None, False, run_dir / "x.out", run_dir / "x.err", 0.0)


def test_sides_alternate_round_by_round_so_a_linear_drift_hits_both_alike(tmp_path: Path) -> None:
    plan = make_plan(PlanRequest(suite="fault", frameworks="numpy"), backend="local")
    order: list[str] = []
    sides = []
    for label in ("A", "B"):
        folder = tmp_path / label
        folder.mkdir()
        sides.append(Side(plan, Recorder(label, order), folder, extra=interleaved_record("baseline", "x"), label=label))
    execute_interleaved(sides, 4)
    assert order == ["A1", "B1", "B2", "A2", "A3", "B3", "B4", "A4"]
    for side in sides:
        summary = load_summary(side.run_dir / "summary.json")
        assert summary["rounds"] == 4 and summary["interleaved"] == {"side": "baseline", "partner": "x", "margin": 0.0}
        assert json.loads((side.run_dir / "plan.json").read_text())["rounds"] == 4


def checkout(root: Path, plant: bool) -> Path:
    shutil.copytree(REPO / "suites", root / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    if plant:
        common = root / "suites" / "fault" / "common.py"
        text = common.read_text()
        assert PLANT[0] in text, "the planted line moved: update PLANT"
        common.write_text(text.replace(PLANT[0], PLANT[1]))
    return root


def test_each_side_runs_its_own_code_and_records_it(tmp_path: Path) -> None:
    """Real jobs on the local backend: the candidate's planted edit fails only the candidate's jobs,
    and each side's summary names the suites digest it ran (the baseline's: this checkout's)."""
    candidate = checkout(tmp_path / "candidate", plant=True)
    results = tmp_path / "results"
    proc = harness("ab", str(REPO), str(candidate), "--suite", "fault", "-f", "numpy", "-p", "work=100",
                   "--rounds", "4", "--repeat", "3", "--backend", "local", "--results-dir", str(results))  # fmt: skip
    # Every candidate job failed: exit 1, a session that failed, not bad input; the failure is a row.
    assert proc.returncode == 1 and "failed in B: round 1: planted in the candidate" in proc.stdout, (
        proc.stdout + proc.stderr
    )
    runs = {}
    for line in proc.stdout.splitlines():
        if line.startswith(("baseline run: ", "candidate run: ")):
            runs[line.split(" ", 1)[0]] = load_run(Path(line.split(": ", 1)[1]))
    before, after = runs["baseline"], runs["candidate"]
    assert before.results["numpy"]["status"] == "ok"
    assert (
        after.results["numpy"]["status"] == "failed" and "planted in the candidate" in after.results["numpy"]["reason"]
    )
    assert before.summary["code"]["suites_sha256"] == suites_digest()
    assert after.summary["code"]["suites_sha256"] == suites_digest(candidate / "suites") != suites_digest()
    assert partners(before.summary, after.summary)
    assert before.summary["interleaved"]["margin"] == after.summary["interleaved"]["margin"] == 0.01  # the default
    shown = harness("show", str(before.path))
    assert f"interleaved: the baseline side of one session with run {after.summary['run_id']}" in shown.stdout
    site = tmp_path / "site"
    assert harness("publish", str(results), "--out", str(site)).returncode == 0
    pages = [page.read_text() for page in site.rglob("*.html") if "A/B session" in page.read_text()]
    assert len(pages) == 2 and any("the candidate side of one session" in page for page in pages)
    assert before.results["numpy"]["settings"]["rounds"] == 4


def test_a_local_job_never_runs_a_suites_package_in_the_users_folder(tmp_path: Path) -> None:
    """`python -m suites` searches the working folder first: a decoy there must not be what runs."""
    decoy = tmp_path / "elsewhere"
    (decoy / "suites").mkdir(parents=True)
    (decoy / "suites" / "__init__.py").write_text("")
    (decoy / "suites" / "__main__.py").write_text("raise SystemExit('the decoy ran')\n")
    proc = harness("run", "--suite", "fault", "-f", "numpy", "--backend", "local", "--results-dir",
                   str(tmp_path / "results"), "--calibrate", "never", cwd=decoy)  # fmt: skip
    # Exit 3 is allowed: a busy test machine may flag the run as contended; the job itself must be ok.
    assert finished(proc) and "the decoy ran" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert load_run(run_folder(proc.stdout)).results["numpy"]["status"] == "ok"


def test_a_git_revision_is_exported_into_the_side_and_bad_sides_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = checkout(tmp_path / "repo", plant=False)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "suites"], check=True)
    subprocess.run([*git, "commit", "-qm", "suites"], check=True)
    monkeypatch.setattr(ab, "REPO", repo)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    tree = ab.resolve_tree("HEAD", run_dir)
    assert tree.suites == run_dir / "code" / "suites" and (tree.suites / "fault" / "common.py").is_file()
    assert tree.code is not None and tree.code["suites_sha256"] == suites_digest(repo / "suites")
    assert tree.code["git_commit"] is not None and len(tree.code["git_commit"]) == 40
    for bad in ("no-such-branch", "--output=/tmp/x", str(tmp_path / "run")):
        with pytest.raises(HarnessError, match="git worktree add"):
            ab.check_tree(bad)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["no-such-folder-or-rev", "--suite", "fault"], "neither a folder holding suites/ nor a git revision"),
        (["HEAD", "--suite", "fault", "--rounds", "3"], "--rounds 3 must be between 4"),
        (["HEAD", "--suite", "fault", "--rounds", "100000"], "and 50"),
        (["HEAD", "--suite", "fault", "--rounds", "5", "--detect", "5%"], "--detect picks the rounds itself"),
        (["HEAD"], "--suite is required"),
        (["HEAD", "--suite", "fault", "--backend", "slurm"], "--backend local or docker"),
        (["HEAD", "--suite", "fault", "--fail-above", "nan"], "finite percentage"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], words: str, tmp_path: Path) -> None:
    proc = harness("ab", *args, "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_side_with_a_failed_job_fails_the_session_though_the_rest_compares(tmp_path: Path) -> None:
    candidate = checkout(tmp_path / "candidate", plant=False)
    common = candidate / "suites" / "fault" / "common.py"
    common.write_text(
        common.read_text().replace(
            PLANT[0], 'if ctx.framework == "jax":\n        raise JobError("planted for jax")\n    ' + PLANT[0]
        )
    )
    proc = harness("ab", str(REPO), str(candidate), "--suite", "fault", "-f", "numpy,jax", "-p", "work=100",
                   "--rounds", "4", "--repeat", "3", "--backend", "local", "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert "numpy        noop" in proc.stdout and "not every job of run" in proc.stderr


def test_an_interrupted_session_keeps_and_compares_the_rounds_both_sides_finished(tmp_path: Path) -> None:
    """Ctrl-C in round 6: exit 130, each side pooled from its finished rounds (the cut round dropped)."""
    code, out, err = interrupt_at("== round 6/30", "ab", "HEAD", "--suite", "fault", "-f", "numpy", "-p", "work=100",
                                  "--rounds", "30", "--repeat", "3", "--backend", "local",
                                  "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert code == 130, out[-2000:] + err
    assert "Traceback" not in err
    for side in ("baseline", "candidate"):
        folder = Path(next(x for x in out.splitlines() if x.startswith(f"{side} run: ")).split(": ", 1)[1])
        run = load_run(folder if folder.is_absolute() else REPO / folder)
        assert run.summary["interrupted"] is True
        numpy = run.results["numpy"]
        assert numpy["status"] == "ok" and 5 <= numpy["settings"]["rounds"] <= 6, numpy["reason"]
