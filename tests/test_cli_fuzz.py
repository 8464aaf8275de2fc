"""Random argument lists never show the user a traceback (property-based)."""

from __future__ import annotations

import contextlib
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main

WORDS = [
    "run", "list", "show", "compare", "report", "describe", "--suite", "--frameworks", "--param", "--repeat",
    "--warmup", "--device", "--backend", "--baseline", "--threads", "--timeout", "--rounds", "--format", "--memory",
    "--cpus", "--resume", "--python", "--results-dir", "--fail-above", "--all", "-q", "--help",
    "xla", "jit", "fault", "numpy,jax", "pytorch", "flax", "matrix_size=8", "matrix_size=-1", "mode=crash", "x=y",
    "0", "-3", "1e9", "nan", "gpu", "tpu", "csv", "html", "12q", "2g", "=", "", "\x00", "../..", "/dev/null",
]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=12)), max_size=8))
def test_no_traceback_reaches_the_user(args: list[str]) -> None:
    if args and args[0] == "run":
        args = [*args, "--dry-run"]  # validate everything, start nothing
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exit_:
            code = exit_.code
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text
    assert code in (0, 1, 2, None), (args, code, text)
