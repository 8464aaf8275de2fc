"""`harness bisect`: generated locks, the verdict rule, and a planted slowdown found end to end."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import zipfile
from itertools import pairwise
from pathlib import Path

import pytest

from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.execute.bisect import record
from harness.execute.bisect.envs import env_for, install_command, venv_command
from harness.execute.bisect.locks import (
    check_package,
    check_version,
    download_command,
    generate_lock,
    parse_versions,
    wheel_hashes,
)
from harness.execute.bisect.run import rounds_needed
from harness.execute.bisect.verdict import MIN_ROUNDS, VersionRun, answer, compare_pair, exit_code, first_change, judge
from harness.judge.assessment import DISTURBED
from harness.store.images import locked_packages, sha256_file
from tests.conftest import REPO, finished, harness

NUMPY_LOCK = (REPO / "images" / "numpy" / "lock-cpu.txt").read_text()
H1, H2 = "a" * 64, "b" * 64

BASE_WORK = """
import time


def spin(seconds):
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass
    return deadline

"""
WORK = {
    "1.0": BASE_WORK + "def work():\n    return spin(0.002)\n",
    "1.1": BASE_WORK + "def work():\n    return spin(0.002)\n",
    "2.0": BASE_WORK + "def work():\n    spin(0.005)  # the planted slowdown\n    return spin(0.002)\n",
    "2.1": BASE_WORK + "def work():\n    spin(0.005)  # the planted slowdown, unchanged\n    return spin(0.002)\n",
}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(folder: Path, name: str, version: str, code: str) -> Path:
    """A pure-Python wheel written by hand: offline and instant."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": code.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: harness-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)
    return path


# ---------------------------------------------------------------------------------------------
# Locks


def test_a_locked_package_is_replaced_with_the_new_pin_and_only_its_hashes() -> None:
    text = generate_lock(NUMPY_LOCK, "threadpoolctl", "3.7.0", [H1, H2])
    assert locked_packages(text) == {**locked_packages(NUMPY_LOCK), "threadpoolctl": "3.7.0"}
    entry = text[text.index("threadpoolctl==") :]
    assert f"--hash=sha256:{H1} \\\n    --hash=sha256:{H2}\n" in entry
    assert "threadpoolctl==3.8.0" not in text
    assert text.count("--hash=") == NUMPY_LOCK.count("--hash=") - _hashes_of(NUMPY_LOCK, "threadpoolctl") + 2
    # every other entry is the stack's, byte for byte
    assert text[: text.index("threadpoolctl")] == NUMPY_LOCK[: NUMPY_LOCK.index("threadpoolctl")]


def _hashes_of(lock: str, name: str) -> int:
    start = lock.index(f"{name}==")
    block = lock[start:].split("\n")
    count = 0
    for line in block[1:]:
        if "--hash=" not in line:
            break
        count += 1
    return count


def test_a_package_the_lock_lacks_is_appended_and_names_are_matched_as_pep_503() -> None:
    text = generate_lock(NUMPY_LOCK, "fwh_plant", "2.0", [H1])
    assert text.startswith(NUMPY_LOCK.rstrip("\n"))
    assert text.rstrip().splitlines()[-2:] == [f"    --hash=sha256:{H1}", text.rstrip().splitlines()[-1]]
    assert locked_packages(text)["fwh-plant"] == "2.0"
    again = generate_lock(text, "FWH-Plant", "1.0", [H2])  # same project, other spelling: replaced
    assert locked_packages(again)["fwh-plant"] == "1.0" and H1 not in again and again.count("==") == 4


def test_hashes_come_from_the_downloaded_files_and_the_download_targets_the_images(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "fwh_plant", "1.0", "def work():\n    return 1\n")
    (tmp_path / "other-1.0-py3-none-any.whl").write_bytes(b"x")
    (tmp_path / "fwh_plant-1.0-cp311-cp311-win_amd64.whl").write_bytes(b"y")  # not the images' platform
    assert wheel_hashes(tmp_path, "fwh-plant") == [sha256_file(wheel)]
    cmd = download_command("fwh_plant", "1.0", tmp_path, [tmp_path], no_index=True)
    assert cmd[3:7] == ["download", "fwh_plant==1.0", "--no-deps", "--only-binary=:all:"]
    assert "3.11" in cmd and "manylinux_2_17_x86_64" in cmd and "any" in cmd and cmd[-1] == "--no-index"
    lock = tmp_path / "lock.txt"
    lock.write_text("x")
    install = install_command(Path("/env/bin/python"), lock, [], no_index=False)
    assert "--require-hashes" in install and "--only-binary=:all:" in install and "--no-index" not in install
    assert install[:3] == ["/env/bin/python", "-m", "pip"]
    # Without a pip of its own, the venv is installed into by this interpreter's pip, pointed at it.
    host = install_command(Path("/env/bin/python"), lock, [], no_index=False, with_pip=False)
    assert host[:5] == [sys.executable, "-m", "pip", "--python", "/env/bin/python"] and host[5:] == install[3:]
    assert "--without-pip" in venv_command(Path("/env"), with_pip=False)
    assert "--without-pip" not in venv_command(Path("/env"), with_pip=True)


def test_the_venv_is_named_by_the_lock_hash(tmp_path: Path) -> None:
    env = env_for("numpy", "abc")
    expected = cache_home.home() / "bisect-venvs" / f"numpy-{hashlib.sha256(b'abc').hexdigest()[:12]}"
    assert env.folder == expected  # in the cache home: a bisect from another results folder reuses it
    assert env.record() == {
        "runtime": "venv",
        "id": str(env.folder),
        "stack": "numpy",
        "variant": "cpu",
        "lock_hash": hashlib.sha256(b"abc").hexdigest(),
    }
    assert not env.ready


@pytest.mark.parametrize("version", ["", ".", "..", "../x", "1.0/..", "1 0", "1.0\n", "-1", "a" * 65, "1;rm", "1$x"])
def test_hostile_versions_are_refused(version: str) -> None:
    with pytest.raises(HarnessError):
        check_version(version)


@pytest.mark.parametrize("name", ["", "../x", "a/b", "-x", "x-", "a b", "x==1", "x\n", "a" * 101, "x;y"])
def test_hostile_package_names_are_refused(name: str) -> None:
    with pytest.raises(HarnessError):
        check_package(name)
    with pytest.raises(HarnessError):
        generate_lock(NUMPY_LOCK, name, "1.0", [H1])


def test_version_lists_are_checked() -> None:
    assert parse_versions(" 0.4.35, 0.4.36 ,1.0rc1+local") == ["0.4.35", "0.4.36", "1.0rc1+local"]
    for text in ("1.0", "1.0,1.0", "1.0,../../etc"):
        with pytest.raises(HarnessError):
            parse_versions(text)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    base = ["bisect", "--suite", "plant", "--metric", "work", "--stack", "numpy", "--results-dir", str(tmp_path)]
    for extra in (
        ["--package", "fwh_plant", "--versions", "1.0,../x"],
        ["--package", "../x", "--versions", "1.0,2.0"],
        ["--package", "fwh_plant", "--versions", "1.0,2.0", "--rounds", "3"],
        ["--package", "fwh_plant", "--versions", "1.0,2.0", "--framework", "jax"],
    ):
        proc = harness(*base, *extra)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert not (cache_home.home() / "bisect-venvs").exists()


# ---------------------------------------------------------------------------------------------
# Verdicts


def _run(version: str, medians: list[float]) -> VersionRun:
    return VersionRun(version, medians, [m for m in medians for _ in range(3)])


def test_the_first_significant_change_is_named_and_equal_versions_are_not_significant() -> None:
    runs = [
        _run("1.0", [2.00e-3, 2.01e-3, 1.99e-3, 2.02e-3, 2.00e-3]),
        _run("1.1", [2.01e-3, 1.98e-3, 2.00e-3, 2.03e-3, 2.01e-3]),
        _run("2.0", [7.00e-3, 7.02e-3, 6.99e-3, 7.01e-3, 7.03e-3]),
        _run("2.1", [14.0e-3, 14.1e-3, 13.9e-3, 14.2e-3, 14.3e-3]),
    ]
    pairs = judge([compare_pair(a, b, "work", "s", "lower") for a, b in pairwise(runs)])
    assert [p.verdict for p in pairs][0] == "not significant"
    assert pairs[1].significant and pairs[1].verdict.endswith("slower")
    assert answer(pairs) == f"first significant change: 2.0 ({pairs[1].verdict} than 1.1)"
    assert answer(pairs[:1]) == "no significant change between consecutive versions"


def test_separated_but_few_round_medians_and_missing_versions_give_no_verdict() -> None:
    few = compare_pair(_run("a", [1.0, 1.1, 1.2]), _run("b", [2.0, 2.1, 2.2]), "work", "s", "lower")
    assert not few.significant and few.change is not None and few.change.p_value >= 0.05  # 3 rounds: p >= 0.1
    broken = VersionRun("b", [], [], "round 1: failed: boom")
    pair = compare_pair(_run("a", [1.0, 1.1, 1.2, 1.3]), broken, "work", "s", "lower")
    assert pair.verdict == "excluded: b: round 1: failed: boom"
    # "no change" would be a verdict on a pair nobody measured
    assert answer([pair]) == "no verdict: a -> b could not be judged (b: round 1: failed: boom)"


def test_a_version_the_machine_disturbed_is_no_verdict_and_exit_3_and_a_failed_one_exit_1() -> None:
    quiet = [_run("1.0", [2.0, 2.1, 1.9, 2.0]), _run("1.1", [2.0, 2.1, 1.9, 2.05]), _run("2.0", [7.0, 7.1, 6.9, 7.05])]
    busy = VersionRun("1.1", [], [], "fewer than two rounds the machine left alone", disturbed=True)
    broken = VersionRun("1.1", [], [], "round 1: failed: boom")
    assert exit_code(quiet, []) == 0 and exit_code([quiet[0], busy], []) == 3 and exit_code([busy, broken], []) == 1
    pairs = judge([compare_pair(a, b, "work", "s", "lower") for a, b in pairwise([quiet[0], busy, quiet[2]])])
    assert answer(pairs).startswith("no verdict: 1.0 -> 1.1 could not be judged")
    # A change found after a pair that could not be judged may not be the first: the answer says so.
    six = [_run(v, [m, m * 1.01, m * 0.99, m * 1.02, m * 0.98, m]) for v, m in (("1.2", 2.0), ("2.0", 7.0))]
    first = VersionRun("0.9", [], [], "fewer than two rounds the machine left alone", disturbed=True)
    ahead = judge([compare_pair(a, b, "work", "s", "lower") for a, b in pairwise([first, *six])])
    assert first_change(ahead) is ahead[1] and answer(ahead).endswith(
        "; but earlier, 0.9 -> 1.2 could not be judged (0.9: fewer than two rounds the machine left alone)"
    )


def test_rounds_the_machine_took_away_leave_no_verdict_never_no_change_and_exit_3() -> None:
    """4 rounds asked for, one of 1.1's disturbed and left out: 3 against 4 cannot reach p < 0.05, however
    far apart. That is the machine's doing, not a finding: no "no significant change", exit 3."""
    before = VersionRun("1.1", [2.0, 2.01, 1.99], [2.0] * 9, left_out=1, rounds=4)
    after = _run("2.0", [7.0, 7.01, 6.99, 7.02])
    [pair] = judge([compare_pair(before, after, "work", "s", "lower")])
    assert not pair.significant and pair.disturbed
    assert pair.verdict == (
        "no verdict: the machine disturbed 1 of 4 rounds of 1.1 (left out); the 3 left cannot give one: "
        "rerun on a quiet machine"
    )
    assert answer([pair]).startswith("no verdict: 1.1 -> 2.0 could not be judged (the machine disturbed 1 of 4")
    assert exit_code([before, after], [pair]) == 3
    # Too few rounds with nothing left out is no verdict too, but the user's to mend: not the machine's.
    [few] = judge([compare_pair(_run("1.1", [2.0, 2.01, 1.99]), after, "work", "s", "lower")])
    assert not few.disturbed and answer([few]).startswith("no verdict: 1.1 -> 2.0 could not be judged (3 processes")
    # Left-out rounds that still leave enough for a verdict change nothing.
    five = VersionRun("1.1", [2.0, 2.01, 1.99, 2.02], [2.0] * 12, left_out=1, rounds=5)
    [kept] = judge([compare_pair(five, after, "work", "s", "lower")])
    assert kept.significant and not kept.disturbed and exit_code([five, after], [kept]) == 0


def test_faster_is_a_change_too() -> None:
    [pair] = judge(
        [compare_pair(_run("a", [2.0, 2.1, 2.2, 2.3]), _run("b", [1.0, 1.1, 1.0, 1.1]), "work", "s", "lower")]
    )
    assert pair.significant and "faster" in answer([pair])


def test_the_pairs_of_a_bisect_are_one_family() -> None:
    """Three pairs at 4 rounds: alone each separated pair reaches p = 0.029, but no Holm-corrected one can."""
    runs = [
        _run(v, [base + 0.01 * k for k in range(4)]) for v, base in (("1", 1.0), ("2", 2.0), ("3", 3.0), ("4", 4.0))
    ]
    raw = [compare_pair(a, b, "work", "s", "lower") for a, b in pairwise(runs)]
    assert all(p.change is not None and p.change.p_value < 0.05 for p in raw)
    assert not any(p.significant for p in raw)  # never corrected: never significant
    judged = judge(raw)
    assert not any(p.significant for p in judged)
    assert all(p.verdict == "no verdict: 4 processes a version; `--rounds 5` gives one" for p in judged), judged
    assert rounds_needed(["1", "2", "3", "4"]) == 5 and rounds_needed(["1", "2"]) == MIN_ROUNDS == 4


def test_the_record_is_validated() -> None:
    with pytest.raises(HarnessError):
        record.validate({"format": "harness-bisect", "version": 1})
    with pytest.raises(HarnessError):
        record.validate({"format": "other", "version": 1})


# ---------------------------------------------------------------------------------------------
# End to end (real venvs: numpy and scipy from the index or pip's cache)


@pytest.mark.slow
def test_bisect_finds_the_planted_slowdown(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version, code in WORK.items():
        build_wheel(wheels, "fwh_plant", version, code)
    results = tmp_path / "results"
    proc = harness(
        "bisect", "--suite", "plant", "--metric", "work", "--stack", "numpy", "--package", "fwh_plant",
        "--versions", "1.0,2.0,2.1", "--find-links", str(wheels), "--rounds", "6", "--repeat", "3",
        "--results-dir", str(results), "-q",
    )  # fmt: skip
    # The change comes first and the equal pair after it: a chance verdict on equal versions (the
    # family-wise 5 % the rule allows; the interval is the test's own) cannot move the answer.
    assert finished(proc), proc.stdout + proc.stderr
    found = "first significant change: 2.0 (" in proc.stdout and "slower than 1.0)" in proc.stdout
    folder = Path(proc.stdout.rsplit("bisect folder: ", 1)[1].strip())
    doc = record.load(folder / "bisect.json")
    if proc.returncode == DISTURBED and not found:  # a busy machine: a pair left unjudged, said so
        assert "no verdict: " in proc.stdout and "could not be judged" in proc.stdout, proc.stdout
        assert doc["answer"]["version"] is None
    else:
        assert found, proc.stdout
        assert doc["answer"]["version"] == "2.0"
        assert doc["pairs"][0]["significant"] and doc["pairs"][0]["ratio"] > 2
    for version in ("1.0", "2.0", "2.1"):
        lock = folder / "locks" / f"{version}.txt"
        assert locked_packages(lock.read_text())["fwh-plant"] == version
        assert doc["locks"][version]["lock_hash"] == sha256_file(lock)
        result = json.loads((folder / version / "round-2" / "numpy.json").read_text())
        assert result["image"]["lock_hash"] == sha256_file(lock) and result["image"]["runtime"] == "venv"
    # A second bisect reuses the venvs (recorded lock hash matches).
    again = harness(
        "bisect", "--suite", "plant", "--metric", "work", "--stack", "numpy", "--package", "fwh_plant",
        "--versions", "1.0,2.0", "--find-links", str(wheels), "--rounds", "4", "--repeat", "3",
        "--results-dir", str(results), "-q",
    )  # fmt: skip
    assert finished(again), again.stdout + again.stderr
    assert again.stdout.count("reused ") == 2 and "built " not in again.stdout


@pytest.mark.slow
def test_two_real_versions_of_one_package(tmp_path: Path) -> None:
    proc = harness(
        "bisect", "--suite", "xla", "--metric", "matmul", "--stack", "numpy", "--package", "threadpoolctl",
        "--versions", "3.7.0,3.8.0", "--param", "matrix_size=64", "--rounds", "4", "--repeat", "5",
        "--results-dir", str(tmp_path / "results"), "-q",
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    folder = Path(proc.stdout.rsplit("bisect folder: ", 1)[1].strip())
    doc = record.load(folder / "bisect.json")
    for version in ("3.7.0", "3.8.0"):
        lock = (folder / "locks" / f"{version}.txt").read_text()
        assert locked_packages(lock) == {**locked_packages(NUMPY_LOCK), "threadpoolctl": version}
        env = Path(doc["locks"][version]["env"])
        assert sha256_file(env / "lock.txt") == doc["locks"][version]["lock_hash"]
        assert list((env / "lib").glob(f"python3.11/site-packages/threadpoolctl-{version}.dist-info"))
    assert doc["pairs"][0]["verdict"]
    assert doc["answer"]["text"] in proc.stdout
