"""The datasheet peaks of each GPU board variant (harness/store/peaks.py, GPU_PEAKS).

A chip comes in several boards with different clocks, power and memory: an H100 PCIe reaches 3/4
of an SXM5's FLOP/s, an H100 NVL and a GH200 have more and faster memory. Each variant has its
row, found by the exact name the driver reports, with the total memory and the power limit
telling apart the variants a name leaves open; a variant not in the table, or one still
ambiguous, gets no peak (and says why) rather than a neighbour's. No GPU is needed: the inputs
are what a result records (torch's device name and memory, NVML's power limit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.judge.assessment import assess
from harness.report.table import render
from harness.store import peaks
from harness.store.peaks import NO_PEAK, GpuMatch, bandwidth_for, machine_limits, match_gpu, peak_for
from harness.store.run_folder import load_run
from tests.factories import metric, result, write_run

MIB = 2**20
TERA = 1e12


def _mib(n: int) -> int:
    return n * MIB


# name as the driver reports it, total memory (nvidia-smi's MiB), enforced power limit (W) ->
# variant, and its dense datasheet figures: FP64 (tensor), FP32, TF32, BF16 TFLOP/s, memory TB/s.
VARIANTS = [
    ("NVIDIA H100 80GB HBM3", _mib(81559), 700.0, "H100 SXM5 80GB", (67, 67, 494.5, 989.5, 3.35)),
    ("NVIDIA H100 PCIe", _mib(81559), 350.0, "H100 PCIe 80GB", (51, 51, 378, 756.5, 2.0)),
    ("NVIDIA H100 NVL", _mib(95830), 400.0, "H100 NVL 94GB", (60, 60, 417.5, 835.5, 3.9)),
    ("NVIDIA H200", _mib(143771), 700.0, "H200 SXM 141GB", (67, 67, 494.5, 989.5, 4.8)),
    ("NVIDIA H200 NVL", _mib(143771), 600.0, "H200 NVL 141GB", (60, 60, 417.5, 835.5, 4.8)),
    ("NVIDIA GH200 480GB", _mib(97871), 900.0, "GH200 96GB HBM3", (67, 67, 494.5, 989.5, 4.0)),
    ("NVIDIA GH200 144G HBM3e", _mib(146831), 900.0, "GH200 144GB HBM3e", (67, 67, 494.5, 989.5, 4.9)),
    ("NVIDIA A100-SXM4-80GB", _mib(81920), 400.0, "A100 SXM4 80GB", (19.5, 19.5, 156, 312, 2.039)),
    ("NVIDIA A100-SXM4-40GB", _mib(40960), 400.0, "A100 SXM4 40GB", (19.5, 19.5, 156, 312, 1.555)),
    ("NVIDIA A100 80GB PCIe", _mib(81920), 300.0, "A100 PCIe 80GB", (19.5, 19.5, 156, 312, 1.935)),
    ("NVIDIA A100-PCIE-40GB", _mib(40960), 250.0, "A100 PCIe 40GB", (19.5, 19.5, 156, 312, 1.555)),
    ("NVIDIA GeForce RTX 3060 Ti", _mib(8192), 200.0, "GeForce RTX 3060 Ti", (0.253, 16.2, 16.2, 64.8, 0.448)),
]


def gpu_result(
    name: str, memory: int | None = None, power: float | None = None, arithmetic: str = "fp32", nvml_gpus: int = 1
) -> dict[str, Any]:
    """A GPU job's result as the adapters write it: torch records the memory, NVML the power limit of
    every GPU it sees (the job ran on one of them)."""
    device: dict[str, Any] = {"kind": "gpu", "name": name}
    if memory is not None:
        device["memory_bytes"] = memory
    gpus = [{"index": i, "name": name, "power_limit_w": power} for i in range(nvml_gpus)]
    return {
        "device": "gpu",
        "environment": {
            "device": device,
            "nvml": {"source": "nvml", "gpus": gpus},
            "precision": {"measured": {"matmul": {"class": arithmetic}}},
        },
    }


@pytest.mark.parametrize(("name", "memory", "power", "variant", "figures"), VARIANTS, ids=[v[3] for v in VARIANTS])
def test_each_variant_gets_its_own_row_and_datasheet_figures(
    name: str, memory: int, power: float, variant: str, figures: tuple[float, ...]
) -> None:
    found = match_gpu(name, memory, power)
    assert found.row is not None and found.row.name == variant, found.why
    fp64, fp32, tf32, bf16, tb_s = figures
    assert (found.row.fp64, found.row.fp32, found.row.tf32, found.row.bf16, found.row.memory_tb_s) == figures
    # What the lint holds a job to: the measured arithmetic picks the column.
    doc = gpu_result(name, memory, power)
    assert peak_for(doc, "float64").value == fp64 * TERA  # type: ignore[union-attr]
    # A float32 reading may be three TF32 passes (the probe cannot tell them from fp32): the
    # ceiling is the larger of FP32 and TF32 / 3, while "% of peak" divides by the FP32 figure.
    assert peak_for(doc, "float32").value == fp32 * TERA  # type: ignore[union-attr]
    assert peak_for(doc, "float32").ceiling == max(fp32, tf32 / 3) * TERA  # type: ignore[union-attr]
    assert peak_for(gpu_result(name, memory, power, "tf32"), "float32").value == tf32 * TERA  # type: ignore[union-attr]
    assert peak_for(gpu_result(name, memory, power, "bf16"), "float32").value == bf16 * TERA  # type: ignore[union-attr]
    moved = bandwidth_for(doc)
    assert moved is not None and moved.value == tb_s * TERA and variant in moved.basis


@pytest.mark.parametrize(("name", "memory", "power", "variant", "figures"), VARIANTS, ids=[v[3] for v in VARIANTS])
def test_the_name_alone_finds_a_variant_it_names(
    name: str, memory: int, power: float, variant: str, figures: tuple[float, ...]
) -> None:
    """A JAX job records no memory and NVML may be missing: an unambiguous name is enough."""
    assert match_gpu(name).row is not None and match_gpu(name).row.name == variant  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("NVIDIA GH200 480GB", "H200 SXM 141GB"),  # "GH200" contains "H200"
        ("NVIDIA GH200 144G HBM3e", "H200 SXM 141GB"),
        ("NVIDIA H100 NVL", "H100 SXM5 80GB"),
        ("NVIDIA H200 NVL", "H200 SXM 141GB"),
        ("NVIDIA H100 PCIe", "H100 SXM5 80GB"),
    ],
)
def test_the_variants_once_matched_to_sxm_rows_are_not(name: str, wrong: str) -> None:
    found = match_gpu(name)
    assert found.row is not None and found.row.name != wrong


@pytest.mark.parametrize(
    ("memory", "power", "variant"),
    [
        (_mib(95830), None, "H100 NVL 94GB"),  # only the NVL has 94 GB
        (_mib(81559), 700.0, "H100 SXM5 80GB"),  # 80 GB, and above the PCIe and NVL boards' maximum power
        (_mib(81559), 300.0, None),  # 80 GB at 300 W: an SXM5 capped low or a PCIe board
        (_mib(81559), None, None),
        (None, 700.0, "H100 SXM5 80GB"),  # no memory recorded (JAX): only the SXM5 runs at 700 W
        (None, None, None),
    ],
)
def test_an_ambiguous_name_is_told_apart_by_memory_and_power(
    memory: int | None, power: float | None, variant: str | None
) -> None:
    found = match_gpu("NVIDIA H100", memory, power)
    assert (found.row.name if found.row else None) == variant
    if variant is None:
        assert found.why is not None and found.why.startswith(NO_PEAK) and " could be " in found.why


@pytest.mark.parametrize(
    "name",
    ["NVIDIA H800", "NVIDIA B200", "NVIDIA H20", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA GeForce RTX 4090", ""],
)
def test_an_unknown_device_gets_no_peak_and_says_why(name: str) -> None:
    found = match_gpu(name, _mib(81559), 700.0)
    assert found == GpuMatch(None, found.why) and found.row is None
    assert found.why is not None and found.why.startswith(f"{NO_PEAK}: ") and "not in the peak table" in found.why
    doc = gpu_result(name, _mib(81559), 700.0)
    assert peak_for(doc, "float32") is None and bandwidth_for(doc) is None


def test_memory_that_contradicts_the_name_gives_no_peak() -> None:
    found = match_gpu("NVIDIA H100 PCIe", _mib(95830))
    assert found.row is None and found.why is not None and "93.6 GiB is none of H100 PCIe 80GB" in found.why


def test_driver_spellings_of_one_name_match() -> None:
    """Older drivers leave out "NVIDIA "; case and spacing vary between tools."""
    for spelled in ("A100-SXM4-40GB", "nvidia a100-sxm4-40gb", "NVIDIA  A100-SXM4-40GB "):
        assert match_gpu(spelled).row is not None and match_gpu(spelled).row.name == "A100 SXM4 40GB"  # type: ignore[union-attr]


def test_the_power_limit_comes_from_nvml_only_when_the_gpus_of_that_name_agree() -> None:
    bare = "NVIDIA H100"
    assert peak_for(gpu_result(bare, _mib(81559), 700.0, nvml_gpus=2), "float32") is not None
    doc = gpu_result(bare, _mib(81559), 700.0, nvml_gpus=2)
    doc["environment"]["nvml"]["gpus"][1]["power_limit_w"] = 300.0  # which one ran the job is unknown
    assert peak_for(doc, "float32") is None


def test_a_hostile_environment_gives_no_peak_rather_than_an_error() -> None:
    for env in ({"device": "x", "nvml": []}, {"device": {"name": 5, "memory_bytes": "lots"}, "nvml": {"gpus": "x"}}):
        doc = {"device": "gpu", "environment": env}
        assert peak_for(doc, "float32") is None and bandwidth_for(doc) is None


def test_no_peak_is_said_in_the_table(tmp_path: Path) -> None:
    doc = result("pytorch", [dict(metric("matmul", [0.01] * 3, flops=2e12), dtype="float32", bytes=1e9)])
    doc["device"] = "gpu"
    doc["environment"] = gpu_result("NVIDIA H100", _mib(81559), 300.0)["environment"]
    text = render(assess(load_run(write_run(tmp_path / "run", [doc]))))
    assert "no datasheet peak: NVIDIA H100 could be H100 SXM5 80GB or H100 PCIe 80GB" in text
    assert "of peak" not in text


def test_the_calibration_limit_of_a_name_is_its_fastest_variant() -> None:
    """The host sees names only (nvidia-smi): a cached figure is held to the fastest variant a name
    could be, so only the impossible is discarded."""
    limits = machine_limits("gpu", {}, ["NVIDIA H100"])
    assert limits["float32/fp32"][0] == 494.5 / 3 * TERA and "H100 SXM5 80GB" in limits["float32/fp32"][1]
    assert "3xTF32" in limits["float32/fp32"][1]
    assert limits["float32/tf32"][0] == 494.5 * TERA and limits["bfloat16/bf16"][0] == 989.5 * TERA
    assert limits["bandwidth"][0] == 3.9 * TERA * peaks.GPU_CACHE_HEADROOM  # the NVL's memory
    assert machine_limits("gpu", {}, ["NVIDIA H800"]) == {}


def _h200_fp32_job(tmp_path: Path, tflops: float, arithmetic: str = "fp32") -> str:
    """The run table of one H200 float32 matmul job achieving `tflops` TFLOP/s at its median."""
    doc = result("pytorch", [dict(metric("matmul", [1.0] * 3, flops=tflops * TERA), dtype="float32")])
    doc["device"] = "gpu"
    doc["environment"] = gpu_result("NVIDIA H200", _mib(143771), 700.0, arithmetic)["environment"]
    return render(assess(load_run(write_run(tmp_path / f"run-{tflops:g}-{arithmetic}", [doc]))))


def test_percent_of_peak_at_fp32_is_of_the_fp32_figure_not_the_3xtf32_limit(tmp_path: Path) -> None:
    """MFU divides by the datasheet figure of the arithmetic the job ran (an H200's FP32 is 67 TFLOP/s),
    while the plausibility limit stays the fastest float32 can go (three TF32 passes, 494.5 / 3)."""
    text = _h200_fp32_job(tmp_path, 50.0)
    assert "75% of peak" in text and "30% of peak" not in text and "IMPLAUSIBLE" not in text
    # Between the FP32 figure and TF32 / 3: possible as 3xTF32, shown against the FP32 figure.
    text = _h200_fp32_job(tmp_path, 100.0)
    assert "149% of peak" in text and "IMPLAUSIBLE" not in text
    text = _h200_fp32_job(tmp_path, 170.0)
    assert "IMPLAUSIBLE" in text and "> limit 1.648e+05" in text
    assert "FP32 peak 67 TFLOP/s; limit 164.8 TFLOP/s, 3xTF32 at TF32 / 3" in text
    # TF32 and BF16 runs: their own datasheet figures, for the share and the limit alike.
    assert "10% of peak" in _h200_fp32_job(tmp_path, 49.45, "tf32")
    assert "10% of peak" in _h200_fp32_job(tmp_path, 98.95, "bf16")
