"""Hostile jobs, dying terminals and two harnesses on one run, with real processes and signals.

A job (here a stand-in interpreter given with --python, so it can misbehave however a job
could) plants links and FIFOs where its result and logs go; the harness must take back only
its own regular result file, never read or write through a planted link, and leave the other
job's result intact. SIGHUP and SIGKILL of the harness must not orphan the job, and a run
killed during its first job must be resumable; a second harness on a running run is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core.schema import load_result
from tests.conftest import REPO, finished, harness, read, run_folder

pytestmark = pytest.mark.slow

SECRET = "TOP-SECRET-CANARY"

# The stand-in interpreter: plants something, then either stops or runs the real job.
HOSTILE = """#!{python}
import json, os, sys
mode, secret, victim = {mode!r}, {secret!r}, {victim!r}
args = sys.argv[1:]
spec_path = args[args.index("--job") + 1]
with open(spec_path) as handle:
    spec = json.load(handle)
out, framework = spec["result_path"], spec["framework"]
run = os.path.dirname(os.path.dirname(os.path.dirname(out)))
logs = os.path.join(run, "logs")
def real_job(changed=()):
    spec.update(changed)  # the job's own folder holds its job.json: it may rewrite it
    with open(spec_path, "w") as handle:
        json.dump(spec, handle)
    os.execv({python!r}, [{python!r}] + args)
if mode == "result-link":
    os.symlink(secret, out)
elif mode == "result-link-to-logs":
    os.symlink(os.path.join(logs, framework + ".stdout.log"), out)
elif mode == "result-fifo":
    os.mkfifo(out)
elif mode == "result-hardlink":
    os.link(secret, out)
elif mode == "result-huge":
    with open(out, "wb") as handle:
        handle.truncate(65 * 2**20)
elif mode == "log-links":
    for name, target in ((".stderr.log", secret), (".stdout.log", victim)):
        path = os.path.join(logs, framework + name)
        os.unlink(path)
        os.symlink(target, path)
    print("hostile stdout line")
    print("hostile: failing on purpose", file=sys.stderr)
    sys.exit(3)
elif mode == "artifact-links":
    folder = os.path.join(os.path.dirname(out), framework + "-artifacts")
    os.makedirs(os.path.join(folder, "sub"))
    os.symlink(secret, os.path.join(folder, "secret.txt"))
    os.symlink(os.path.dirname(secret), os.path.join(folder, "outside-dir"))
    os.mkfifo(os.path.join(folder, "pipe"))
    with open(os.path.join(folder, "sub", "summary.txt"), "w") as handle:
        handle.write("a real artefact")
    real_job()
elif mode == "other-framework":
    real_job([("framework", "numpy")])
elif mode == "other-run":
    real_job([("run_id", "someone-else")])
elif mode == "escape-output":
    print("\\x1b]0;pwned\\x07\\x1b[2Jcleared")
    real_job()
sys.exit(0)
"""


@dataclass(frozen=True)
class JobCase:
    mode: str
    status: str
    reason: str


JOB_CASES = [
    JobCase("result-link", "invalid-output", "refused its result file pytorch.json: is a symbolic link"),
    JobCase("result-link-to-logs", "invalid-output", "is a symbolic link"),
    JobCase("result-fifo", "invalid-output", "is a FIFO, not a regular file"),
    JobCase("result-hardlink", "invalid-output", "is a hard link to another file"),
    JobCase("result-huge", "invalid-output", "is too large"),
    JobCase("log-links", "failed", "exited with code 3"),
    JobCase("artifact-links", "ok", ""),
    JobCase("other-framework", "invalid-output", "result file names fault/numpy, not this job"),
    JobCase("other-run", "invalid-output", "belongs to run someone-else"),
    JobCase("escape-output", "ok", ""),
]


def no_link_leads_out(run: Path) -> None:
    """Nothing the harness wrote into the run folder holds the secret."""
    for path in run.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("case", JOB_CASES, ids=[c.mode for c in JOB_CASES])
def test_a_hostile_job_gets_back_only_its_own_regular_result(tmp_path: Path, case: JobCase) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret, victim = outside / "secret.txt", outside / "victim.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    victim.write_text("untouched\n")
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (secret, victim)}
    script = tmp_path / "hostile-python"
    script.write_text(HOSTILE.format(python=sys.executable, mode=case.mode, secret=str(secret), victim=str(victim)))
    script.chmod(0o755)
    proc = harness("run", "--suite", "fault", "--frameworks", "numpy,pytorch", "--repeat", "2",
                   "--python", f"pytorch={script}", "--results-dir", str(tmp_path / "results"), timeout=300)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert finished(proc) if case.status == "ok" else proc.returncode == 1, out
    assert "Traceback" not in out and "\x1b" not in out, out
    run = run_folder(proc.stdout)
    assert load_result(run / "numpy.json")["status"] == "ok"  # the other job is intact
    doc = load_result(run / "pytorch.json")
    assert doc["status"] == case.status and case.reason in (doc["reason"] or ""), doc["reason"]
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (secret, victim)} == before
    assert SECRET not in out
    no_link_leads_out(run)
    assert not (run / ".jobs").exists()  # the job's own folder is gone, with whatever it planted
    assert [j["status"] for j in read(run / "summary.json")["jobs"]] == ["ok", case.status]
    if case.mode == "log-links":
        assert "failing on purpose" in doc["stderr_tail"]  # kept in memory, not read back via the link
    if case.mode == "artifact-links":
        artefacts = run / "pytorch-artifacts"
        assert (artefacts / "sub" / "summary.txt").read_text() == "a real artefact"
        assert sorted(p.name for p in artefacts.rglob("*")) == ["sub", "summary.txt"]
        skipped = " ".join(doc["environment"]["launch"]["artifacts_skipped"])
        assert "secret.txt (symbolic link)" in skipped and "pipe (FIFO)" in skipped
    if case.mode == "escape-output":
        assert "\\x1b]0;pwned" in proc.stdout  # echoed, made visible, never interpreted


def start(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness.cli", *args]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen[str], text: str, limit: float = 120) -> str:
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + limit
    for line in proc.stdout:
        seen.append(line)
        if text in line or time.monotonic() > deadline:
            break
    return "".join(seen)


def job_processes(run_id: str) -> str:
    # A local job's command line names its job.json, which lies in its folder inside the run folder.
    pattern = f"suites run --job .*/{run_id}/"
    return subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True).stdout.strip()


def gone(run_id: str, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while job_processes(run_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def run_id_of(results: Path) -> str:
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return run.name


HANG = ("--suite", "fault", "--param", "mode=hang", "--param", "target=pytorch")


def test_sighup_stops_the_job_and_keeps_the_summary(results: Path) -> None:
    proc = start("run", *HANG, "--frameworks", "numpy,pytorch", "--results-dir", str(results))
    seen = wait_for(proc, "hanging on purpose")
    run_id = run_id_of(results)
    assert job_processes(run_id), seen
    proc.send_signal(signal.SIGHUP)  # the SSH session closed
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, seen + out + err
    assert "Traceback" not in err
    assert gone(run_id), "the job outlived the hangup"
    summary = read(results / run_id / "summary.json")
    assert summary["interrupted"] is True
    assert [j["status"] for j in summary["jobs"]] == ["ok", "interrupted"]


def test_a_closed_terminal_is_a_hangup_and_the_run_still_ends_cleanly(results: Path) -> None:
    """The real thing: the harness on a terminal that disappears (kernel SIGHUP, then EIO on writes)."""
    master, slave = os.openpty()

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    cmd = [sys.executable, "-m", "harness.cli", "run", *HANG, "--frameworks", "numpy,pytorch",
           "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    while b"hanging on purpose" not in seen and time.monotonic() < deadline:
        seen += os.read(master, 4096)
    run_id = run_id_of(results)
    os.close(master)  # the SSH session is gone: the kernel hangs up the terminal's session
    assert proc.wait(timeout=30) == 130, seen
    assert gone(run_id), "the job outlived the hangup"
    summary = read(results / run_id / "summary.json")
    assert summary["interrupted"] is True and [j["status"] for j in summary["jobs"]] == ["ok", "interrupted"]


def test_a_harness_killed_in_its_first_job_takes_the_job_along_and_can_be_resumed(results: Path) -> None:
    proc = start("run", *HANG, "--frameworks", "pytorch,numpy", "--results-dir", str(results))
    wait_for(proc, "hanging on purpose")
    run_id = run_id_of(results)
    proc.kill()  # SIGKILL: no handler runs
    proc.communicate(timeout=30)
    assert gone(run_id), "the job was orphaned (no parent-death signal)"
    run = results / run_id
    assert read(run / "summary.json")["jobs"] == []  # written before the first job
    again = harness("run", "--resume", str(run), "--timeout", "3", "--results-dir", str(results), timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    assert [j["status"] for j in read(run / "summary.json")["jobs"]] == ["timeout", "ok"]


def test_two_harnesses_on_one_run_the_second_is_refused(results: Path) -> None:
    first = harness("run", *HANG, "--frameworks", "numpy,pytorch", "--timeout", "3", "--results-dir", str(results))
    assert first.returncode == 1, first.stdout + first.stderr
    run = run_folder(first.stdout)
    resumed = start("run", "--resume", str(run), "--timeout", "120", "--results-dir", str(results))
    wait_for(resumed, "hanging on purpose")
    summary = (run / "summary.json").read_bytes()
    second = harness("run", "--resume", str(run), "--results-dir", str(results))
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"is in use by another harness (pid {resumed.pid}:" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1 and "Traceback" not in second.stderr
    assert (run / "summary.json").read_bytes() == summary  # the refused harness wrote nothing
    resumed.send_signal(signal.SIGTERM)
    out, err = resumed.communicate(timeout=30)
    assert resumed.returncode == 130, out + err
    statuses = [j["status"] for j in json.loads((run / "summary.json").read_text())["jobs"]]
    assert statuses == ["ok", "interrupted"]
    third = harness("run", "--resume", str(run), "--timeout", "3", "--results-dir", str(results))
    assert third.returncode == 1 and "in use" not in third.stderr  # the lock died with its holder
    assert os.path.isdir(run)


def test_a_log_is_cut_at_its_cap_and_the_stream_still_drained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A job printing without end cannot fill the disk: the log stops at the cap with a line saying
    so, the rest is read (the job never blocks on a full pipe) and the tail still shows the real end."""
    from harness.backends import job_folder

    monkeypatch.setattr(job_folder, "MAX_LOG_BYTES", 1000)
    tail = job_folder.Tail()
    chunks = [b"x" * 300] * 10 + [b"the real end\n"]
    with (tmp_path / "log").open("wb") as sink:
        job_folder.pump(iter(chunks), sink, None, tail).join(timeout=10)
    text = (tmp_path / "log").read_bytes()
    assert text.startswith(b"x" * 1000) and text.count(b"x") == 1000
    assert b"this log was cut at" in text and b"the real end" not in text
    assert "the real end" in tail.text()
