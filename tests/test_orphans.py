"""No process outlives its local job, not even one that double-forked into a session of its own.

The job (a stand-in interpreter given with --python, as in tests/test_hostile_jobs.py) forks, the
child calls setsid and forks again, and the grandchild keeps the job's stdout and stderr pipes
open while it sleeps, then writes a marker. Killing the job's process group misses it and the
parent-death signal covers only the job's first process: it used to outlive the harness (which
also waited on the pipes it held). The harness must end it with the job, at once: after the job
exits, after its timeout, and when the harness is told to stop. The sweep itself (a deeper tree,
orphans and zombies at several levels, the harness's own children spared) is tested in-process.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from harness.backends import local
from harness.backends.local import read_stat
from harness.core.schema import load_result
from tests.conftest import REPO, finished, harness, read, run_folder

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers and /proc are Linux's")

SLEEP_S = 20  # the grandchild's sleep: the harness must be done, and the grandchild gone, long before
WITHIN_S = 15  # a correctness bound (the harness does not wait out the grandchild), not a speed target

# The stand-in interpreter: leaves a setsid grandchild behind, then runs the real job or hangs.
ESCAPER = """#!{python}
import os, sys, time
mode, folder, sleep_s = {mode!r}, {folder!r}, {sleep_s!r}
pid_file = os.path.join(folder, "grandchild.pid")
if os.fork() == 0:
    os.setsid()  # out of the job's session: killing the job's process group misses what follows
    if os.fork() == 0:
        with open("/proc/self/stat") as handle:
            start = handle.read().rpartition(")")[2].split()[19]  # names this process, not just its pid
        with open(pid_file + ".tmp", "w") as handle:
            handle.write(f"{{os.getpid()}} {{start}}")
        os.rename(pid_file + ".tmp", pid_file)
        print("grandchild: holding the job's pipes", file=sys.stderr, flush=True)
        time.sleep(sleep_s)
        open(os.path.join(folder, "marker"), "w").close()
    os._exit(0)
os.wait()  # the child is gone at once: the grandchild is an orphan from here on
while not os.path.exists(pid_file):
    time.sleep(0.01)
if mode == "run":
    os.execv({python!r}, [{python!r}] + sys.argv[1:])
time.sleep(3600)  # "hang": the job runs into its timeout
"""


@dataclass(frozen=True)
class Escape:
    mode: str
    options: tuple[str, ...]
    status: str


CASES = [
    Escape("run", (), "ok"),
    Escape("hang", ("--timeout", "3"), "timeout"),
]


@dataclass(frozen=True)
class Grandchild:
    pid: int
    start: int

    @classmethod
    def of(cls, path: Path) -> Grandchild:
        return cls(*map(int, path.read_text().split()))

    def exists(self) -> bool:
        """Still there, running or a zombie (the start time tells it from a later process with its pid)."""
        seen = read_stat(self.pid)
        return seen is not None and seen.start == self.start


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """Where the grandchild writes its pid and marker; whatever escaped a failing test is killed after it."""
    path = tmp_path / "escape"
    path.mkdir()
    yield path
    for pid_file in path.glob("*.pid"):
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            escaped = Grandchild.of(pid_file)
            if escaped.exists():
                os.kill(escaped.pid, signal.SIGKILL)


def escaper(tmp_path: Path, folder: Path, mode: str) -> Path:
    script = tmp_path / "escaper-python"
    script.write_text(ESCAPER.format(python=sys.executable, mode=mode, folder=str(folder), sleep_s=SLEEP_S))
    script.chmod(0o755)
    return script


@linux_only
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.mode for c in CASES])
def test_a_setsid_grandchild_ends_with_its_job(tmp_path: Path, folder: Path, case: Escape) -> None:
    script = escaper(tmp_path, folder, case.mode)
    began = time.monotonic()
    proc = harness("run", "--suite", "fault", "--frameworks", "numpy,pytorch", "--repeat", "2", *case.options,
                   "--python", f"pytorch={script}", "--results-dir", str(tmp_path / "results"), timeout=300)  # fmt: skip
    took = time.monotonic() - began
    out = proc.stdout + proc.stderr
    grandchild = Grandchild.of(folder / "grandchild.pid")
    assert not grandchild.exists(), f"the setsid grandchild (pid {grandchild.pid}) outlived the harness"
    assert took < WITHIN_S, f"the harness took {took:.1f} s: it waited on pipes the grandchild held"
    assert finished(proc) if case.status == "ok" else proc.returncode == 1, out
    assert "Traceback" not in out, out
    run = run_folder(proc.stdout)
    assert load_result(run / "numpy.json")["status"] == "ok"  # the other job is intact
    assert load_result(run / "pytorch.json")["status"] == case.status
    assert [j["status"] for j in read(run / "summary.json")["jobs"]] == ["ok", case.status]
    # The grandchild's stderr went through the job's pipe into its log before it was ended.
    assert "grandchild: holding the job's pipes" in (run / "logs" / "pytorch.stderr.log").read_text()
    # Gone (its pid with its own start time) is gone for good: no need to sit out its sleep to see
    # that it never writes its marker.
    assert not (folder / "marker").exists(), "the grandchild lived on and finished its sleep"


@linux_only
@pytest.mark.slow
def test_a_stopped_harness_ends_the_setsid_grandchild_too(tmp_path: Path, folder: Path) -> None:
    script = escaper(tmp_path, folder, "hang")
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy,pytorch",
           "--python", f"pytorch={script}", "--results-dir", str(tmp_path / "results")]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (folder / "grandchild.pid").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = Grandchild.of(folder / "grandchild.pid")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, out + err
    assert not grandchild.exists(), f"the setsid grandchild (pid {grandchild.pid}) outlived the stopped harness"
    summary = read(run_folder(out) / "summary.json")
    assert summary["interrupted"] is True and [j["status"] for j in summary["jobs"]] == ["ok", "interrupted"]


# A job whose processes leave in every way: levels 1 and 4 start sessions of their own, the even
# levels exit at once (their children are orphans; level 6 stays a zombie of level 5, which never
# reaps it), the odd ones sleep. Each writes "pid start" to <folder>/<level>.pid.
TREE = """
import os, sys, time
folder = sys.argv[1]
def become(level):
    if level in (1, 4):
        os.setsid()
    with open("/proc/self/stat") as handle:
        start = handle.read().rpartition(")")[2].split()[19]
    with open(f"{folder}/{level}.tmp", "w") as handle:
        handle.write(f"{os.getpid()} {start}")
    os.rename(f"{folder}/{level}.tmp", f"{folder}/{level}.pid")
    if level < 6 and os.fork() == 0:
        become(level + 1)
    if level % 2 == 0:
        os._exit(0)
    time.sleep(60)
    os._exit(0)
if os.fork() == 0:
    become(1)
while len([name for name in os.listdir(folder) if name.endswith(".pid")]) < 6:
    time.sleep(0.01)
print("all six started", flush=True)
"""


def sleeper(own: list[subprocess.Popen[bytes]], new_session: bool) -> None:
    own.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=new_session))


def at_end(stream: IO[bytes] | None, within_s: float) -> bytes:
    """What is left in a pipe, once every writer has closed it (fails if one still holds it)."""
    assert stream is not None
    fd = stream.fileno()
    data, deadline = b"", time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return data
        data += chunk
    raise AssertionError(f"the pipe is still held open {within_s} s on (read so far: {data!r})")


@linux_only
def test_the_sweep_ends_every_level_and_spares_the_harness_own_children(folder: Path) -> None:
    was = local.subreaper()
    own: list[subprocess.Popen[bytes]] = []  # the harness's own children: one there before the job,
    sleeper(own, new_session=True)  # one started during it, in the harness's session
    try:
        with local.contained():
            assert local.subreaper()
            job = subprocess.Popen([sys.executable, "-c", TREE, str(folder)], stdout=subprocess.PIPE,
                                   start_new_session=True)  # fmt: skip
            sleeper(own, new_session=False)
            assert job.wait(timeout=60) == 0
            levels = [Grandchild.of(folder / f"{level}.pid") for level in range(1, 7)]
            assert all(level.exists() for level in levels)  # orphans, sleepers and a zombie, all still there
        assert local.subreaper() == was  # a subreaper only while a job runs
        assert [level.pid for level in levels if level.exists()] == []  # none left, not even a zombie
        assert at_end(job.stdout, within_s=5) == b"all six started\n"  # every copy of the pipe is closed
        assert [child.poll() for child in own] == [None, None]  # not the job's: left alone
    finally:
        for child in own:
            child.kill()
            child.wait()
