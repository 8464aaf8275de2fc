"""Rounds on the local backend fork each job from a server that imported the framework once.

What must hold (harness/backends/fork_server.py, suites/runtime/fork_server.py): every round's job is
a process of its own with the job's result, logs, exit code and timeout exactly as a fresh one; the
result says it was forked and carries the server's import as its cold path; one server serves a key
for the whole session and ends with it; nothing the job started outlives it; and whatever happens to
a server, the job still runs (as a fresh process) and its result is never lost.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.base import serving
from harness.backends.local import LocalBackend, read_stat
from harness.core.schema import load_result
from harness.execute.runner import execute
from harness.store.plan import PlanRequest, make_plan
from suites.contract.registry import SUITES_DIR
from tests.conftest import finished, harness, read, run_folder

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl, pidfds and /proc are Linux's")
pytestmark = linux_only


def plan(*params: str, timeout_s: float | None = None, frameworks: str = "numpy") -> object:
    return make_plan(
        PlanRequest(suite="fault", frameworks=frameworks, params=params, repeat=3, timeout_s=timeout_s),
        backend="local",
    )


def run_one(backend: LocalBackend, results: Path, *params: str, timeout_s: float | None = None) -> dict:
    """One job of the fault suite through `backend`; its result as written."""
    planned = plan(*params, timeout_s=timeout_s)
    run_dir = execute(planned, backend, results)  # type: ignore[arg-type]
    return load_result(run_dir / "numpy.json")


def servers(backend: LocalBackend) -> list:
    return [] if backend.pool is None else backend.pool.servers()


@pytest.fixture
def backend() -> Iterator[LocalBackend]:
    made = LocalBackend(echo=False, fork_rounds=True)
    with made.serving():
        yield made


def test_each_job_is_forked_from_one_server_and_records_it(backend: LocalBackend, tmp_path: Path) -> None:
    docs = [run_one(backend, tmp_path / str(n)) for n in range(3)]
    assert [d["status"] for d in docs] == ["ok"] * 3
    (server,) = servers(backend)  # one key: one server for the whole session
    for number, doc in enumerate(docs):
        process = doc["environment"]["process"]
        assert process == {"start": "forked", "server_import_s": server.import_s, "forked_before": number}
        assert doc["environment"]["cold_path"]["import_s"] == server.import_s  # paid once, by the server
        assert len(doc["metrics"][0]["samples"]) == 3
    assert server.alive()


def test_the_servers_end_with_the_session(tmp_path: Path) -> None:
    made = LocalBackend(echo=False, fork_rounds=True)
    with made.serving():
        run_one(made, tmp_path / "a")
        (server,) = servers(made)
    assert server.proc.returncode == 0  # ended when its socket closed, and reaped
    assert made.pool is None
    after = run_one(made, tmp_path / "b")  # outside a session: a fresh process, as always
    assert after["environment"]["process"] == {"start": "fresh"}


def test_fresh_processes_unless_asked(tmp_path: Path) -> None:
    made = LocalBackend(echo=False)
    with made.serving():
        doc = run_one(made, tmp_path)
    assert doc["environment"]["process"] == {"start": "fresh"}
    assert made.pool is None


def test_a_forked_job_keeps_its_exit_code_output_and_failure(backend: LocalBackend, tmp_path: Path) -> None:
    doc = run_one(backend, tmp_path, "mode=crash")
    assert doc["status"] == "failed"
    assert doc["environment"]["launch"]["exit_code"] == -signal.SIGABRT
    assert "crashing on purpose" in (doc.get("stderr_tail") or "")
    log = next((tmp_path).glob("*/logs/numpy.stderr.log"))
    assert "crashing on purpose" in log.read_text()
    again = run_one(backend, tmp_path / "next")  # the server outlives its child's crash
    assert again["status"] == "ok" and again["environment"]["process"]["forked_before"] == 1


def test_a_forked_job_that_hangs_times_out_and_the_server_serves_on(backend: LocalBackend, tmp_path: Path) -> None:
    began = time.monotonic()
    doc = run_one(backend, tmp_path, "mode=hang", timeout_s=3)
    assert doc["status"] == "timeout"
    assert time.monotonic() - began < 30  # a correctness bound: the kill is not waited out
    again = run_one(backend, tmp_path / "next")
    assert again["status"] == "ok" and again["environment"]["process"]["start"] == "forked"


def test_a_dead_server_leaves_its_jobs_to_fresh_processes(backend: LocalBackend, tmp_path: Path) -> None:
    run_one(backend, tmp_path / "a")
    (server,) = servers(backend)
    server.proc.kill()
    server.proc.wait()
    doc = run_one(backend, tmp_path / "b")  # a new server for the key, or a fresh process: never a lost job
    assert doc["status"] == "ok"
    assert doc["environment"]["process"]["start"] in ("forked", "fresh")
    assert all(s is not server for s in servers(backend))


def test_a_server_killed_under_its_job_fails_that_job_only(tmp_path: Path) -> None:
    made = LocalBackend(echo=False, fork_rounds=True)
    with made.serving():
        run_one(made, tmp_path / "a")
        (server,) = servers(made)

        def kill_soon() -> None:
            time.sleep(1.5)
            server.proc.kill()

        threading.Thread(target=kill_soon, daemon=True).start()
        doc = run_one(made, tmp_path / "b", "mode=hang", timeout_s=60)
        assert doc["status"] != "ok"
        assert doc["environment"]["launch"]["exit_code"] == -signal.SIGKILL  # it died with its server
        assert run_one(made, tmp_path / "c")["status"] == "ok"


def calls(python: Path) -> int:
    marks = Path(str(python) + ".served")
    return len(marks.read_text()) if marks.exists() else 0


def test_a_server_that_cannot_start_leaves_the_job_to_a_fresh_process(tmp_path: Path) -> None:
    # An interpreter that runs any job fine but cannot be a server: it refuses `serve`.
    python = tmp_path / "python"
    python.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"if 'serve' in sys.argv: open({str(python) + '.served'!r}, 'a').write('x'); sys.exit(3)\nos.execv({sys.executable!r}, [{sys.executable!r}] + sys.argv[1:])\n"
    )
    python.chmod(0o755)
    made = LocalBackend(echo=False, pythons={"numpy": str(python)}, fork_rounds=True)
    with made.serving():
        doc = run_one(made, tmp_path / "run")
        assert made.pool is not None and made.pool.servers() == []
        assert run_one(made, tmp_path / "again")["environment"]["process"] == {"start": "fresh"}
        assert calls(python) == 1  # remembered: no second try for the session
    assert doc["status"] == "ok" and doc["environment"]["process"] == {"start": "fresh"}


ESCAPE = """
    if ctx.params["mode"] == "slow-start":  # planted: a setsid grandchild holding the job's pipes
        import sys as _sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(os.environ["ESCAPE_PID"] + ".tmp", "w") as handle:
                    handle.write(str(os.getpid()))
                os.rename(os.environ["ESCAPE_PID"] + ".tmp", os.environ["ESCAPE_PID"])
                print("grandchild: holding the pipes", file=_sys.stderr, flush=True)
                time.sleep(60)
            os._exit(0)
        os.wait()
"""


def test_nothing_a_forked_job_started_outlives_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = tmp_path / "code"
    shutil.copytree(SUITES_DIR, code / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    common = code / "suites" / "fault" / "common.py"
    text = common.read_text()
    anchor = '    if mode == "slow-start":\n'
    assert anchor in text
    common.write_text(text.replace(anchor, ESCAPE + anchor))
    pid_file = tmp_path / "grandchild.pid"
    monkeypatch.setenv("ESCAPE_PID", str(pid_file))
    made = LocalBackend(echo=False, suites_dir=code / "suites", fork_rounds=True)
    began = time.monotonic()
    with made.serving():
        doc = run_one(made, tmp_path / "run", "mode=slow-start", "delay_s=0")
        assert doc["status"] == "ok" and doc["environment"]["process"]["start"] == "forked"
        grandchild = int(pid_file.read_text())
        seen = read_stat(grandchild)
        assert seen is None or seen.zombie  # ended with its job, while the server still runs
        assert servers(made)[0].alive()
    assert time.monotonic() - began < 30  # the job did not wait out the grandchild's 60 s


def test_rounds_in_the_cli_fork_when_asked_and_say_so(tmp_path: Path) -> None:
    proc = harness(
        "run", "--suite", "fault", "-f", "numpy", "--rounds", "3", "--backend", "local", "--calibrate", "never",
        "--results-dir", str(tmp_path), "--processes", "forked",
    )  # fmt: skip
    assert finished(proc), proc.stderr
    folder = run_folder(proc.stdout)
    pooled = read(folder / "numpy.json")["environment"]["process"]
    assert pooled["start"] == "forked" and pooled["rounds"] == 3 and pooled["forked_rounds"] == 3
    assert [read(p)["environment"]["process"]["forked_before"] for p in sorted(folder.glob("rounds/*/numpy.json"))] == [
        0,
        1,
        2,
    ]
    assert "import once, in the fork server" in proc.stdout
    fresh = harness(
        "run",
        "--suite",
        "fault",
        "-f",
        "numpy",
        "--rounds",
        "2",
        "--backend",
        "local",
        "--calibrate",
        "never",
        "--results-dir",
        str(tmp_path / "fresh"),
    )  # fmt: skip  (the default: a new interpreter every job)
    assert finished(fresh), fresh.stderr
    assert read(run_folder(fresh.stdout) / "numpy.json")["environment"]["process"]["start"] == "fresh"
    bad = harness("run", "--suite", "fault", "--processes", "spawned", "--results-dir", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_the_server_refuses_a_job_of_another_key(tmp_path: Path) -> None:
    """A server imported under one job's settings never runs a job with other ones (the harness keys
    its servers so that it never asks; the server checks all the same)."""
    from suites.contract.job_spec import JobSpec
    from suites.runtime.fork_server import key_of

    base = {"suite": "fault", "params": {}, "repeat": 3, "warmup": 0, "device": "cpu", "timeout_s": 60.0,
            "run_id": "r", "backend": "local", "result_path": "x.json"}  # fmt: skip
    one = JobSpec(framework="numpy", threads=None, **base)  # type: ignore[arg-type]
    two = JobSpec(framework="numpy", threads=1, **base)  # type: ignore[arg-type]
    assert key_of(one) != key_of(two)
    assert key_of(one) == key_of(JobSpec(framework="numpy", threads=None, **{**base, "repeat": 9}))  # type: ignore[arg-type]
    assert json.dumps(key_of(one))  # it travels in an error line as it is


def copy_of_suites(folder: Path) -> Path:
    shutil.copytree(SUITES_DIR, folder / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "suites"


def run_sides(sides: list[LocalBackend], results: Path, order: str) -> list[dict]:
    """One fault job a letter of `order` (A: the first backend, B: the second), in one session."""
    with serving(*sides):
        docs = [run_one(sides[ord(letter) - ord("A")], results / str(n)) for n, letter in enumerate(order)]
        assert sides[0].pool is sides[1].pool
        docs.append({"servers": len(servers(sides[0]))})
    return docs


def test_two_checkouts_with_the_same_code_fork_from_one_server(tmp_path: Path) -> None:
    """harness ab's A/A: both sides' rounds are children of one server (its mark falls on both alike),
    and each child runs its own checkout's suite: B's copy fails on purpose, through the shared server."""
    copy = copy_of_suites(tmp_path / "b")
    impl = copy / "fault" / "impl_numpy.py"
    impl.write_text(PLANTED)  # the copy's numpy implementation of the suite fails, naming its folder
    sides = [LocalBackend(echo=False, fork_rounds=True), LocalBackend(echo=False, suites_dir=copy, fork_rounds=True)]
    *docs, count = run_sides(sides, tmp_path, "ABBA")
    assert count == {"servers": 1}
    assert [d["environment"]["process"]["forked_before"] for d in docs] == [0, 1, 2, 3]
    assert [d["status"] for d in docs] == ["ok", "failed", "failed", "ok"]
    assert docs[1]["reason"] == f"planted in the copy at {copy}"  # B's own code, and its own registry's folder


PLANTED = """

def run(ctx):
    from suites.contract.errors import JobError
    from suites.contract.registry import SUITES_DIR
    raise JobError(f"planted in the copy at {SUITES_DIR}")
"""


def test_sides_one_server_cannot_serve_all_run_fresh_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server per side would mark one side's rounds only: where one cannot serve both (other code
    before the fork, other interpreters), every job of the session is a fresh process."""
    copy = copy_of_suites(tmp_path / "b")
    settings = copy / "contract" / "settings.py"
    settings.write_text(settings.read_text() + "\n# one more line: the server would run other code\n")
    sides = [LocalBackend(echo=False, fork_rounds=True), LocalBackend(echo=False, suites_dir=copy, fork_rounds=True)]
    *docs, count = run_sides(sides, tmp_path / "code", "ABAB")
    assert count == {"servers": 0}
    assert [d["environment"]["process"] for d in docs] == [{"start": "fresh"}] * 4
    assert all(d["status"] == "ok" for d in docs)
    err = capsys.readouterr().err
    assert err.count("this session's jobs run in fresh processes") == 1
    assert f"is not the same in {tmp_path / 'b'}" in err
    python = tmp_path / "python"
    python.symlink_to(sys.executable)  # the same interpreter under another name: not provably the same
    sides = [
        LocalBackend(echo=False, fork_rounds=True),
        LocalBackend(echo=False, pythons={"numpy": str(python)}, fork_rounds=True),
    ]
    *docs, count = run_sides(sides, tmp_path / "python-runs", "AB")
    assert count == {"servers": 0} and [d["environment"]["process"]["start"] for d in docs] == ["fresh"] * 2
    assert "different interpreters or limits" in capsys.readouterr().err


def test_a_server_shares_only_what_it_can_prove_is_the_same(tmp_path: Path) -> None:
    from harness.backends.fork_pool import same_code

    copy = copy_of_suites(tmp_path / "b")
    backend = LocalBackend(echo=False, suites_dir=copy, fork_rounds=True)
    with backend.serving():
        run_one(backend, tmp_path / "run")
        (server,) = servers(backend)
        assert "suites/contract/settings.py" in server.code and "suites/runtime/fork_server.py" in server.code
        assert "suites/fault/spec.py" in server.code  # what the spec reader loaded (every suite's spec)
        # the suite's implementation is imported by the child, from its own checkout
        assert "suites/fault/common.py" not in server.code and "suites/fault/impl_numpy.py" not in server.code
        root = str(tmp_path / "b")
        assert same_code(server, root) and same_code(server, str(SUITES_DIR.parent))
        real = dict(server.code)
        for planted in ("suites/../../etc/passwd.py", "/etc/passwd", "suites/x.so"):
            server.code = {**real, planted: "0" * 64}
            assert not same_code(server, root)
        settings = copy / "contract" / "settings.py"
        moved = settings.with_name("moved.py")
        settings.rename(moved)
        settings.symlink_to(moved)  # the same bytes through a link: never followed
        server.code = real
        assert not same_code(server, root)
        server.code = {}
        assert not same_code(server, root)  # a server that reported nothing shares nothing
