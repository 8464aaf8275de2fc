"""Bad input: one line naming the problem and the fix, exit code 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import harness


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "nope"], "unknown suite 'nope'; choose one of: "),
        (
            ["--suite", "xla", "--frameworks", "numpy,tensorflow"],
            "unknown framework 'tensorflow' for suite xla; choose from: numpy, jax, pytorch",
        ),
        (["--suite", "xla", "--param", "size=3"], "unknown parameter 'size' for suite xla; valid: matrix_size, seed"),
        (["--suite", "xla", "--param", "matrix_size=big"], "matrix_size='big' is not valid: expected an integer"),
        (["--suite", "xla", "--param", "matrix_size=1"], "out of range: expected an integer >= 2"),
        (["--suite", "xla", "--param", "matrix_size"], "not of the form key=value"),
        (
            ["--suite", "xla", "--frameworks", "numpy", "--baseline", "jax"],
            "--baseline 'jax' is not among --frameworks",
        ),
        (["--suite", "xla", "--repeat", "0"], "--repeat 0 must be at least 1"),
        (["--suite", "xla", "--frameworks", "numpy,numpy"], "names a framework twice"),
        (["--suite", "xla", "--python", "jax"], "--python 'jax' is not of the form STACK=PATH"),
        # issue 23: what was accepted and meant something else
        (["--suite", "xla", "-p", "matrix_size=8", "-p", "matrix_size=9"], "--param matrix_size is given twice"),
        (["--suite", "xla", "--frameworks", ","], "has an empty name"),
        (["--suite", "xla", "--frameworks", "numpy,"], "has an empty name"),
        (["--suite", "xla", "--rounds", "1000000"], "--rounds 1000000 must be between 1 and 50"),
    ],
)
def test_bad_run_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    results = tmp_path / "results"
    proc = harness("run", *args, "--results-dir", str(results))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not results.exists() or not any(results.iterdir())


def test_results_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    proc = harness(
        "run", "--suite", "xla", "--frameworks", "numpy", "--param", "matrix_size=4", "--results-dir", str(target)
    )
    assert proc.returncode == 2
    assert "is a file; give a directory" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--suite", "xla", "--device", "tpu"], "'tpu' is not one of 'cpu', 'gpu'. (see `harness run --help`)"),
        (["run", "--frobnicate"], "No such option: --frobnicate"),
        (["show"], "Missing argument 'RUN'. (see `harness show --help`)"),
        (["bogus"], "No such command 'bogus'. (see `harness --help`)"),
        (["build", "--variant", "rocm"], "--variant"),
        (["export", "k8s", "--suite", "xla", "--out", "x", "--variant", "cuda13"], "'cuda13' is not one of"),
        (["run", "--suite", "xla", "--transfer", "ftp"], "'ftp' is not one of 'auto', 'bind', 'copy'"),
        (["run", "--suite", "xla", "--precision", "fp8"], "'fp8' is not one of 'fp32', 'tf32', 'bf16'"),
        (["run", "--suite", "xla", "--precision", "tf32", "--dry-run"], "suite xla has no float32 matmul/conv work"),
        (["selftest", "--suites", "fault"], "suite fault is internal"),
        (["selftest", "--suites", "xla,,mnist"], "has an empty or repeated name"),
        (["selftest", "--suites", "nope"], "unknown suite 'nope'"),
        (["reproduce", "x", "--backend", "slurmish"], "--backend 'slurmish' is not one of"),
    ],
)
def test_usage_errors_are_one_line_too(args: list[str], message: str) -> None:
    proc = harness(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_show_of_a_missing_run(tmp_path: Path) -> None:
    proc = harness("show", "nothing-here", "--results-dir", str(tmp_path))
    assert proc.returncode == 2 and "no run found at 'nothing-here'" in proc.stderr


def test_list_names_suites_frameworks_and_parameters() -> None:
    proc = harness("list")
    assert proc.returncode == 0
    assert "xla:" in proc.stdout and "frameworks: numpy, jax, pytorch" in proc.stdout
    assert "--param matrix_size=5000" in proc.stdout


@pytest.mark.parametrize("option", ["--results-dir", "--data-dir"])
def test_an_empty_folder_option_is_refused_not_the_current_folder(tmp_path: Path, option: str) -> None:
    proc = harness("run", "--suite", "fault", "-f", "numpy", option, "", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 2 and f"{option} is empty" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


def test_clean_refuses_an_empty_or_malformed_run_id() -> None:
    for bad in ("", "../x", "a b"):
        proc = harness("clean", "--run", bad)
        assert proc.returncode == 2 and "is not a run id" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fetch", "catsdogs", "--size", "4"], "--size 4 must be between 8 and 1024"),
        (["fetch", "catsdogs", "--test-fraction", "1.5"], "--test-fraction 1.5 must be between 0 and 1"),
        (["fetch", "mnist", "--test-fraction", "nan"], "--test-fraction nan must be between 0 and 1"),
        (["import", "catsdogs", ".", "--size", "2000"], "--size 2000 must be between 8 and 1024"),
    ],
)
def test_data_options_are_refused_before_any_download(tmp_path: Path, args: list[str], message: str) -> None:
    proc = harness("data", *args, "--data-dir", str(tmp_path / "data"), timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "data").exists()
