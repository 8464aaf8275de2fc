"""Time-to-target on the host: which runs aim at a target, and pooling the rounds (the words a
report shows are harness/report/training_text.py's).

A job with `--param target_accuracy=P` (an accuracy suite) or `--param target_loss=L` (a language
model: reached when the validation loss is at or below L) records `training.target`
(runtime/training.py), with `accuracy` or `loss` and the best value seen: status
`reached` with seconds (training time), wall seconds and epochs, or `not reached`, which is a
status and never a number. Over `--rounds K` each round trains from another seed (the
variation time-to-target really has: initialisation, order, dropout), and the pooled figure is
the median over the rounds with its interval -- only when every round reached the target: a round
that did not is a censored observation, so the pool is `not reached` and says in how many rounds it
was.

The interval is statistics.median_interval's, the same as every other median's in a report: with
fewer than BOOTSTRAP_MIN_N seeds (3-6 is usual) the distribution-free order-statistic interval,
whose coverage is exact and is recorded beside it (`seconds_interval_coverage`) and printed inside
the brackets when below 95 % (`[10 s-14 s 75%] over 3 seeds`: at 3 seeds [min, max] holds the
median in 75 % of cases, at 4 in 88 %, at 5 in 94 %, from 6 in at least 95 %); from
BOOTSTRAP_MIN_N seeds a 95 % bootstrap. Records written before the coverage was (a bootstrap
claiming 95 % at any number of seeds) get the interval worked out again from their rounds
(`seconds_interval`).

Wiring (harness/execute/rounds.py, harness/report/table.py): each round's jobs take their seed from
rounds.py's `round_params` (through `targeted`); before pooling metrics, `drop_partial_metrics(docs)`;
after, `merged["training"]["target"] = pool(docs)`.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from harness.core.result_types import Result
from harness.core.statistics import median_interval

# The metrics a job records only when its target was reached (runtime/training.record_target).
TARGET_METRICS = ("time to target", "wall time to target", "epochs to target")


# The job parameters that set a target (0: none): an accuracy suite's, a language model's.
TARGET_PARAMS = ("target_accuracy", "target_loss")


def targeted(params: dict[str, Any]) -> bool:
    return any(
        isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        for value in (params.get(name) for name in TARGET_PARAMS)
    )


def drop_partial_metrics(docs: Sequence[Result]) -> list[Result]:
    """Copies of the rounds' results without the target metrics unless every round has them.

    Samples of a round that reached the target pooled with nothing from one that did not would
    be a median of the lucky rounds only.
    """
    out = [copy.deepcopy(d) for d in docs]
    ok = [d for d in out if d.get("status") == "ok"]
    for name in TARGET_METRICS:
        if not all(any(m["name"] == name for m in d["metrics"]) for d in ok):
            for d in ok:
                d["metrics"] = [m for m in d["metrics"] if m["name"] != name]
    return out


def _target(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    training = doc.get("training")
    target = training.get("target") if isinstance(training, dict) else None
    return target if isinstance(target, dict) else None


def pool(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One `training.target` for K rounds: per-round outcomes and seeds, the median when all reached."""
    rounds = [(d, t) for d in docs if d.get("status") == "ok" and (t := _target(d)) is not None]
    if not rounds:
        return None
    measure = "loss" if "loss" in rounds[0][1] else "accuracy"  # the rounds of one job: one measure
    per_round = [
        {
            "seed": d.get("params", {}).get("seed"),
            "status": t["status"],
            "seconds": t.get("seconds"),
            "wall_seconds": t.get("wall_seconds"),
            "epochs": t.get("epochs"),
            f"best_{measure}": t.get(f"best_{measure}"),
        }
        for d, t in rounds
    ]
    reached = [r for r in per_round if r["status"] == "reached"]
    pooled: dict[str, Any] = {
        measure: rounds[0][1][measure],
        "rounds": per_round,
        "reached_rounds": len(reached),
        "status": "not reached",
        "seconds": None,
        "wall_seconds": None,
        "epochs": None,
    }
    if len(reached) == len(per_round):
        seconds = [float(r["seconds"]) for r in reached]
        pooled.update(
            status="reached",
            seconds=statistics.median(seconds),
            wall_seconds=statistics.median(float(r["wall_seconds"]) for r in reached),
            epochs=statistics.median(float(r["epochs"]) for r in reached),
        )
        if len(seconds) > 1:  # one seed has no interval
            interval = median_interval(seconds)
            pooled.update(seconds_interval=[interval.low, interval.high], seconds_interval_coverage=interval.coverage)
    return pooled
