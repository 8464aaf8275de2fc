"""One judgment per run (harness/judge/assessment.py): every medium and the exit code read it, and agree.

A planted problem (a gate failure, a rate above the peak, an escaped sync, other arithmetic) must
be named for the framework it was planted in by the table, the Markdown, the CSV, the JSON, the
HTML, the pictures' flags and the site's flags, and the exit code must be 1 exactly when the
gate, the precision probe or the plausibility lint say so.
"""

from __future__ import annotations

import ast
import csv
import html
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.judge import assessment, plausibility
from harness.judge.assessment import Assessment, assess, run_exit_code
from harness.publish.flags import run_flags
from harness.report.exports import Format, render_run
from harness.report.pictures import flag_reasons
from harness.report.sparklines import render_plots
from harness.store.calibration import ceilings_for_run
from harness.store.run_folder import Run, load_run
from tests.factories import metric, result, write_run

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "harness"

# ---------------------------------------------------------------------------------------------
# (a) Only the assessment judges.

# module -> the judging functions it defines; each may be called only by harness/judge/assessment.py
# (and inside the module that defines it).
JUDGING: dict[str, tuple[str, ...]] = {
    "harness.judge.plausibility": ("lint", "exclusions", "sync_state", "escaped", "implausible"),
    # the agreement gate lives in the assessment itself, the precision and fairness comparisons in their guards
    "harness.judge.assessment": ("evaluate", "failing_frameworks"),
    "harness.judge.guards.precision": ("measured_precision", "mismatches"),
    "harness.judge.guards.fairness": ("mismatches",),
    "harness.store.calibration": ("ceilings_for_run",),  # the lint's ceilings: read once, by assess
}
JUDGES = "harness.judge.assessment"
GUARDS = "harness.judge.guards."
FORBIDDEN_NAMES = {name for names in JUDGING.values() for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def judging_calls(module: str, source: str) -> list[str]:
    """Where `module` imports or calls a judging function it may not (line: what)."""
    if module == JUDGES or module.startswith(GUARDS):  # the assessment, and the guards it calls
        return []
    own = set(JUDGING.get(module, ()))
    found: list[str] = []
    aliases: dict[str, str] = {}  # local name -> judging module it stands for
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if dotted in JUDGING:
                    aliases[alias.asname or alias.name] = dotted
                elif alias.name in JUDGING.get(node.module, ()):
                    found.append(f"{node.lineno}: imports {alias.name} from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in JUDGING:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in FORBIDDEN_NAMES and name not in own:
                found.append(f"{node.lineno}: calls {name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = aliases.get(node.value.id)
            if target is not None and node.attr in JUDGING[target]:
                found.append(f"{node.lineno}: uses {target}.{node.attr}")
    return found


def test_only_the_assessment_calls_the_judging_functions() -> None:
    offenders = {}
    for path in sorted(HARNESS.rglob("*.py")):
        found = judging_calls(module_name(path), path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, f"judge a run through harness.judge.assessment.assess, not directly: {offenders}"


@pytest.mark.parametrize(
    "source",
    [
        "from harness.judge.assessment import evaluate\nrows = evaluate(run)\n",
        "from harness.judge import plausibility\nfound = plausibility.lint(run, None)\n",
        "from harness.judge.plausibility import sync_state as state\n",
        "import harness.judge.assessment as g\nbad = g.failing_frameworks\n",
        "from harness.store.calibration import ceilings_for_run\n",
        "x = helper.lint(run, None)\n",
    ],
)
def test_the_static_check_catches_a_renderer_that_judges(source: str) -> None:
    assert judging_calls("harness.report.table", source)


def test_the_defining_modules_and_the_assessment_are_left_alone() -> None:
    assert not judging_calls("harness.judge.plausibility", "def f(run, c):\n    return lint(run, c)\n")
    assert not judging_calls(JUDGES, "from harness.judge.assessment import evaluate\nevaluate(run)\n")
    assert not judging_calls("harness.report.table", "judged.not_comparable.items()\njudged.sync('a', 'b')\n")


# ---------------------------------------------------------------------------------------------
# (b) Planted problems: every medium names them, and the exit code agrees.

CPU = {"model": "test", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "mhz": 2000.0, "max_mhz": None}
HONEST = [0.100, 0.102, 0.099, 0.101, 0.100]  # 2 GFLOP in 0.1 s: 20 GFLOP/s, under a 2-core AVX2 peak
FAST = [1e-6, 1.01e-6, 0.99e-6, 1e-6, 1e-6]  # 2 PFLOP/s: impossible on it


def job(fw: str, samples: list[float], product_sum: float = 3.3e7, arithmetic: str = "fp32") -> dict[str, Any]:
    matmul = metric("matmul", samples, flops=2e9)
    matmul["sync"] = {"state": "ok"}
    doc = result(fw, [matmul], [gate_check("residual", 1e-12, limit=1e-6), gate_check("product_sum", product_sum)])
    doc["environment"] = {
        "machine": {"cpu": CPU},
        "versions": {fw: "1.0"},
        "precision": {"measured": {"matmul": {"class": arithmetic, "bits": 23}}},
    }
    return doc


def gate_check(name: str, value: float, limit: float | None = None) -> dict[str, Any]:
    rtol = None if limit is not None else 1e-9
    return {"name": name, "value": value, "help": "", "limit": limit, "rtol": rtol, "atol": 0.0}


def escaped(doc: dict[str, Any]) -> dict[str, Any]:
    doc["metrics"][0]["sync"] = {"state": "escaped", "excess_median_s": 0.03, "sample_median_s": 0.1}
    return doc


def recompiled(doc: dict[str, Any]) -> dict[str, Any]:
    doc["metrics"][0]["marks"] = {"compiled": [0, 1, 2, 3, 4]}  # the job saw a compile in every sample
    doc["metrics"][0]["steady_compilations"] = 5
    return doc


def over_threads(doc: dict[str, Any], cpu_per_wall: float = 1.8) -> dict[str, Any]:
    """jax ran under --threads 1 but its process kept `cpu_per_wall` cores busy while the clock ran."""
    doc["settings"] = dict(doc.get("settings") or {}, threads=1)
    walls = doc["metrics"][0]["samples"]
    doc["metrics"][0]["contention"] = {
        "cpu_s": [w * cpu_per_wall for w in walls], "wall_s": list(walls), "involuntary_switches": [0] * len(walls),
        "cores": 2, "window_s": 0.2, "contended": [],
    }  # fmt: skip
    return doc


@dataclass(frozen=True)
class Planted:
    """A problem planted in jax's matmul (numpy is the clean baseline), and how each medium says it."""

    name: str
    jax: Callable[[], dict[str, Any]]
    text: str  # a phrase the table, Markdown and HTML print on a line naming jax
    record: Callable[[dict[str, Any]], bool]  # jax matmul's CSV/JSON record says it
    flag: str  # the start of one of the site's flags for (jax, matmul)
    picture: str  # the start of one of the pictures' flag reasons for (jax, matmul)
    document: Callable[[dict[str, Any]], bool]  # the JSON document's run-level lists say it


PLANTED = [
    Planted(
        "gate failure",
        lambda: job("jax", HONEST, product_sum=3.4e7),
        "failed the agreement gate",
        lambda r: r["not_comparable_reason"] == "failed the agreement gate" and r["comparable"] in (False, "False"),
        "NOT COMPARABLE (†): failed the agreement gate",
        "not comparable: failed the agreement gate",
        lambda d: d["gate_failed"] == ["jax"] and "jax" in d["not_comparable"],
    ),
    Planted(
        "implausible rate",
        lambda: job("jax", FAST),
        "exceeds the limit",
        lambda r: str(r["excluded"]).startswith("implausible FLOP/s") and r["plausible"] in (False, "False"),
        "IMPLAUSIBLE: ",
        "implausible FLOP/s",
        lambda d: (
            {"framework": "jax", "metric": "matmul", "why": "implausible FLOP/s (above device peak)"}
            in d["excluded_metrics"]
        ),
    ),
    Planted(
        "sync escape",
        lambda: escaped(job("jax", HONEST)),
        "a barrier after the clock still waited",
        lambda r: r["excluded"] == "sync escaped" and r["sync"] == "escaped",
        "ESCAPED: ",
        "sync escaped",
        lambda d: {"framework": "jax", "metric": "matmul", "why": "sync escaped"} in d["excluded_metrics"],
    ),
    Planted(
        "recompiled",
        lambda: recompiled(job("jax", HONEST)),
        "5 of 5 samples compiled (a retrace per call",
        lambda r: r["excluded"] == "compiled in the steady state (5/5 samples)",
        "RECOMPILED: 5 of 5 steady samples compiled",
        "compiled in the steady state",
        lambda d: (
            {"framework": "jax", "metric": "matmul", "why": "compiled in the steady state (5/5 samples)"}
            in d["excluded_metrics"]
        ),
    ),
    Planted(
        "over threads",
        lambda: over_threads(job("jax", HONEST)),
        "1.80 cores busy over its samples under --threads 1",
        lambda r: r["excluded"] == "more cores than --threads allows (1.80 cores busy, --threads 1)",
        "THREADS: 1.80 cores busy under --threads 1",
        "more cores than --threads allows",
        lambda d: (
            {
                "framework": "jax",
                "metric": "matmul",
                "why": "more cores than --threads allows (1.80 cores busy, --threads 1)",
            }
            in d["excluded_metrics"]
        ),
    ),
    Planted(
        "precision mismatch",
        lambda: job("jax", HONEST, arithmetic="tf32"),
        "measured precision differs from numpy: matmul tf32 vs fp32",
        lambda r: str(r["not_comparable_reason"]).startswith("measured precision differs from numpy"),
        "NOT COMPARABLE (†): measured precision differs from numpy",
        "not comparable: measured precision differs from numpy",
        lambda d: d["gate_failed"] == [] and "jax" in d["not_comparable"],
    ),
]


def planted_run(tmp_path: Path, jax: dict[str, Any]) -> Run:
    return load_run(write_run(tmp_path / "run", [job("numpy", HONEST), jax]))


def _record(rows: list[dict[str, Any]], fw: str) -> dict[str, Any]:
    return next(r for r in rows if r["framework"] == fw and r["metric"] == "matmul")


def _says(text: str, phrase: str) -> bool:
    return any("jax" in line and phrase in line for line in text.splitlines())


def silent_media(run: Run, planted: Planted) -> list[str]:
    """The media that fail to name the planted problem for jax, or name it for numpy as well."""
    judged = assess(run)
    table = render_run(judged, Format.table)
    markdown = render_run(judged, Format.markdown)
    rows = list(csv.DictReader(io.StringIO(render_run(judged, Format.csv))))
    document = json.loads(render_run(judged, Format.json))
    page = html.unescape(render_run(judged, Format.html))
    flags = run_flags(judged)
    reasons = flag_reasons(judged)
    verdicts = {
        "table": _says(table, planted.text),
        "markdown": _says(markdown, planted.text),
        "html": _says(page, planted.text),
        "csv": planted.record(_record(rows, "jax")),
        "json records": planted.record(_record(document["metrics"], "jax")),
        "json document": planted.document(document),
        "site flags": any(f.startswith(planted.flag) for f in flags.get(("jax", "matmul"), [])),
        "picture flags": any(f.startswith(planted.picture) for f in reasons.get(("jax", "matmul"), ())),
        # the clean baseline is named by none of them
        "numpy csv clean": _record(rows, "numpy")["excluded"] == "" and _record(rows, "numpy")["comparable"] == "True",
        "numpy json clean": _record(document["metrics"], "numpy")["excluded"] is None,
        "numpy flags clean": ("numpy", "matmul") not in flags and ("numpy", "matmul") not in reasons,
    }
    return [medium for medium, said in verdicts.items() if not said]


def said_by_the_judging_functions(run: Run) -> bool:
    """Whether the gate, the precision probe or the plausibility lint object, asked directly."""
    failed = assessment.failing_frameworks(assessment.evaluate(run))
    findings = plausibility.lint(run, ceilings_for_run(run))
    escapes = [
        m
        for r in run.results.values()
        if r["status"] == "ok"
        for m in r["metrics"]
        if m["kind"] == "time" and plausibility.sync_state(m) == "escaped"
    ]
    probes = {fw: assessment.measured_precision(r) for fw, r in run.results.items()}
    other_arithmetic = any(p != probes[run.baseline] for p in probes.values())
    compiled = [m for r in run.results.values() if r["status"] == "ok" for m in r["metrics"]
                if (m.get("marks") or {}).get("compiled")]  # fmt: skip
    busy = [m for r in run.results.values() if r["status"] == "ok" and (r.get("settings") or {}).get("threads")
            for m in r["metrics"] if m.get("contention")
            and sum(m["contention"]["cpu_s"]) > 1.25 * sum(m["contention"]["wall_s"])]  # fmt: skip
    return (
        bool(failed) or any(not f.plausible for f in findings) or bool(escapes) or other_arithmetic or bool(compiled)
        or bool(busy)
    )  # fmt: skip


@pytest.mark.parametrize("planted", PLANTED, ids=[p.name for p in PLANTED])
def test_every_medium_names_the_planted_problem_and_the_exit_code_agrees(tmp_path: Path, planted: Planted) -> None:
    run = planted_run(tmp_path, planted.jax())
    assert silent_media(run, planted) == []
    assert said_by_the_judging_functions(run)
    assert run_exit_code(assess(run)) == 1
    judged = assess(run)
    assert not judged.passed and run_exit_code(judged) == 1


def test_a_clean_run_is_named_by_no_medium_and_exits_0(tmp_path: Path) -> None:
    run = planted_run(tmp_path, job("jax", HONEST))
    assert not said_by_the_judging_functions(run)
    assert run_exit_code(assess(run)) == 0 and assess(run).passed
    for planted in PLANTED:
        # the check can fail: on a clean run every medium is silent about every problem
        silent = silent_media(run, planted)
        assert {"table", "markdown", "html", "csv", "json records", "site flags", "picture flags"} <= set(silent)
        assert not {"numpy csv clean", "numpy json clean", "numpy flags clean"} & set(silent)


def test_the_exit_code_follows_the_judging_functions_for_every_combination(tmp_path: Path) -> None:
    for i, planted in enumerate(PLANTED):
        for clean_first in (True, False):
            docs = [job("numpy", HONEST), planted.jax()]
            run = load_run(write_run(tmp_path / f"run{i}{clean_first}", docs if clean_first else docs[::-1]))
            expected = 1 if said_by_the_judging_functions(run) else 0
            assert run_exit_code(assess(run)) == expected, (planted.name, clean_first)


def test_a_job_at_its_thread_limit_is_not_flagged_and_short_samples_are_not_read(tmp_path: Path) -> None:
    """Pinned to one core, a process cannot exceed 1 core busy; at 1.2 it is within the slack."""
    judged = assess(planted_run(tmp_path / "at", over_threads(job("jax", HONEST), cpu_per_wall=1.2)))
    assert not judged.over_threads and judged.passed
    short = over_threads(job("jax", [1e-3] * 5), cpu_per_wall=3.0)  # 5 ms of samples: too short to read
    assert not assess(planted_run(tmp_path / "short", short)).over_threads
    unlimited = over_threads(job("jax", HONEST))
    unlimited["settings"]["threads"] = None  # no --threads: nothing to exceed
    assert not assess(planted_run(tmp_path / "free", unlimited)).over_threads


def test_an_interrupted_run_exits_130_whatever_its_judgment(tmp_path: Path) -> None:
    run = planted_run(tmp_path, job("jax", HONEST))
    run.summary["interrupted"] = True
    assert run_exit_code(assess(run)) == 130


# ---------------------------------------------------------------------------------------------
# The assessment itself: once per command, and its queries.


def test_one_command_reads_the_calibration_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = planted_run(tmp_path, job("jax", FAST))
    reads: list[Path] = []

    def counted(r: Run) -> Any:
        reads.append(r.path)
        return ceilings_for_run(r)

    monkeypatch.setattr(assessment, "ceilings_for_run", counted)
    judged = assess(run)
    for fmt in Format:
        render_run(judged, fmt)
    render_plots(judged)
    run_flags(judged)
    run_exit_code(judged)
    assert reads == [run.path]


def test_the_queries(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "run", [job("numpy", HONEST), escaped(job("jax", FAST))]))
    judged: Assessment = assess(run)
    assert judged.finding("jax", "matmul", "flops") is not None
    assert judged.finding("jax", "matmul", "bytes") is None
    assert judged.excluded("jax", "matmul") == "sync escaped"  # an escape is named before the rate
    assert judged.excluded("numpy", "matmul") is None
    assert judged.sync("jax", "matmul") == "escaped" and judged.sync("numpy", "matmul") == "ok"
    assert judged.implausible == {("jax", "matmul")} and judged.escaped == {("jax", "matmul")}
    assert judged.comparable("jax") and judged.gate_passed and not judged.passed
    assert dict(judged.precision("jax")) == {"matmul": "fp32"}
