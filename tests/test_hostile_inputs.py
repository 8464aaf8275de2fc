"""Hostile inputs, third pass (issue 36): the newest commands (`ab`, `noise`, `history`, `--junit`) held
to the standard of the old ones. Each test here failed on the code before the fix.

What every refusal looks like: exit 2 (or the documented code), one line on stderr, no traceback,
and nothing on disk changed that the harness does not own.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.core.safe_files import UnsafeFile, write_bytes_atomic
from harness.judge import noise_floor
from harness.store import run_folder as run_folder_module
from harness.store.run_folder import suites_digest
from harness.text.escape import html, markdown, plain, utf8
from tests.conftest import harness, interrupt_at, read, run_folder
from tests.factories import metric, result
from tests.test_publish import write

LONE = "\ud800"  # valid JSON ("\ud800"), valid in a Python str, and no encoder writes it
LONG = "a" * 300  # one name over the 255 bytes a file system allows


def one_line(proc: subprocess.CompletedProcess[str], code: int = 2, says: str = "") -> None:
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert says in proc.stderr, proc.stderr


# -- 1. lone surrogates reach every writer, and none raises ------------------------------------------


def surrogate_runs(root: Path) -> Path:
    """Six xla runs, the last three on a machine whose CPU model carries a lone surrogate (so history
    draws two series, each labelled with its machine); every run's note carries one too."""
    results = root / "results"
    for day in range(1, 7):
        doc = result("numpy", [metric("matmul", [0.10, 0.11, 0.10])])
        doc["started_at"] = doc["finished_at"] = f"2024-05-0{day}T12:00:00.000+00:00"
        cpu = {"model": "CPU A" if day <= 3 else f"CPU {LONE} x", "logical_cores": 4}
        doc["environment"] = {"versions": {"numpy": "1.26.4"}, "machine": {"cpu": cpu}}
        doc["notes"] = [f"a note {LONE}"]
        write(results, f"run-{day}", f"run-{day}", [doc])
    return results


def test_the_escapers_show_a_lone_surrogate_and_the_encoder_never_raises() -> None:
    assert plain(LONE) == html(LONE) == "\\ud800" and markdown(LONE) == "\\\\ud800"  # Markdown: \\ is a backslash
    for escaped in (plain(LONE), markdown(LONE), html(LONE)):
        assert escaped.encode("utf-8")
    assert utf8(f"a{LONE}b") == b"a\\ud800b"


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "html"])
def test_history_and_show_print_a_lone_surrogate_in_every_format(tmp_path: Path, fmt: str) -> None:
    results = surrogate_runs(tmp_path)
    junit = tmp_path / "history.xml"
    proc = harness("history", str(results), "--suite", "xla", "--format", fmt, "--junit", str(junit))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert junit.read_bytes().decode("utf-8")  # written, and valid UTF-8
    shown = harness("show", str(results / "run-6"), "--format", fmt)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr


def test_report_publish_and_compare_write_a_lone_surrogate_as_an_escape(tmp_path: Path) -> None:
    results = surrogate_runs(tmp_path)
    report = harness("report", str(results / "run-6"), "--no-figures")
    assert report.returncode == 0, report.stderr
    text = (results / "run-6" / "report" / "report.md").read_text(encoding="utf-8")
    assert "\\ud800" in text or "\\\\ud800" in text  # the note, escaped (Markdown doubles the backslash)
    site = tmp_path / "site"
    published = harness("publish", str(results), "--out", str(site))
    assert published.returncode == 0, published.stderr
    assert (site / "index.html").is_file()  # the whole site, not the pages before the first surrogate
    junit = tmp_path / "compare.xml"
    compared = harness("compare", str(results / "run-5"), str(results / "run-6"), "--junit", str(junit))
    assert compared.returncode == 0 and junit.read_bytes().decode("utf-8"), compared.stderr


# -- 2. a write never replaces a FIFO, a socket or a device --------------------------------------------


def test_junit_at_a_fifo_or_a_socket_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    results = surrogate_runs(tmp_path)
    fifo = tmp_path / "pipe.xml"
    os.mkfifo(fifo)
    proc = harness("compare", str(results / "run-1"), str(results / "run-2"), "--junit", str(fifo))
    one_line(proc, says="is a FIFO")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    sock_path = tmp_path / "s.xml"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        proc = harness("history", str(results), "--suite", "xla", "--junit", str(sock_path))
        one_line(proc, says="is a socket")
        assert stat.S_ISSOCK(sock_path.lstat().st_mode)


def test_the_atomic_write_itself_refuses_to_rename_over_a_fifo(tmp_path: Path) -> None:
    """The second guard (a FIFO planted between the CLI's check and the write)."""
    fifo = tmp_path / "out.xml"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFile, match="is a FIFO"):
        write_bytes_atomic(fifo, b"<x/>")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["out.xml"]


# -- 3 and 4. a noise-floor file that is not one ---------------------------------------------------------

DETECT = ("run", "--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=8", "--detect", "5%", "--dry-run")


def _plant(path: Path, how: str, tmp_path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "link":
        target = tmp_path / "elsewhere.json"
        target.write_text("{}")
        path.symlink_to(target)
    elif how == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(
            {
                "not json": b"this is not JSON",
                "nan": b'{"format": "harness-noise", "version": 1, "workloads": {"x": NaN}}',
                "deep": b"[" * 100_000 + b"]" * 100_000,
            }[how]
        )


@pytest.mark.parametrize("how", ["not json", "nan", "deep", "link", "fifo"])
def test_a_broken_noise_floor_file_is_one_line_naming_the_fix(tmp_path: Path, how: str) -> None:
    path = noise_floor.file_for(noise_floor.host_fingerprint("cpu", None))
    _plant(path, how, tmp_path)
    one_line(harness(*DETECT, "--backend", "local"), says="delete it and run `harness noise` again")


def test_a_noise_of_1e300_is_refused_not_an_overflow(tmp_path: Path) -> None:
    machine = noise_floor.host_fingerprint("cpu", None)
    key = noise_floor.key("xla", {"matrix_size": 8}, "fp32", "cpu")
    entry = {"label": "xla", "rounds": 6, "seconds_per_round": 1.0,
             "noise": {"numpy": {"matmul": 1e300}, "jax": {"matmul": 0.01}}}  # fmt: skip
    doc = {
        "format": noise_floor.FORMAT,
        "version": noise_floor.VERSION,
        "fingerprint": machine,
        "workloads": {key: entry},
    }
    path = noise_floor.file_for(machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    one_line(harness(*DETECT, "--backend", "local"), says="at most 3")
    with pytest.raises(HarnessError, match="at most 3"):
        noise_floor.load(machine)


# -- 5. Ctrl-C stops `harness noise` --------------------------------------------------------------------


@pytest.mark.slow
def test_ctrl_c_stops_noise_and_stores_no_floor(tmp_path: Path, own_cache_home: Path) -> None:
    code, out, err = interrupt_at("== round 2/3", "noise", "--suite", "fault", "-f", "numpy", "-p", "work=100",
                                  "--rounds", "3", "--sessions", "3", "--repeat", "3", "--backend", "local",
                                  "--results-dir", str(tmp_path / "r"))  # fmt: skip
    assert code == 130, out[-2000:] + err
    assert "no noise floor stored (0 of 3 session(s) finished" in err and "Traceback" not in err
    assert not list((own_cache_home / "noise").glob("*.json")) if (own_cache_home / "noise").exists() else True
    assert len(list((tmp_path / "r").iterdir())) == 1  # the sessions after the interrupted one never started


# -- 6. --resume trusts nothing plan.json or summary.json says about itself ----------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("resume")
    proc = harness("run", "--suite", "fault", "-f", "numpy", "-p", "work=100", "--repeat", "3",
                   "--backend", "local", "--results-dir", str(results))  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    return run_folder(proc.stdout)


def _edit(path: Path, change: Any) -> bytes:
    original = path.read_bytes()
    doc = json.loads(original)
    change(doc)
    path.write_text(json.dumps(doc))
    return original


def _forge_run_id(plan: dict[str, Any]) -> None:
    plan["run_id"] = plan["run_id"][:-4] + ("0000" if not plan["run_id"].endswith("0000") else "1111")


@pytest.mark.parametrize(
    ("file", "change", "says"),
    [
        ("plan.json", _forge_run_id, "the plan was edited or copied"),
        ("plan.json", lambda plan: plan["jobs"][0].update(stack="evil"), "stack 'evil' is not"),
        ("summary.json", lambda s: s["jobs"][0].update(file="../../../etc/passwd"), "no plain result file name"),
    ],
)
def test_resume_refuses_a_tampered_plan_or_summary_and_keeps_the_result(
    finished_run: Path, file: str, change: Any, says: str
) -> None:
    before = (finished_run / "numpy.json").read_bytes()
    original = _edit(finished_run / file, change)
    try:
        proc = harness("run", "--resume", str(finished_run), "--results-dir", str(finished_run.parent))
        one_line(proc, says=says)
    finally:
        (finished_run / file).write_bytes(original)
    assert (finished_run / "numpy.json").read_bytes() == before
    assert read(finished_run / "summary.json")["run_id"] == finished_run.name


# -- 7, 8 and 9. an `ab` side's suites/ tree ------------------------------------------------------------

AB = ("--suite", "xla", "-f", "numpy", "-p", "matrix_size=8", "--dry-run", "--backend", "local")


def _tree(root: Path) -> Path:
    suites = root / "suites"
    suites.mkdir(parents=True)
    (suites / "__init__.py").write_text("")
    (suites / "__main__.py").write_text("")
    (suites / "xla").mkdir()
    (suites / "xla" / "__init__.py").write_text("")
    return root


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        (lambda s: [p.unlink() for p in s.iterdir() if p.is_file()] and (s / "x.txt").write_text(""), "no suites/__"),
        (lambda s: os.mkfifo(s / "odd.py"), "has a FIFO at suites/odd.py"),
        (lambda s: (s / "xla2").symlink_to("xla"), "has a symbolic link at suites/xla2"),
        (lambda s: (s / "leak.py").symlink_to("/etc/passwd"), "has a symbolic link at suites/leak.py"),
    ],
)
def test_an_ab_folder_side_that_is_not_a_plain_suites_package_is_refused_before_anything(
    tmp_path: Path, plant: Any, says: str
) -> None:
    side = _tree(tmp_path / "side")
    plant(side / "suites")
    proc = harness("ab", str(side), *AB, "--results-dir", str(tmp_path / "r"))
    one_line(proc, says=says)
    assert not (tmp_path / "r").exists()


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return proc.stdout.strip()


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        (None, None),
        (lambda s: (s / "out.py").symlink_to("/etc/passwd"), "has a link at suites/out.py"),
        (lambda s: (s / "up.py").symlink_to("../../outside.py"), "has a link at suites/up.py"),
        (lambda s: (s / "xla2").symlink_to("xla"), "has a link at suites/xla2"),
        (lambda s: (s / "__init__.py").unlink(), "has no suites/__init__.py"),
    ],
)
def test_a_revision_whose_suites_hold_links_or_no_package_is_refused(tmp_path: Path, plant: Any, says: Any) -> None:
    repo = _tree(tmp_path / "repo")
    if plant is not None:
        plant(repo / "suites")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "x")
    from harness.store import suites_tree  # imported here: the module is new, the rest of this file runs on older code

    problem = suites_tree.revision_problem(repo, _git(repo, "rev-parse", "HEAD"))
    assert problem == says if says is None else (problem is not None and says in problem), problem


def test_the_suites_digest_skips_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """A FIFO named *.py would hang the digest, a folder named *.py crash it: neither is code."""
    suites = _tree(tmp_path / "side") / "suites"
    before = suites_digest(suites)
    os.mkfifo(suites / "odd.py")
    (suites / "dir.py").mkdir()
    assert suites_digest(suites) == before


# -- 10. a name longer than the file system allows, on every command ----------------------------------


def long_cases(tmp: Path) -> list[list[str]]:
    long = str(tmp / LONG)
    results = str(tmp / "results")
    return [
        ["show", long],
        ["compare", long, long],
        ["report", long],
        ["history", long, "--suite", "xla"],
        ["publish", results, "--out", long],
        ["publish", long],
        ["noise", long],
        ["reproduce", long],
        ["ab", long, "--suite", "xla", "-f", "numpy", "--dry-run"],
        ["run", "--suite", "xla", "-f", "numpy", "--smoke", "--results-dir", long],
        ["run", "--resume", LONG, "--results-dir", results],
        ["run", "--suite", "mnist", "-f", "pytorch", "--smoke", "--data-dir", long, "--dry-run"],
        ["collect", long],
        ["compare", str(tmp / "results" / "x"), str(tmp / "results" / "y"), "--junit", long],
    ]


def test_a_name_over_255_bytes_is_one_line_on_every_command(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    for args in long_cases(tmp_path):
        proc = harness(*args)
        assert proc.returncode == 2, (args[:2], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (args[:2], proc.stderr)


# -- the smaller risks ---------------------------------------------------------------------------------


def test_every_rejected_result_file_is_an_error_not_an_empty_success(tmp_path: Path) -> None:
    results = surrogate_runs(tmp_path)
    (results / "run-1" / "numpy.json").write_text("{}")
    for args in (["show", str(results / "run-1")], ["report", str(results / "run-1")],
                 ["compare", str(results / "run-1"), str(results / "run-2")]):  # fmt: skip
        one_line(harness(*args), says="none of its result files could be read")


def test_digits_of_other_scripts_and_a_file_as_a_folder_are_refused() -> None:
    one_line(harness("run", "--suite", "xla", "-p", "matrix_size=\u0663\u0662", "--dry-run"), says="matrix_size")
    one_line(
        harness("run", "--suite", "xla", "--data-dir", "/etc/passwd", "--dry-run"), says="is a file; give a directory"
    )


def test_history_says_what_did_not_match_without_none(tmp_path: Path) -> None:
    results = surrogate_runs(tmp_path)
    proc = harness("history", str(results), "--suite", "xla", "--metric", "nothing")
    one_line(proc, says="--metric 'nothing'")
    assert "None" not in proc.stderr


def test_a_mirror_that_fails_is_exit_1_not_bad_input(tmp_path: Path) -> None:
    """A server fault (here: nothing listens) is not the user's input: exit 1, one line."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: a refused connection
    proc = harness(
        "data",
        "fetch",
        "mnist",
        "--source",
        "archive",
        "--mirror",
        f"http://127.0.0.1:{port}/",
        "--data-dir",
        str(tmp_path),
    )
    one_line(proc, code=1, says="could not download")


def test_history_reads_only_the_suites_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another suite's runs cost a summary each: their result files are never opened."""
    from harness.publish import collect

    results = surrogate_runs(tmp_path)
    other = shutil.copytree(results / "run-1", results / "run-jit")
    summary = read(other / "summary.json")
    summary["suite"] = "jit"
    (other / "summary.json").write_text(json.dumps(summary))
    opened: list[Path] = []
    real = run_folder_module.load_result
    monkeypatch.setattr(run_folder_module, "load_result", lambda path: opened.append(path) or real(path))
    catalogue = collect.collect(results, suite="xla")
    assert [entry.folder for entry in catalogue.runs] == [f"run-{day}" for day in range(1, 7)]
    assert catalogue.seen == {"xla", "jit"} and len(opened) == 6 and other / "numpy.json" not in opened


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_history_shows_progress_on_a_terminal_and_clears_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 runs: a progress line through the reading and through the change-point search, each
    cleared before the answer; in a pipe (no terminal) nothing but the answer."""
    from harness.cli import history as history_cli
    from harness.cli.main import main

    results = tmp_path / "results"
    for n in range(history_cli.SHOW_FROM):
        doc = result("numpy", [metric("matmul", [0.10 + 0.001 * (n % 3)] * 3)])
        doc["started_at"] = doc["finished_at"] = f"2024-05-01T{n // 60:02d}:{n % 60:02d}:00.000+00:00"
        write(results, f"run-{n:03d}", f"run-{n:03d}", [doc])
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(SystemExit) as exit_info:
        main(["history", str(results), "--suite", "xla", "--format", "json"])
    assert exit_info.value.code in (0, None)
    shown = terminal.getvalue()
    assert f"\rreading run folders: {history_cli.SHOW_FROM}/{history_cli.SHOW_FROM}" in shown, shown[-500:]
    assert "\rfinding change points, series: 1/1" in shown, shown[-500:]  # one series: numpy's matmul
    assert shown.count("\r\033[K") == 2  # both lines cleared
    piped = harness("history", str(results), "--suite", "xla", "--format", "json")
    assert piped.returncode == 0 and "reading run folders" not in piped.stderr, piped.stderr
