"""A link planted at every path the harness writes, listed from the writers themselves.

The list is not written by hand: a real run and its `--resume` execute under an audit hook that
records every `harness.write` event (raised by each writer in harness/core/safe_files.py) and every
write-mode open, mkdir or rename made by path. Any write below the results folder that bypassed
safe_files fails the first test. Then, for every folder and file that list names below the
results folder (and below the cache home), a fresh copy of the run gets a symbolic link there,
pointing outside, and is resumed: nothing outside may change, and the harness either replaces the
link (a file) or refuses it in one line (a folder), never with a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.judge.assessment import DISTURBED
from tests.conftest import REPO, harness, run_folder

pytestmark = pytest.mark.slow

# Runs the CLI in this interpreter with an audit hook writing what is written into TRACE.
TRACER = """
import json, os, sys
trace = open(sys.argv.pop(1), "a")
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def hook(event, args):
    if event == "harness.write":
        record = {"anchor": args[0], "path": args[1]}
    elif event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) and isinstance(args[2], int) \\
            and args[2] & WRITE:
        record = {"bypass": os.fsdecode(args[0]), "event": event}
    elif event == "os.mkdir" and args[2] in (None, -1):
        record = {"bypass": os.fsdecode(args[0]), "event": event}
    elif event == "os.rename" and args[2] in (None, -1):
        record = {"bypass": os.fsdecode(args[1]), "event": event}
    else:
        return
    trace.write(json.dumps(record) + "\\n")
    trace.flush()
sys.addaudithook(hook)
from harness.cli.main import main
main(sys.argv[1:])
"""

# The job's stand-in interpreter: leaves an artefact in a subfolder, then runs the real job.
ARTEFACT = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open(args[args.index("--job") + 1]) as handle:
    spec = json.load(handle)
folder = os.path.join(os.path.dirname(spec["result_path"]), spec["framework"] + "-artifacts", "sub")
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, "a.txt"), "w") as handle:
    handle.write("an artefact")
os.execv({python!r}, [{python!r}] + args)
"""

RANDOM = re.compile(r"-[0-9a-f]{8}$")  # a job's fresh folder under .jobs: no one can plant it in advance


def traced(trace: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HARNESS_CACHE_HOME=str(home))
    return subprocess.run([sys.executable, "-c", TRACER, str(trace), *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)  # fmt: skip


def plain_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return harness(*args, timeout=300, env={"HARNESS_CACHE_HOME": str(home)})


def records(trace: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in trace.read_text().splitlines()]


def below(path: str, root: Path) -> Path | None:
    try:
        relative = Path(path).relative_to(root)
    except ValueError:
        return None
    return relative if relative.parts else None


def planted_places(trace: Path, roots: list[Path]) -> set[tuple[int, Path]]:
    """Every (root index, path below it) a writer touched: each written path and each folder
    between its anchor and it, wherever a link could be planted before the command runs."""
    places = set()
    for record in records(trace):
        if "path" not in record:
            continue
        for index, root in enumerate(roots):
            relative = below(record["path"], root)
            if relative is None or below(record["anchor"], root) is None and Path(record["anchor"]) != root:
                continue
            anchor = Path(record["anchor"]).relative_to(root)
            for depth in range(len(anchor.parts) + 1, len(relative.parts) + 1):
                prefix = Path(*relative.parts[:depth])
                if not any(RANDOM.search(part) for part in prefix.parts):
                    places.add((index, prefix))
    return places


def snapshot(folder: Path) -> dict[str, tuple[str, bytes]]:
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found[str(path.relative_to(folder))] = (oct(info.st_mode), data)
    return found


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A finished run whose result is then removed (so `--resume` writes everything again), and
    the trace of that first run and of a resume of a copy."""
    base = tmp_path_factory.mktemp("planted")
    script = base / "artefact-python"
    script.write_text(ARTEFACT.format(python=sys.executable))
    script.chmod(0o755)
    home, results, trace = base / "home", base / "results", base / "trace.jsonl"
    args = ["--suite", "fault", "-f", "numpy", "--repeat", "2", "--cache", "warm", "--python", f"numpy={script}"]
    first = traced(trace, "run", *args, "--results-dir", str(results), home=home)
    assert first.returncode in (0, 1, 3) and "Traceback" not in first.stderr, first.stdout + first.stderr
    run = run_folder(first.stdout)
    (run / "numpy.json").unlink()  # the job is redone by --resume: every writer runs again
    pristine = base / "pristine"
    shutil.copytree(results, pristine, symlinks=True)
    resumed = traced(trace, "run", "--resume", run.name, "--results-dir", str(results), home=home)
    assert resumed.returncode in (0, 1, 3) and "Traceback" not in resumed.stderr, resumed.stdout + resumed.stderr
    return {"base": base, "home": home, "pristine": pristine, "run_id": run.name, "trace": trace,
            "python": f"numpy={script}", "results": results}  # fmt: skip


def test_every_write_below_the_results_folder_goes_through_safe_files(prepared: dict[str, object]) -> None:
    results = Path(str(prepared["results"]))
    anchors = {Path(r["anchor"]) for r in records(Path(str(prepared["trace"]))) if "anchor" in r}
    bypass = [
        r for r in records(Path(str(prepared["trace"])))
        if "bypass" in r and os.path.isabs(r["bypass"]) and below(r["bypass"], results) is not None
        and Path(r["bypass"]) not in anchors
    ]  # fmt: skip
    assert bypass == [], bypass


def test_the_traced_list_covers_the_run_folder(prepared: dict[str, object]) -> None:
    """The list is what the writers did: it must hold what a run is known to write (else the hook
    or the events went missing and the planting test below would plant nothing)."""
    results, home = Path(str(prepared["results"])), Path(str(prepared["home"]))
    places = planted_places(Path(str(prepared["trace"])), [results, home])
    run = Path(str(prepared["run_id"]))
    names = {str(path) for index, path in places if index == 0}
    for expected in ("", "summary.json", "numpy.json", "logs", "logs/numpy.stdout.log", ".lock", ".jobs",
                     "numpy-artifacts", "numpy-artifacts/sub", "numpy-artifacts/sub/a.txt"):  # fmt: skip
        assert str(run / expected) in names, sorted(names)
    assert any(index == 1 for index, _ in places), "no write into the cache home was traced (--cache warm)"


def plant_cases(prepared: dict[str, object]) -> list[tuple[int, Path]]:
    results, home = Path(str(prepared["results"])), Path(str(prepared["home"]))
    return sorted(planted_places(Path(str(prepared["trace"])), [results, home]), key=lambda p: (p[0], str(p[1])))


def test_a_link_planted_at_any_written_path_is_never_written_through(
    prepared: dict[str, object], tmp_path: Path
) -> None:
    cases = plant_cases(prepared)
    assert len(cases) >= 10, cases
    failures = []
    for number, (index, place) in enumerate(cases):
        case = tmp_path / f"case-{number}"
        results, home = case / "results", case / "home"
        shutil.copytree(Path(str(prepared["pristine"])), results, symlinks=True)
        shutil.copytree(Path(str(prepared["home"])), home, symlinks=True)
        outside = case / "outside"
        outside.mkdir()
        (outside / "canary.txt").write_text("untouched\n")
        target = (results, home)[index] / place
        # A folder's place gets a link to a folder, a file's a link to a file (the nastier each).
        folder = target.is_dir() if os.path.lexists(target) else not place.suffix
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif os.path.lexists(target):
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(outside if folder else outside / "canary.txt")
        before = snapshot(outside)
        proc = plain_cli("run", "--resume", str(prepared["run_id"]), "--results-dir", str(results),
                         "--python", str(prepared["python"]), home=home)  # fmt: skip
        out = proc.stdout + proc.stderr
        problems = []
        if snapshot(outside) != before:
            problems.append("wrote outside")
        if "Traceback" in out:
            problems.append("traceback")
        if proc.returncode not in (0, 1, 2, DISTURBED):  # 3: the run finished on a busy machine
            problems.append(f"exit {proc.returncode}")
        if proc.returncode == 2 and not any(line.startswith("error: ") for line in proc.stderr.splitlines()):
            problems.append("no one-line message")
        if problems:
            failures.append(f"{('results', 'cache home')[index]}/{place}: {', '.join(problems)}\n{out[-800:]}")
    assert failures == [], "\n\n".join(failures)


def test_a_cache_link_in_the_results_folder_is_not_followed(prepared: dict[str, object], tmp_path: Path) -> None:
    """The old place of the warm compile caches: a `.cache` link there leads nowhere now."""
    results, home, outside = tmp_path / "results", tmp_path / "home", tmp_path / "outside"
    results.mkdir()
    outside.mkdir()
    (results / ".cache").symlink_to(outside)
    proc = plain_cli("run", "--suite", "fault", "-f", "numpy", "--repeat", "2", "--cache", "warm",
                     "--results-dir", str(results), home=home)  # fmt: skip
    assert proc.returncode in (0, 1, 3) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert list(outside.iterdir()) == []


def test_a_cache_folder_named_in_plan_json_is_not_where_a_resumed_job_writes(
    prepared: dict[str, object], tmp_path: Path
) -> None:
    """plan.json is read back from disk: the warm cache of a resumed job is the cache home's, whatever it says."""
    results, home, outside = tmp_path / "results", tmp_path / "home", tmp_path / "outside"
    shutil.copytree(Path(str(prepared["pristine"])), results, symlinks=True)
    outside.mkdir()
    plan_file = results / str(prepared["run_id"]) / "plan.json"
    plan = json.loads(plan_file.read_text())
    for job in plan["jobs"]:
        assert job["cache"] == "warm"
        job["cache_dir"] = str(outside)
    plan_file.write_text(json.dumps(plan))
    proc = plain_cli("run", "--resume", str(prepared["run_id"]), "--results-dir", str(results),
                     "--python", str(prepared["python"]), home=home)  # fmt: skip
    assert proc.returncode in (0, 1, 3) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert list(outside.iterdir()) == []
    assert any((home / "compile").iterdir())
