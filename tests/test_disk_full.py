"""A full disk is a status, not a traceback: on a real, small tmpfs (in a mount namespace of its own).

A job that fills the disk with its output fails with that reason, the jobs after it are marked
as not started, the summary stays whole and the run resumes once there is room again; a disk too
full to start leaves no half-made run folder behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, finished

pytestmark = pytest.mark.slow

# The stand-in interpreter of the jax job: while FLAG exists it prints more than the disk holds.
HOG = """#!{python}
import os, sys
if os.path.exists({flag!r}):
    for _ in range(64):
        sys.stdout.write("x" * 65535 + "\\n")
    sys.stdout.flush()
os.execv({python!r}, [{python!r}] + sys.argv[1:])
"""


def in_small_tmpfs(tmp_path: Path, size: str, script: str) -> subprocess.CompletedProcess[str]:
    """`script` (bash) with $DISK a fresh tmpfs of `size`, then $DISK copied to tmp_path/disk."""
    if shutil.which("unshare") is None:
        pytest.fail("util-linux's unshare is needed to mount a private tmpfs (apt-get install util-linux)")
    disk, copy = tmp_path / "mnt", tmp_path / "disk"
    disk.mkdir()
    wrapped = (
        f'mount -t tmpfs -o size={size} tmpfs "$DISK" || exit 99\n{script}\nrc=$?\ncp -a "$DISK" "{copy}"\nexit $rc'
    )
    env = dict(os.environ, DISK=str(disk), PY=sys.executable)
    proc = subprocess.run(["unshare", "--mount", "--map-root-user", "bash", "-c", wrapped],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)  # fmt: skip
    assert proc.returncode != 99, f"cannot mount a tmpfs here: {proc.stderr}"
    return proc


def hog_python(tmp_path: Path) -> tuple[Path, Path]:
    """(the flag that switches the hog on, the stand-in interpreter), the flag set."""
    flag, hog = tmp_path / "hog-on", tmp_path / "hog-python"
    flag.touch()
    hog.write_text(HOG.format(python=sys.executable, flag=str(flag)))
    hog.chmod(0o755)
    return flag, hog


def test_a_job_that_fills_the_disk_fails_with_the_reason_and_the_run_resumes(tmp_path: Path) -> None:
    flag, hog = hog_python(tmp_path)
    args = f'--suite fault -f numpy,jax,pytorch --repeat 2 --python jax={hog} --results-dir "$DISK/results"'
    script = f"""
export HARNESS_MIN_FREE_MB=0
"$PY" -m harness.cli run {args} > "{tmp_path}/first.out" 2> "{tmp_path}/first.err"
echo $? > "{tmp_path}/first.rc"
run=$(ls "$DISK/results")
rm -f "{flag}" "$DISK/results/$run/logs/jax.stdout.log"   # room again, and the job behaves
"$PY" -m harness.cli run --resume "$run" --python jax={hog} --results-dir "$DISK/results" \\
  > "{tmp_path}/second.out" 2> "{tmp_path}/second.err"
echo $? > "{tmp_path}/second.rc"
"""
    proc = in_small_tmpfs(tmp_path, "3m", script)
    disk = tmp_path / "disk"
    assert proc.returncode == 0, proc.stderr
    first_err = (tmp_path / "first.err").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "1", first_err
    assert "Traceback" not in first_err + (tmp_path / "first.out").read_text(), first_err
    message = [line for line in first_err.splitlines() if line.startswith("error: ")]
    assert len(message) == 1 and "is full" in message[0] and "--resume" in message[0], first_err
    [run] = list((disk / "results").iterdir())
    # What the first attempt left (before the resume rewrote it) is checked through the resume:
    second_err = (tmp_path / "second.err").read_text()
    second = subprocess.CompletedProcess([], int((tmp_path / "second.rc").read_text()), (tmp_path / "second.out").read_text(),
                                         second_err)  # fmt: skip
    assert finished(second), second_err + second.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert [(j["framework"], j["status"]) for j in summary["jobs"]] == [("numpy", "ok"), ("jax", "ok"),
                                                                        ("pytorch", "ok")]  # fmt: skip
    assert not (run / ".reserve").exists()


def test_the_first_attempt_records_why_each_job_did_not_finish(tmp_path: Path) -> None:
    _, hog = hog_python(tmp_path)
    script = f"""
export HARNESS_MIN_FREE_MB=0
"$PY" -m harness.cli run --suite fault -f numpy,jax,pytorch --repeat 2 --python jax={hog} \\
  --results-dir "$DISK/results" > "{tmp_path}/first.out" 2> "{tmp_path}/first.err"
"""
    proc = in_small_tmpfs(tmp_path, "3m", script)
    assert proc.returncode == 1, proc.stderr
    [run] = list((tmp_path / "disk" / "results").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    statuses = {j["framework"]: (j["status"], j["reason"] or "") for j in summary["jobs"]}
    assert statuses["numpy"] == ("ok", "")
    assert statuses["jax"][0] == "failed" and "is full" in statuses["jax"][1], statuses
    assert statuses["pytorch"][0] == "failed" and statuses["pytorch"][1].startswith("not started: "), statuses
    assert json.loads((run / "numpy.json").read_text())["status"] == "ok"  # the finished job is intact
    assert json.loads((run / "jax.json").read_text())["status"] == "failed"


def test_a_disk_too_full_to_start_leaves_no_half_made_run(tmp_path: Path) -> None:
    script = f"""
export HARNESS_MIN_FREE_MB=0
mkdir "$DISK/results"
head -c $((3 * 1024 * 1024)) /dev/zero > "$DISK/filler" 2>/dev/null
"$PY" -m harness.cli run --suite fault -f numpy --repeat 2 --results-dir "$DISK/results" 2> "{tmp_path}/err"
"""
    proc = in_small_tmpfs(tmp_path, "3m", script)
    disk = tmp_path / "disk"
    err = (tmp_path / "err").read_text()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and err.startswith("error: ") and "is full" in err and "nothing was run" in err, err
    assert list((disk / "results").iterdir()) == []
