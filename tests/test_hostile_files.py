"""A corpus of hostile run files and options, through the real CLI.

Each case plants something in a finished run folder (links, FIFOs, wrongly typed fields,
injected text, traversal names) or passes a bad option, runs one command, and must end with
the named one-line message or status -- no traceback, no hang, no escape sequence or markup
from a file in the output, no file outside the run folder touched, the other jobs' results
intact. Add a case by adding a row.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.judge.assessment import assess
from harness.store.plan import PlanRequest, make_plan
from suites.contract.stats import summarize
from tests.conftest import harness
from tests.factories import check, metric, result, write_run

SECRET = "TOP-SECRET-CANARY"
CPU = {"model": "test", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "mhz": 2000.0, "max_mhz": None}
Plant = Callable[[Path, Path], None]  # (run folder, tmp folder)


def good_doc(fw: str, seed: float = 1.0) -> dict[str, Any]:
    doc = result(
        fw,
        [metric("matmul", [seed, seed * 1.1, seed * 0.9], flops=2e9)],
        [check("residual", 1e-12, limit=1e-6), check("product_sum", 3.0, rtol=1e-6)],
    )
    doc["environment"] = {"machine": {"cpu": dict(CPU)}, "versions": {fw: "1.0"}, "precision": {}, "variables": {}}
    return doc


def make_run(folder: Path) -> Path:
    run = write_run(folder, [good_doc("numpy"), good_doc("jax", 0.5), good_doc("pytorch", 0.7)])
    plan = make_plan(
        PlanRequest(
            suite="xla",
            frameworks="numpy,jax,pytorch",
            params=("matrix_size=8",),
            repeat=3,
            warmup=1,
            timeout_s=60,
            data_dir=str(folder),
        ),
        backend="local",
    )
    (run / "plan.json").write_text(json.dumps(dict(plan.as_record(), run_id="r1")))
    return run


# -- ways to plant something ------------------------------------------------------------------


def edit(name: str, change: Callable[[dict[str, Any]], Any]) -> Plant:
    def plant(run: Path, tmp: Path) -> None:
        doc = json.loads((run / name).read_text())
        change(doc)
        (run / name).write_text(json.dumps(doc))

    return plant


def jax_metric(**fields: Any) -> Plant:
    return edit("jax.json", lambda d: d["metrics"][0].update(fields))


def jax_env(path: str, value: Any) -> Plant:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc["environment"]
        for key in parents:
            node = node[key]
        node[last] = value

    return edit("jax.json", change)


def replace_with(name: str, make: Callable[[Path, Path], None]) -> Plant:
    def plant(run: Path, tmp: Path) -> None:
        (run / name).unlink()
        make(run / name, tmp)

    return plant


def symlink_to(target: str) -> Callable[[Path, Path], None]:
    return lambda path, tmp: path.symlink_to(target.format(tmp=tmp))


def fifo(path: Path, tmp: Path) -> None:
    os.mkfifo(path)


def sparse(size: int) -> Callable[[Path, Path], None]:
    def make(path: Path, tmp: Path) -> None:
        with path.open("wb") as handle:
            handle.truncate(size)

    return make


def raw(text: str) -> Callable[[Path, Path], None]:
    return lambda path, tmp: path.write_text(text)


def zero_median(doc: dict[str, Any]) -> None:
    doc["metrics"][0].update(samples=[0.0, 0.0, 0.0], stats=summarize([0.0, 0.0, 0.0]), flops=1e9)


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"x": value}
    return value


def edit_plan(change: Callable[[dict[str, Any]], Any]) -> Plant:
    return edit("plan.json", change)


def failed_jax(reason: str) -> Plant:
    def change(doc: dict[str, Any]) -> None:
        doc.update(status="failed", reason=reason)

    return edit("jax.json", change)


def other_run(run: Path, tmp: Path) -> None:
    other = write_run(tmp / "other", [good_doc("jax", 0.25)])
    (run / "jax.json").unlink()
    (run / "jax.json").symlink_to(other / "jax.json")


def copy_run_b(plant: Plant) -> Plant:
    """The planted change, then a second run (B) with the same change for `compare`."""

    def both(run: Path, tmp: Path) -> None:
        plant(run, tmp)
        (tmp / "b").mkdir()
        for path in run.iterdir():
            if path.is_file():
                (tmp / "b" / path.name).write_bytes(path.read_bytes())

    return both


def make_file(path: str) -> Plant:
    return lambda run, tmp: (tmp / path).write_text("I am a file\n")


def nothing(run: Path, tmp: Path) -> None:
    pass


def manifests(then: Callable[[Path, Path], None]) -> Plant:
    """`harness export k8s` output in tmp/k8s and a folder of saved pod logs, then a change."""

    def plant(run: Path, tmp: Path) -> None:
        from harness.backends.k8s import export, job_name

        plan = make_plan(
            PlanRequest(suite="xla", frameworks="numpy,pytorch", params=("matrix_size=8",), repeat=2),
            backend="kubernetes",
        )
        export(plan, tmp / "k8s", variant="cpu", registry=None, namespace="default", data_claim=None)
        (tmp / "logs").mkdir()
        for job in plan.jobs:
            (tmp / "logs" / f"{job_name(plan, job)}.log").write_text("no result here\n")
        then(tmp / "k8s", tmp / "logs")

    return plant


def fifo_pod_log(k8s: Path, logs: Path) -> None:
    first = sorted(logs.iterdir())[0]
    first.unlink()
    os.mkfifo(first)


@dataclass(frozen=True)
class Case:
    id: str
    plant: Plant
    args: tuple[str, ...]  # {run}, {tmp} are filled in
    code: int
    expect: str  # in stdout + stderr
    forbid: tuple[str, ...] = ()  # never in stdout, stderr or a file the command wrote
    env: dict[str, str] = field(default_factory=dict)
    intact: tuple[str, ...] = ("numpy.json", "pytorch.json")
    writes: tuple[str, ...] = ()  # folders under tmp the command may legitimately write (besides the run)


SHOW = ("show", "{run}")
XSS = "<script>alert(1)</script>"
BEACON = "![b](http://evil.example/beacon.png)"
JS_LINK = "[click](javascript:alert(1))"
IMG = "<img src=x onerror=alert(1)>"
ESC = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m"

CASES = [
    # 4. files that are not files: rejected by name, the rest renders, nothing hangs
    Case("result-link-dev-zero", replace_with("jax.json", symlink_to("/dev/zero")), SHOW, 0,
         "jax.json: is a symbolic link, not a regular file"),
    Case("result-fifo", replace_with("jax.json", fifo), SHOW, 0, "jax.json: is a FIFO, not a regular file"),
    Case("result-directory", replace_with("jax.json", lambda p, t: p.mkdir()), SHOW, 0, "is a directory"),
    Case("result-link-to-other-run", other_run, SHOW, 0, "jax.json: is a symbolic link"),
    Case("result-sparse-huge", replace_with("jax.json", sparse(64 * 2**20 + 1)), SHOW, 0,
         "is too large for a result file"),
    Case("summary-link-dev-zero", replace_with("summary.json", symlink_to("/dev/zero")), SHOW, 2, "no run found"),
    Case("summary-fifo", replace_with("summary.json", fifo), SHOW, 2, "no run found"),
    Case("summary-sparse-huge", replace_with("summary.json", sparse(17 * 2**20)), SHOW, 2,
         "too large for a run summary"),
    # 5. schema-valid but wrongly typed nested fields
    Case("zero-median-with-flops", edit("jax.json", zero_median), SHOW, 0, "needs a median above 0"),
    Case("huge-int-sample", jax_metric(samples=[10**400, 1.0, 1.0]), SHOW, 0, "samples: expected a non-empty list"),
    Case("huge-int-median", edit("jax.json", lambda d: d["metrics"][0]["stats"].update(median=10**400)), SHOW, 0,
         "stats.median: expected a finite number"),
    Case("string-cores", jax_env("machine.cpu.usable_cores", "4"), SHOW, 0,
         "environment.machine.cpu.usable_cores: expected a finite number"),
    Case("string-mhz", jax_env("machine.cpu.mhz", "fast"), SHOW, 0, "environment.machine.cpu.mhz"),
    Case("list-vector", jax_env("machine.cpu.vector", ["avx2"]), SHOW, 0, "environment.machine.cpu.vector"),
    Case("device-not-object", jax_env("device", ["gpu"]), SHOW, 0, "environment.device: expected an object"),
    Case("versions-not-object", jax_env("versions", "1.0"), SHOW, 0, "environment.versions: expected an object"),
    Case("versions-null", jax_env("versions", None), SHOW, 0, "environment.versions: expected an object"),
    Case("precision-not-object", jax_env("precision", 5), SHOW, 0, "environment.precision: expected an object"),
    Case("variables-not-object", jax_env("variables", [1]), SHOW, 0, "environment.variables: expected an object"),
    Case("atol-string", edit("jax.json", lambda d: d["checks"][1].update(atol="x")), SHOW, 0,
         "atol: expected a finite number"),
    Case("deep-nesting", replace_with("jax.json", raw("[" * 100000 + "]" * 100000)), SHOW, 0, "nested too deeply"),
    Case("nested-40", jax_env("extra", nested(40)), SHOW, 0, "nested deeper than 32 levels"),
    Case("settings-string-threads", edit("jax.json", lambda d: d["settings"].update(threads="4")), SHOW, 0,
         "settings.threads: expected an integer"),
    Case("notes-not-strings", edit("jax.json", lambda d: d.update(notes=[{"x": 1}])), SHOW, 0,
         "notes: expected a list of strings"),
    Case("too-many-samples", jax_metric(samples=[1.0] * 10_001, stats=summarize([1.0] * 10_001)), SHOW, 0,
         "10001 samples is more than the 10000"),
    Case("negative-time", jax_metric(samples=[-1.0, 1.0, 1.0], stats=summarize([-1.0, 1.0, 1.0])), SHOW, 0,
         "a time cannot be negative"),
    # 6. a job that recorded metrics, then died (oom): its partial metrics have no row, nothing crashes
    Case("oom-with-partial-metrics", edit("jax.json", lambda d: d.update(
        status="oom", reason="out of memory (MemoryError inside the job)",
        metrics=d["metrics"] + [metric("inverse", [1.0, 1.0, 1.0]), metric("solve", [2.0, 2.0, 2.0])])),
        SHOW, 0, "OOM: out of memory"),
    Case("oom-with-partial-metrics-html", edit("jax.json", lambda d: d.update(
        status="oom", reason="killed", metrics=d["metrics"] + [metric("inverse", [1.0, 1.0, 1.0])])),
        ("show", "{run}", "--format", "html"), 0, "OOM: killed"),
    # 3. names that would become paths, and results that do not belong where they are
    Case("result-unknown-suite", edit("jax.json", lambda d: d.update(suite="../../etc")), SHOW, 0,
         "is not a suite this harness knows"),
    Case("result-framework-traversal", edit("jax.json", lambda d: d.update(framework="../../x")), SHOW, 0,
         "is not a framework of suite xla"),
    Case("result-of-another-run", edit("jax.json", lambda d: d.update(run_id="r2")), SHOW, 0, "belongs to run r2"),
    Case("result-under-wrong-name", edit("jax.json", lambda d: d.update(framework="pytorch", stack="pytorch")),
         SHOW, 0, "the summary expects xla/jax there"),
    Case("summary-suite-traversal", edit("summary.json", lambda d: d.update(suite="../../../tmp/evil")),
         ("report", "{run}", "--no-figures"), 2, "is not a suite this harness knows"),
    Case("summary-baseline-markup", edit("summary.json", lambda d: d.update(baseline=XSS)), SHOW, 2, "baseline:"),
    Case("summary-bad-run-id", edit("summary.json", lambda d: d.update(run_id="../..")), SHOW, 2, "is not a run id"),
    Case("summary-entry-other-file", edit("summary.json", lambda d: d["jobs"][1].update(file="pytorch.json")), SHOW,
         0, "is not the result file of jax"),
    Case("summary-entry-traversal", edit("summary.json", lambda d: d["jobs"][1].update(file="../../etc/passwd")),
         SHOW, 0, "has no plain result file name"),
    Case("plan-framework-traversal", edit_plan(lambda d: d["jobs"][0].update(framework="../../outside/evil")),
         ("run", "--resume", "{run}"), 2, "unknown framework"),
    Case("plan-suite-traversal", edit_plan(lambda d: d.update(suite="../../outside")), ("run", "--resume", "{run}"),
         2, "unknown suite"),
    Case("plan-run-id-traversal", edit_plan(lambda d: d.update(run_id="../../outside")), ("run", "--resume", "{run}"),
         2, "is not a run id"),
    Case("plan-negative-repeat", edit_plan(lambda d: d["jobs"][0].update(repeat=-5)), ("run", "--resume", "{run}"),
         2, "--repeat -5 must be at least 1"),
    Case("plan-huge-timeout", edit_plan(lambda d: d["jobs"][0].update(timeout_s=1e300)),
         ("run", "--resume", "{run}"), 2, "--timeout"),
    Case("plan-bad-param", edit_plan(lambda d: d["jobs"][0]["params"].update(matrix_size="8; rm -rf /")),
         ("run", "--resume", "{run}"), 2, "matrix_size"),
    Case("plan-relative-data-dir", edit_plan(lambda d: d["jobs"][0].update(data_dir="../../outside")),
         ("run", "--resume", "{run}"), 2, "is not where a local run keeps its data"),
    Case("plan-fifo", replace_with("plan.json", fifo), ("run", "--resume", "{run}"), 2, "is a FIFO"),
    Case("reproduce-negative-repeat", edit("jax.json", lambda d: d["settings"].update(repeat=-5)),
         ("reproduce", "{run}/jax.json", "--backend", "local", "--results-dir", "{tmp}/new"), 2,
         "the recorded settings of jax cannot be run"),
    Case("report-folder-link", lambda run, tmp: (run / "report").symlink_to(tmp / "outside"),
         ("report", "{run}", "--no-figures"), 2, "report is a symbolic link"),
    Case("figures-folder-link", lambda run, tmp: ((run / "report").mkdir(), (run / "report/figures").symlink_to(
         tmp / "outside")), ("report", "{run}"), 2, "figures is a symbolic link"),
    Case("figure-file-link", lambda run, tmp: ((run / "report/figures").mkdir(parents=True), (
         run / "report/figures/xla-steady.png").symlink_to(tmp / "outside/secret.txt")), ("report", "{run}"), 0,
         "report:"),
    Case("collect-fifo-pod-log", manifests(fifo_pod_log),
         ("collect", "{tmp}/k8s", "--logs", "{tmp}/logs", "--results-dir", "{tmp}/results"), 0, "run folder:",
         writes=("results",)),
    Case("collect-plan-traversal", manifests(lambda k8s, logs: edit("plan.json", lambda d: d["jobs"][0].update(
         framework="../../outside/x"))(k8s, logs)),
         ("collect", "{tmp}/k8s", "--logs", "{tmp}/logs", "--results-dir", "{tmp}/results"), 2, "unknown framework"),
    Case("collect-bad-namespace", manifests(lambda k8s, logs: edit("plan.json", lambda d: d.update(
         namespace="--all-namespaces"))(k8s, logs)),
         ("collect", "{tmp}/k8s", "--results-dir", "{tmp}/results"), 2, "is not a Kubernetes name"),
    # 2. injection: escaped for every output medium
    Case("xss-metric-html", jax_metric(name=XSS), ("show", "{run}", "--format", "html"), 0, "&lt;script&gt;",
         forbid=(XSS,)),
    Case("xss-metric-markdown", jax_metric(name=XSS), ("show", "{run}", "--format", "markdown"), 0,
         "\\<script\\>", forbid=(XSS,)),
    Case("xss-report", jax_metric(name=XSS), ("report", "{run}", "--no-figures"), 0, "report:", forbid=(XSS,)),
    Case("beacon-unit-markdown", jax_metric(unit=BEACON), ("show", "{run}", "--format", "markdown"), 0,
         "evil.example", forbid=("![b](",)),
    Case("beacon-report", jax_metric(unit=BEACON), ("report", "{run}", "--no-figures"), 0, "report:",
         forbid=("![b](",)),
    Case("js-link-check", edit("jax.json", lambda d: d["checks"][0].update(name=JS_LINK)),
         ("show", "{run}", "--format", "markdown"), 0, "javascript", forbid=("[click](",)),
    Case("img-version-html", jax_env("versions.jax", IMG), ("show", "{run}", "--format", "html"), 0, "&lt;img",
         forbid=(IMG,)),
    Case("img-version-report", jax_env("versions.jax", "1.0|" + IMG), ("report", "{run}", "--no-figures"), 0,
         "report:", forbid=(IMG, "1.0|")),
    Case("pipe-metric-markdown", jax_metric(name="a|b|c"), ("show", "{run}", "--format", "markdown"), 0,
         "a\\|b\\|c"),
    Case("formula-metric-csv", jax_metric(name='=HYPERLINK("http://evil.example")'),
         ("show", "{run}", "--format", "csv"), 0, "'=HYPERLINK"),
    Case("terminal-escape-metric", jax_metric(name=ESC), SHOW, 0, "\\x1b]0;pwned"),
    Case("terminal-escape-reason", failed_jax("boom\x1b[2J\x1b[Hgone\nsecond line"), SHOW, 0, "FAILED: boom\\x1b[2J"),
    Case("terminal-escape-version", jax_env("versions.jax", "\x1b[2J\u202eevil"), SHOW, 0, "\\x1b[2J\\u202eevil"),
    Case("xss-compare-html", copy_run_b(jax_metric(name=XSS)), ("compare", "{run}", "{tmp}/b", "--format", "html"),
         0, "&lt;script&gt;", forbid=(XSS,)),
    Case("xss-compare-markdown", copy_run_b(jax_metric(name=XSS)),
         ("compare", "{run}", "{tmp}/b", "--format", "markdown"), 0, "\\<script\\>", forbid=(XSS,)),
    Case("escape-compare-terminal", copy_run_b(jax_metric(name=ESC)), ("compare", "{run}", "{tmp}/b"), 0,
         "\\x1b]0;pwned"),
    # 7. options
    Case("timeout-nan", nothing, ("run", "--suite", "xla", "--timeout", "nan", "--results-dir", "{tmp}/r"), 2,
         "--timeout nan"),
    Case("timeout-inf", nothing, ("run", "--suite", "xla", "--timeout", "inf", "--results-dir", "{tmp}/r"), 2,
         "--timeout inf"),
    Case("timeout-huge", nothing, ("run", "--suite", "xla", "--timeout", "1e12", "--results-dir", "{tmp}/r"), 2,
         "--timeout"),
    Case("resume-timeout-nan", nothing, ("run", "--resume", "{run}", "--timeout", "nan"), 2, "--timeout nan"),
    Case("repeat-huge", nothing, ("run", "--suite", "xla", "--repeat", "100000", "--results-dir", "{tmp}/r"), 2,
         "--repeat 100000 must be at most 10000"),
    Case("cpus-nan", nothing, ("run", "--suite", "xla", "--cpus", "nan", "--results-dir", "{tmp}/r"), 2,
         "--cpus nan"),
    Case("cpus-inf", nothing, ("run", "--suite", "xla", "--cpus", "inf", "--results-dir", "{tmp}/r"), 2,
         "--cpus inf"),
    Case("memory-huge", nothing, ("run", "--suite", "xla", "--memory", "99999999t", "--results-dir", "{tmp}/r"), 2,
         "is more than 1 PiB"),
    Case("k8s-timeout-nan", nothing, ("export", "k8s", "--suite", "xla", "--timeout", "nan", "--out", "{tmp}/k8s"),
         2, "--timeout nan"),
    Case("k8s-bad-namespace", nothing,
         ("export", "k8s", "--suite", "xla", "--namespace", "../Evil", "--out", "{tmp}/k8s"), 2,
         "is not a Kubernetes name"),
    Case("k8s-memory-huge", nothing,
         ("export", "k8s", "--suite", "xla", "--memory", "99999999t", "--out", "{tmp}/k8s"), 2, "1 PiB"),
    Case("fail-above-nan", copy_run_b(nothing), ("compare", "{run}", "{tmp}/b", "--fail-above", "nan"), 2,
         "--fail-above nan"),
    Case("fail-above-inf", copy_run_b(nothing), ("compare", "{run}", "{tmp}/b", "--fail-above", "inf"), 2,
         "--fail-above inf"),
    Case("report-out-file", make_file("afile"), ("report", "{run}", "--no-figures", "--out", "{tmp}/afile"), 2,
         "is a file"),
    Case("min-free-not-a-number", nothing, ("run", "--suite", "fault", "--results-dir", "{tmp}/r"), 2,
         "HARNESS_MIN_FREE_MB='abc'", env={"HARNESS_MIN_FREE_MB": "abc"}),
    Case("min-free-nan", nothing, ("run", "--suite", "fault", "--results-dir", "{tmp}/r"), 2,
         "HARNESS_MIN_FREE_MB='nan'", env={"HARNESS_MIN_FREE_MB": "nan"}),
]  # fmt: skip


def snapshot(tmp: Path, run: Path, writes: tuple[str, ...] = ()) -> dict[str, tuple[bytes, int]]:
    """Every file outside the run folder: content and mtime (nothing may change there)."""
    found = {}
    skip = [run] + [tmp / name for name in writes]
    for folder, dirs, files in os.walk(tmp):
        if any(Path(folder) == s or s in Path(folder).parents for s in skip):
            dirs[:] = []
            continue
        for name in dirs + files:
            path = Path(folder, name)
            if path in skip:
                continue
            info = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            found[str(path.relative_to(tmp))] = (content, info.st_mtime_ns)
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_handled_cleanly(tmp_path: Path, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (outside / "secret.txt").chmod(0o600)
    case.plant(run, tmp_path)
    intact = {name: (run / name).read_bytes() for name in case.intact}
    before = snapshot(tmp_path, run, case.writes)
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    args = [a.format(run=run, tmp=tmp_path) for a in case.args]
    proc = harness(*args, timeout=120)  # a FIFO read would hang here
    out = proc.stdout + proc.stderr
    assert proc.returncode == case.code, out
    assert "Traceback" not in out and "\x1b" not in out, out
    assert case.expect in out, out
    if case.code == 2:
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    written = [p for p in run.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_mtime_ns]
    texts = [out] + [p.read_text(errors="replace") for p in written if p.suffix in (".md", ".html", ".csv")]
    for bad in case.forbid:
        assert not any(bad in text for text in texts), bad
    assert SECRET not in out
    assert snapshot(tmp_path, run, case.writes) == before, "a file outside the run folder changed"
    for name, content in intact.items():
        assert (run / name).read_bytes() == content, f"{name} changed"
    if case.code == 0 and case.args[0] == "show" and "--format" not in case.args:
        header = next(line for line in proc.stdout.splitlines() if line.startswith("metric"))
        assert "numpy" in header and "pytorch" in header  # the other jobs still render


def test_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    jax_metric(name="=1+2", unit="@SUM(A1)")(run, tmp_path)
    proc = harness("show", str(run), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows and all(not cell.startswith(("=", "+", "@")) for row in rows for cell in row)
    assert any(cell == "'=1+2" for row in rows for cell in row)


def test_markdown_table_keeps_its_columns_with_pipes_in_cells(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    jax_metric(name="a|b", unit="x|y")(run, tmp_path)
    proc = harness("show", str(run), "--format", "markdown")
    table = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    unescaped = [line.replace("\\|", "") for line in table[:8]]
    assert len({line.count("|") for line in unescaped}) == 1, table


def test_k8s_pods_get_seccomp_resources_and_capped_volumes(tmp_path: Path) -> None:
    """9. Resource defaults: a pod is never unconfined, unbounded or free to fill its node's disk."""
    import yaml

    out = tmp_path / "k8s"
    proc = harness("export", "k8s", "--suite", "xla", "--frameworks", "numpy", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    pod = yaml.safe_load((out / "job-numpy.yaml").read_text())["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        resources = container["resources"]
        assert resources["requests"]["memory"] and resources["limits"]["memory"] and resources["limits"]["cpu"]
    job = pod["containers"][0]["resources"]
    assert job["requests"] == job["limits"] == {"cpu": "2000m", "memory": str(8 * 2**30)}
    assert all(v["emptyDir"].get("sizeLimit") for v in pod["volumes"] if "emptyDir" in v)
    sized = harness("export", "k8s", "--suite", "xla", "--frameworks", "numpy", "--memory", "3g", "--cpus", "1.5",
                    "--out", str(tmp_path / "sized"))  # fmt: skip
    assert sized.returncode == 0, sized.stderr
    pod = yaml.safe_load((tmp_path / "sized" / "job-numpy.yaml").read_text())["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"cpu": "1500m", "memory": str(3 * 2**30)}


# -- every renderer on randomly corrupted (but parseable) results: a rejection or a rendering, never a crash


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _paths(inner, prefix + (i,))
    return found


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(10**400), max_value=10**400),
        st.sampled_from([0, 0.0, -1.0, 1e-320, 1e308, -1e308, 10**400, 2**63]),
        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
        st.sampled_from(["", "s", "<b>", "a|b", "\x1b[2J", "=1+1", "../x", "numpy", "jax", "time", "lower"]),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_corruption_crashes_a_renderer(tmp_path: Path, data: st.DataObject) -> None:
    from harness.core.errors import HarnessError
    from harness.judge.compare import compare_runs
    from harness.report.comparison import render_comparison
    from harness.report.exports import Format, render_run
    from harness.report.folder import write_report
    from harness.store.run_folder import load_run

    docs = [good_doc("numpy"), good_doc("jax", 0.5)]
    for doc in docs:  # every optional field a renderer reads is present, so it gets corrupted too
        doc["environment"].update(
            device={"name": "NVIDIA H100 PCIe", "kind": "gpu"}, launch={"exit_code": 0},
            precision={"compute_threads": 2, "float32_matmul": "float32", "cuda_matmul_allow_tf32": False,
                       "jax_default_matmul_precision": "highest"},
            variables={"OMP_NUM_THREADS": "2"},
        )  # fmt: skip
        doc["image"] = {"tag": "t", "id": "sha256:x", "variant": "cpu", "lock_hash": "h"}
        doc["notes"] = ["a note"]
        doc["metrics"][0].update(dtype="float64", synchronised=True, first_calls=[1.0], description="d")
        doc["metrics"].append(
            dict(metric("accuracy", [0.5, 0.6, 0.7], first=None), kind="value", unit="%", better="higher")
        )
    docs[1]["device"] = data.draw(st.sampled_from(["cpu", "gpu"]))
    target = docs[data.draw(st.integers(0, 1))]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(target)))
        node = target
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = data.draw(JSON_VALUES)
    folder = tmp_path / f"run-{data.draw(st.integers(0, 10**9))}"
    try:
        run = write_run(folder, docs)
    except (TypeError, ValueError, OSError):  # json.dumps (or the file name) refused the value
        return
    try:
        loaded = load_run(run)
        for fmt in Format:
            render_run(assess(loaded), fmt)
        for fmt in Format:
            render_comparison(compare_runs(assess(load_run(run)), assess(loaded)), fmt)
        write_report(assess(loaded), folder / "report", figures=False)
    except HarnessError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_corrupted_summary_or_plan_crashes_the_reader(tmp_path: Path, data: st.DataObject) -> None:
    from harness.core.errors import HarnessError
    from harness.report.exports import Format, render_run
    from harness.store.plan import plan_from_record
    from harness.store.run_folder import load_run

    folder = tmp_path / f"run-{data.draw(st.integers(0, 10**9))}"
    run = make_run(folder)
    name = data.draw(st.sampled_from(["summary.json", "plan.json"]))
    doc = json.loads((run / name).read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = data.draw(JSON_VALUES)
    try:
        (run / name).write_text(json.dumps(doc))
    except (TypeError, ValueError):
        return
    try:
        if name == "plan.json":
            plan = plan_from_record(doc, name)
            assert all(Path(job.result_file()).name == job.result_file() for job in plan.jobs)
            assert Path(plan.run_id).name == plan.run_id and plan.run_id not in (".", "..")
        else:
            for fmt in Format:
                render_run(assess(load_run(run)), fmt)
    except HarnessError:
        pass


@pytest.mark.parametrize("timeout", [10**400, -(10**400), 0, 8 * 24 * 3600])
def test_a_plan_with_an_impossible_timeout_is_refused_in_one_line(tmp_path: Path, timeout: int) -> None:
    """An int past any float once crashed the check (hypothesis found it): refused like any bad value."""
    from harness.core.errors import HarnessError
    from harness.store.plan import plan_from_record

    doc = json.loads((make_run(tmp_path / "run") / "plan.json").read_text())
    doc["jobs"][0]["timeout_s"] = timeout
    with pytest.raises(HarnessError, match="must be a number of seconds above 0"):
        plan_from_record(doc, "plan.json")


def test_a_calibration_figure_past_any_float_is_not_a_figure() -> None:
    """The calibration cache is a file too: an int past any float is refused, not an OverflowError."""
    from harness.store import calibration

    assert not calibration._positive(10**400) and not calibration._positive(float("nan"))
    assert calibration._positive(3) and calibration._positive(2.5e9)
