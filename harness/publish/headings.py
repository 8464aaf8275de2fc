"""What a suite page's chart is called: the arithmetic it really ran, and only what tells it apart.

A chart is one workload on one machine (history.py); its full description (every parameter, the
arithmetic, the device, the dataset, the machine) runs to 200 characters for a training suite, so
the heading carries only the fields whose values differ between the suite's charts and the whole
description sits in a details element under it. The arithmetic is read from the results: the
dtype a metric declares (the xla suite's float64), else the precision the job ran under; never the
`fp32` default of `--precision`, which names the mode of float32 matmuls, not the numbers' type.
Every string here comes from a result file and is made inert (`plain`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.core.result_types import Metric, Result
from harness.core.stack_facts.facts import as_dict
from harness.text.escape import plain

# --precision's modes as the arithmetic they run (suites/contract/settings.py PRECISIONS).
_MODES = {"fp32": "float32", "tf32": "float32 (TF32 allowed)", "bf16": "bfloat16"}


def arithmetic(result: Result, metric: Metric | None) -> str:
    """`float64`: the dtype the metric declares, else the arithmetic of the job's precision mode."""
    dtype = metric.get("dtype") if metric is not None else None
    if isinstance(dtype, str) and dtype.strip():
        return plain(dtype.strip())
    mode = as_dict(result.get("settings")).get("precision") or "fp32"
    return plain(_MODES.get(str(mode), str(mode)))


def fields(result: Result, arithmetics: Iterable[str], machine: str) -> dict[str, str]:
    """Every field that defines a chart, name -> its words (`param matrix_size` -> `matrix_size=128`).
    `arithmetics`: what each of the chart's points ran (two frameworks may declare different dtypes)."""
    found = {f"param {plain(k)}": plain(f"{k}={v}") for k, v in sorted(as_dict(result.get("params")).items())}
    found["arithmetic"] = " / ".join(sorted(set(arithmetics))) or "unknown arithmetic"
    found["device"] = plain(result.get("device"))
    dataset = as_dict(result.get("dataset"))
    data = next((dataset[k] for k in ("used_fingerprint", "fingerprint", "sha256", "name") if dataset.get(k)), None)
    if data:
        found["dataset"] = plain(f"data {str(data)[:12]}")
    if machine:
        found["machine"] = plain(machine)
    return found


def differing(charts: Sequence[Mapping[str, str]]) -> list[str]:
    """The field names whose values are not the same on every chart, in their first order."""
    names = list(dict.fromkeys(name for chart in charts for name in chart))
    return [name for name in names if len({chart.get(name) for chart in charts}) > 1]


def heading(chart: Mapping[str, str], names: Sequence[str]) -> str:
    """`matrix_size=2000, float64`: the chart's values of the differing fields (those it has)."""
    return ", ".join(chart[name] for name in names if chart.get(name))


def description(suite: str, chart: Mapping[str, str]) -> str:
    """Every defining field in one line, for the details under the heading."""
    params = [value for name, value in chart.items() if name.startswith("param ")]
    # The dataset (`data 1a2b...`) and the machine (`machine ...`) say what they are; the others do not.
    rest = [f"{name} {value}" if name in ("arithmetic", "device") else value for name, value in chart.items()
            if not name.startswith("param ")]  # fmt: skip
    return "; ".join([f"suite {plain(suite)}", "parameters " + (", ".join(params) or "none"), *rest])
