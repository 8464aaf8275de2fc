"""Learning curves and time to target in validation loss (a language model, suites/gpt): the schema
takes them beside the accuracy suites' curves, rounds pool them, and every medium draws them.

A loss curve has `val_loss` (lower is better) instead of `test_accuracy` and `train_accuracy`; a
loss target has `loss` and `best_loss` instead of `accuracy` and `best_accuracy`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import InvalidResult, validate
from harness.execute.rounds import round_params
from harness.judge import time_to_target as ttt
from harness.judge.assessment import assess
from harness.publish import publish_site
from harness.report import picture_figures as pictured
from harness.report import pictures, training_text
from harness.report.exports import Format, render_run
from harness.report.figures import _pyplot
from harness.report.sparklines import render_plots
from harness.store.run_folder import load_run
from tests.factories import metric, result, write_run
from tests.test_publish import site_data, write
from tests.test_publish_pictures import run_pages, training_job

TARGET = 1.8


def loss_curve(seed: int = 42, **changes: Any) -> dict[str, Any]:
    """Four intervals of optimizer steps, the validation loss after each."""
    curve = {
        "epoch_seconds": [2.0, 1.0, 1.0, 1.0],
        "train_loss": [2.9, 2.2, 1.9, 1.7],
        "val_loss": [2.6 - 0.01 * seed, 2.1, 1.85, 1.75],
        "evaluation_seconds": [0.2, 0.1, 0.1, 0.1],
        "seed": seed,
    }
    curve.update(changes)
    return curve


def reached(seconds: float = 5.0, epochs: int = 4) -> dict[str, Any]:
    return {"loss": TARGET, "status": "reached", "seconds": seconds, "wall_seconds": seconds + 0.5, "epochs": epochs,
            "epochs_run": epochs, "best_loss": 1.75, "loss_per_epoch": [2.6, 2.1, 1.85, 1.75],
            "evaluation_seconds": [0.2, 0.1, 0.1, 0.1], "seed": 42}  # fmt: skip


NOT_REACHED = {"loss": TARGET, "status": "not reached", "seconds": None, "wall_seconds": None, "epochs": None,
               "best_loss": 1.93}  # fmt: skip


def doc(curves: list[dict[str, Any]] | None = None, target: dict[str, Any] | None = None) -> dict[str, Any]:
    d = result("flax", [metric("epoch", [1.0, 1.1])], checks=[])
    d["suite"] = "mlp"
    d["params"] = {"seed": 42, "target_loss": TARGET}
    d["training"] = {"data": "device", "curves": [loss_curve()] if curves is None else curves, "target": target}
    return d


def test_loss_curves_and_a_loss_target_validate_beside_accuracy_ones() -> None:
    validate(doc(target=reached()), "f.json")
    validate(
        doc([loss_curve(), dict(loss_curve(), val_loss=[], evaluation_seconds=[], seed=None)], NOT_REACHED), "f.json"
    )
    validate(doc([loss_curve(train_accuracy=[10.0, 20.0, 30.0, 40.0])]), "f.json")  # train accuracy is optional


@pytest.mark.parametrize(
    ("curves", "target", "message"),
    [
        ([loss_curve(val_loss=None)], None, "training.curves[0].val_loss: expected a list of finite numbers >= 0"),
        ([{k: v for k, v in loss_curve().items() if k != "val_loss"}], None,
         "training.curves[0]: expected exactly one of test_accuracy or val_loss, got neither"),
        ([loss_curve(test_accuracy=[50.0] * 4)], None,
         "training.curves[0]: expected exactly one of test_accuracy or val_loss, got test_accuracy and val_loss"),
        ([loss_curve(val_loss=[2.0] * 5, evaluation_seconds=[0.1] * 5)], None,
         "training.curves[0].val_loss: expected a list of at most 4 finite numbers (one per epoch)"),
        ([loss_curve(evaluation_seconds=[0.1] * 3)], None,
         "training.curves[0].evaluation_seconds: 3 entries, but val_loss has 4"),
        ([loss_curve(train_loss=[2.0] * 3)], None, "training.curves[0].train_loss: 3 entries, but epoch_seconds has 4"),
        ([loss_curve(train_accuracy=[10.0] * 3)], None,
         "training.curves[0].train_accuracy: 3 entries, but epoch_seconds has 4"),
        ([loss_curve(val_loss=[2.6, float("nan"), 1.9, 1.8])], None,
         "training.curves[0].val_loss: expected a list of finite numbers >= 0"),
        ([loss_curve(val_loss=[2.6, float("inf"), 1.9, 1.8])], None,
         "training.curves[0].val_loss: expected a list of finite numbers >= 0"),
        ([loss_curve(val_loss=[2.6, -0.1, 1.9, 1.8])], None,
         "training.curves[0].val_loss: expected a list of finite numbers >= 0"),
        ([loss_curve(val_loss=[2.6, "2.1", 1.9, 1.8])], None,
         "training.curves[0].val_loss: expected a list of finite numbers >= 0"),
        # an accuracy curve keeps every check it had: its train accuracy included
        ([{"epoch_seconds": [1.0], "train_loss": [0.5], "test_accuracy": [80.0], "evaluation_seconds": [0.1]}],
         None, "training.curves[0].train_accuracy: missing field"),
        ([loss_curve(), {"epoch_seconds": [1.0], "train_loss": [0.5], "train_accuracy": [70.0],
                         "test_accuracy": [80.0], "evaluation_seconds": [0.1]}],
         None, "training.curves[1]: expected val_loss like training.curves[0] (one measure per result)"),
        (None, dict(reached(), accuracy=90.0),
         "training.target: expected exactly one of accuracy or loss, got accuracy and loss"),
        (None, {k: v for k, v in reached().items() if k != "loss"},
         "training.target: expected exactly one of accuracy or loss, got neither"),
        (None, dict(reached(), loss=float("nan")), "training.target.loss: expected a finite number >= 0"),
        (None, dict(reached(), best_loss=-1.0), "training.target.best_loss: expected a finite number >= 0 or null"),
        (None, dict(reached(), best_accuracy=91.0), "training.target.best_accuracy: a target of loss has no"),
        (None, dict(NOT_REACHED, seconds=3.0), "training.target.seconds: a target that was not reached has no"),
        (None, dict(reached(), loss_per_epoch=[2.0, None]), "training.target.loss_per_epoch"),
        (None, {"accuracy": 90.0, "status": "not reached", "best_loss": 1.9},
         "training.target.best_loss: a target of accuracy has no best_loss"),
        (None, {"accuracy": 90.0, "status": "not reached"},
         "training.target: expected a target of loss, what the curves (val_loss) measure"),
    ],
)  # fmt: skip
def test_malformed_loss_curves_and_targets_are_refused_in_one_line(
    curves: list[dict[str, Any]] | None, target: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(InvalidResult) as info:
        validate(doc(curves, target), "f.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_target_loss_gives_each_round_its_own_seed() -> None:
    assert ttt.targeted({"target_loss": TARGET}) and not ttt.targeted({"target_loss": 0.0})
    assert not ttt.targeted({"target_loss": True}) and not ttt.targeted({"target_loss": "1.8"})
    assert [round_params({"seed": 42, "target_loss": TARGET}, k)["seed"] for k in (1, 2, 3)] == [42, 43, 44]


def _round(seed: int, target: dict[str, Any]) -> dict[str, Any]:
    d = doc([loss_curve(seed)], dict(target, seed=seed))
    d["params"] = {"seed": seed, "target_loss": TARGET}
    return d


def test_pool_pools_loss_targets_over_rounds() -> None:
    docs = [_round(42, reached(4.0)), _round(43, reached(6.0, 3)), _round(44, reached(5.0))]
    pooled = ttt.pool(docs)
    assert pooled is not None and pooled["loss"] == TARGET and "accuracy" not in pooled
    assert pooled["status"] == "reached" and pooled["seconds"] == 5.0 and pooled["epochs"] == 4
    assert [(r["seed"], r["best_loss"]) for r in pooled["rounds"]] == [(42, 1.75), (43, 1.75), (44, 1.75)]
    assert all("best_accuracy" not in r for r in pooled["rounds"])
    cell = training_text.target_cell({"training": {"target": pooled}})
    assert (
        cell is not None and cell.startswith("val loss 1.80 reached in 5 s (4 intervals) [") and "over 3 seeds" in cell
    )
    validate(doc(target=pooled), "pooled")

    missed = ttt.pool([_round(42, reached(4.0)), _round(43, NOT_REACHED)])
    assert missed is not None and missed["status"] == "not reached" and missed["reached_rounds"] == 1
    assert [r["best_loss"] for r in missed["rounds"]] == [1.75, 1.93] and missed["seconds"] is None
    assert training_text.target_cell({"training": {"target": missed}}) == "val loss 1.80 not reached (in 1 of 2 rounds)"
    validate(doc(target=missed), "pooled")


def test_the_cells_name_the_loss_and_never_a_percent() -> None:
    assert training_text.target_cell(doc(target=reached(3.25, 2))) == "val loss 1.80 reached in 3.25 s (2 intervals)"
    assert training_text.target_cell(doc(target=NOT_REACHED)) == "val loss 1.80 not reached (best 1.93)"


def _loss_job(fw: str, seeds: list[int], target: dict[str, Any]) -> dict[str, Any]:
    """test_publish_pictures' mlp job (checks, rounds, first calls), its curves and target in validation loss."""
    d = training_job(fw, seeds, 80.0)
    d["params"] = {"epochs": 4, "target_loss": TARGET}
    d["training"] = {"target": target, "curves": [loss_curve(seed) for seed in seeds]}
    return d


def test_the_report_table_and_terminal_show_the_loss_target_and_curves(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "run", [_loss_job("flax", [1, 2], reached(3.25, 2)),
                                                 _loss_job("pytorch", [3], NOT_REACHED)]))  # fmt: skip
    judged = assess(run)
    markdown = render_run(judged, Format.markdown)
    assert "target validation loss: training time to reach it (evaluation excluded)" in markdown
    assert "| flax        | val loss 1.80 reached in 3.25 s (2 intervals) |" in markdown
    assert "| pytorch     | val loss 1.80 not reached (best 1.93)         |" in markdown

    plots = render_plots(judged)
    assert "learning curves (per epoch, one line per process, target val loss 1.80)" in plots
    line = next(ln for ln in plots.splitlines() if ln.strip().startswith("flax #2"))
    assert "val loss " in line and line.split("val loss ")[1].split()[1] == "1.75" and "%" not in line
    assert "test accuracy" not in plots


def test_the_png_draws_validation_loss_against_training_time_with_the_target_loss(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "run", [_loss_job("flax", [1, 2], reached())]))
    curves = pictures.learning_curves(assess(run))
    assert curves is not None and curves.measure is pictures.VAL_LOSS and curves.target == TARGET
    assert [p.val_loss for p in curves.curves[0].points] == loss_curve(1)["val_loss"]
    (band,) = curves.bands
    assert band.val_loss[0] == pytest.approx((2.58, 2.585, 2.59)) and band.accuracy[0] is None

    plt = _pyplot()
    fig = pictured.learning_curves_figure(plt, curves)
    eval_ax, _ = fig.axes
    lines = {ln.get_gid(): ln for ln in eval_ax.lines}
    assert list(lines["val_loss:flax:1"].get_xdata()) == [2.0, 3.0, 4.0, 5.0]
    assert list(lines["val_loss:flax:1"].get_ydata()) == loss_curve(1)["val_loss"]
    assert list(lines["val_loss-median:flax"].get_ydata()) == pytest.approx([2.585, 2.1, 1.85, 1.75])
    assert list(lines["target"].get_ydata()) == [TARGET, TARGET]
    assert lines["target"].get_label() == "target val loss 1.80"
    assert eval_ax.get_ylabel() == "validation loss" and "lower is better" in eval_ax.get_title()
    plt.close(fig)


def test_the_site_charts_the_validation_loss_and_the_target_loss(tmp_path: Path) -> None:
    results = tmp_path / "results"
    jobs = [_loss_job("flax", [1, 2], reached()), _loss_job("pytorch", [3], copy.deepcopy(NOT_REACHED))]
    write(results, "20240501-100000-mlp-0001", "20240501-100000-mlp-0001", jobs)
    publish_site(results, tmp_path / "site")
    page = run_pages(tmp_path / "site")["mlp"]
    learning = site_data(page)["pictures"]["learning"]
    assert learning["target"] == TARGET and learning["target_label"] == "target val loss 1.80"
    assert learning["target_field"] == "val_loss"
    evaluated, train = learning["charts"]
    assert (evaluated["id"], evaluated["field"], evaluated["y"], evaluated["unit"]) == (
        "chart-val_loss", "val_loss", "validation loss", "")  # fmt: skip
    assert evaluated["title"] == "mlp: validation loss against training time" and train["field"] == "loss"
    assert [(c["framework"], c["process"], c["val_loss"]) for c in learning["curves"]] == [
        ("flax", 1, loss_curve(1)["val_loss"]),
        ("flax", 2, loss_curve(2)["val_loss"]),
        ("pytorch", 1, loss_curve(3)["val_loss"]),
    ]
    assert all(c["accuracy"] == [None] * 4 for c in learning["curves"])
    assert learning["bands"][0]["val_loss"][0] == pytest.approx([2.58, 2.585, 2.59])
    assert (
        'id="chart-val_loss" class="chart picture" role="img" aria-label="Validation loss against cumulative ' in page
    )
    assert "The dashed grey line is the target val loss 1.80" in page and "target val loss 1.80 %" not in page
