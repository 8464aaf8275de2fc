"""Guards are registered rules (judge/guards/): a guard planted at run time, with no other file changed,
is raised in the assessment, the exit status, the table and its footer, the site's flags, the records and
the mistakes corpus; and the folder holds one module per guard, each declaring what every medium needs."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.execute import mistakes
from harness.judge import guards
from harness.judge.assessment import DISTURBED, FAILED, assess, run_exit_code
from harness.judge.guards import Evidence, Guard, Hit, Planted, time_metrics
from harness.publish.flags import run_flags
from harness.report.exports import Format, render_run
from harness.report.records import metric_records
from harness.store.run_folder import load_run
from tests.conftest import harness
from tests.factories import metric, result, write_run


class Planted42(Guard):
    """Raises on every time metric whose median is exactly 42 ms: a rule no other guard knows."""

    name = "planted42"
    word = "PLANTED"
    reads = ("metrics[].stats.median",)
    heading = "PLANTED - a median of exactly 42 ms"
    catches = "a median of exactly 42 ms (the planted guard)"
    order = 99
    planted = (Planted("forty_two", "a sample clock that always reads 42 ms", "jax", "numpy"),)

    def hits(self, evidence: Evidence) -> Sequence[Hit]:
        return [
            Hit((fw, m["name"]), "planted: 42 ms", "the median is 42 ms", "a median of 42 ms; excluded from ratios")
            for fw, _, m in time_metrics(evidence.run)
            if m["stats"]["median"] == 0.042
        ]


@pytest.fixture
def planted() -> Iterator[Guard]:
    guard = guards.register(Planted42())
    try:
        yield guard
    finally:
        guards.unregister(guard.name)


def _run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", [result("numpy", [metric("matmul", [0.05] * 5)]),
                                        result("jax", [metric("matmul", [0.042] * 5)])])  # fmt: skip


def test_a_planted_guard_is_found_in_every_medium_with_no_other_file_changed(tmp_path: Path, planted: Guard) -> None:
    run_dir = _run(tmp_path)
    judged = assess(load_run(run_dir))
    assert [h.key for h in judged.hits("planted42")] == [("jax", "matmul")]
    assert judged.excluded("jax", "matmul") == "planted: 42 ms" and judged.ratio("jax", "matmul") is None
    assert run_exit_code(judged) == FAILED  # the code's fault, not the machine's
    table = render_run(judged, Format.table)
    assert "PLANTED" in table and "PLANTED - a median of exactly 42 ms" in table
    assert "jax matmul: a median of 42 ms; excluded from ratios" in table
    assert run_flags(judged)[("jax", "matmul")] == ["PLANTED: the median is 42 ms"]
    [record] = [r for r in metric_records(judged) if r["framework"] == "jax"]
    assert record["excluded"] == "planted: 42 ms"
    assert mistakes.raised(judged, "jax") == ("planted42",) and mistakes.raised(judged, "numpy") == ()
    assert mistakes.guard_names()["planted42"] == Planted42.catches
    [row] = mistakes.corpus("cpu", ["forty_two"])
    assert (row.guard, row.culprit, row.honest) == ("planted42", "jax", "numpy")
    # The CLI, in a process of its own, does not know the planted guard: the same run passes there.
    assert harness("show", str(run_dir)).returncode == 0


def test_a_planted_guard_appears_on_the_published_site(tmp_path: Path, planted: Guard) -> None:
    from harness.publish.site import publish_site

    results = tmp_path / "results"
    results.mkdir()
    _run(results)
    publish_site(results, tmp_path / "site")
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "site").glob("*.html")}
    [run_page] = [text for name, text in pages.items() if name.startswith("run-")]
    assert "jax matmul: PLANTED: the median is 42 ms" in run_page
    assert "No flags" not in run_page


def test_a_planted_guard_raised_by_the_machine_excludes_its_number_and_is_no_mistake(tmp_path: Path) -> None:
    class Machine(Planted42):
        name = "machine42"
        disturbance = True

    guard = guards.register(Machine())
    try:
        judged = assess(load_run(_run(tmp_path)))
        assert judged.disturbed == {("jax", "matmul")} and judged.excluded("jax", "matmul") == "planted: 42 ms"
        # The machine's doing, not the code's: never FAILED (a run is DISTURBED when most of its samples are).
        assert run_exit_code(judged) in (0, DISTURBED) and not judged.implausible
        assert mistakes.raised(judged, "jax") == ()  # a busy machine is never a planted mistake caught
    finally:
        guards.unregister(guard.name)


def test_each_module_of_the_folder_is_one_guard_declaring_what_every_medium_needs() -> None:
    found = []
    for info in pkgutil.iter_modules(guards.__path__):
        module = importlib.import_module(f"harness.judge.guards.{info.name}")
        if info.name == "base":
            assert not hasattr(module, "GUARD")
            continue
        guard = module.GUARD
        assert isinstance(guard, Guard) and guards.by_name(guard.name) is guard, info.name
        for attribute in ("word", "reads", "heading", "catches"):
            assert getattr(guard, attribute), f"{info.name}: {attribute} is empty"
        assert guard.scope in ("metric", "framework") and guard.word == guard.word.upper()
        found.append(guard.name)
    assert set(found) >= {"sync", "plausible", "steady", "threads", "contended", "check", "precision", "fairness"}
    assert [g.name for g in guards.registered()] == sorted(found, key=lambda n: (guards.by_name(n).order, n))  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="registered already"):
        guards.register(type(guards.registered()[0])())
    # Every planted mistake of the corpus names a registered guard.
    assert {m.guard for m in mistakes.planted_corpus()} <= {g.name for g in guards.registered()}


def test_a_run_the_cli_flags_contended_is_flagged_on_the_sites_index_and_run_page(tmp_path: Path) -> None:
    from harness.publish.site import publish_site
    from tests.test_contention import _timed

    results = tmp_path / "results"
    run_dir = write_run(results / "busy", [result("numpy", [_timed("matmul", list(range(9)))]),
                                           result("jax", [_timed("matmul", list(range(10)))])])  # fmt: skip
    assert harness("show", str(run_dir)).returncode == 0  # show prints; the run's own exit status:
    judged = assess(load_run(run_dir))
    assert judged.crowded is not None and run_exit_code(judged) == DISTURBED
    publish_site(results, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    runs = index.split('id="runs"', 1)[1].split("</table>", 1)[0]
    assert "flagged" in runs and ">none<" not in runs, runs
    [page] = (tmp_path / "site").glob("run-*.html")
    text = page.read_text(encoding="utf-8")
    assert "No flags" not in text
    assert "numpy matmul: CONTENDED: 9 of 10 samples" in text and "RUN FLAGGED: 19 of 20 samples" in text
