"""The build probe (suites/contract/build_info.py) and its reading on the host (harness/store/image_probe.py),
without Docker: fat-binary parsing on a synthetic library, compute-capability coverage, the probe's
output treated as hostile, and what `--verify` calls a broken cuda12 image. The real images are
probed by tests/integration/test_images_cuda.py."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.store import image_probe
from suites.contract import build_info
from suites.contract.build_info import covers, fatbin_archs
from tests.conftest import REPO


def _fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fat binary as nvcc lays it out: 16-byte header, then (64-byte entry header + payload) each."""
    body = b""
    for kind, arch in entries:
        payload = bytes(range(40))
        header = struct.pack("<HHIQIIHHI", kind, 0x101, 64, len(payload), 0, 0, arch % 10, arch // 10, arch)
        body += header.ljust(64, b"\0") + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_fatbin_archs_lists_cubins_and_ptx_of_every_embedded_fatbin(tmp_path: Path) -> None:
    library = tmp_path / "libkernels.so"
    decoy = struct.pack("<IHHQ", 0xBA55ED50, 7, 99, 10**12)  # the magic by chance, not a header
    library.write_bytes(
        b"\x7fELF" + b"\0" * 100 + decoy + _fatbin([(2, 80), (2, 90), (1, 90)]) + b"\0" * 33 + _fatbin([(2, 120)])
    )
    assert fatbin_archs(library) == {"sm": ["sm_80", "sm_90", "sm_120"], "ptx": ["compute_90"]}
    plain = tmp_path / "plain.so"
    plain.write_bytes(b"\x7fELF" + b"\0" * 64)
    assert fatbin_archs(plain) == {"sm": [], "ptx": []}


@pytest.mark.parametrize(
    ("targets", "capability", "runs"),
    [
        (["sm_80"], "8.6", True),  # a cubin runs on a higher minor of its major
        (["sm_86"], "8.0", False),
        (["sm_80"], "9.0", False),  # ... never on another major
        (["sm_90a"], "9.0", True),
        (["sm_90a"], "9.1", False),  # arch-specific: exactly that one
        (["sm_100f"], "10.3", True),  # a family: same major
        (["compute_90"], "12.0", True),  # PTX: compiled by the driver for anything newer
        (["compute_120"], "9.0", False),
        (["sm_50", "sm_60", "sm_70", "sm_80", "sm_90", "compute_120"], "8.9", True),
        (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], "12.0", False),  # Blackwell, no PTX
        (["nonsense"], "9.0", False),
    ],
)
def test_covers_follows_cuda_binary_compatibility(targets: list[str], capability: str, runs: bool) -> None:
    assert covers(targets, capability) is runs


def test_cuda_version_numbers() -> None:
    assert build_info._version_number(12090, "cuda") == "12.9"
    assert build_info._version_number(90800, "cudnn") == "9.8.0"
    assert build_info._version_number(91002, "cudnn") == "9.10.2"
    assert build_info._version_number(8902, "cudnn") == "8.9.2"
    assert build_info._version_number(0, "cuda") is None and build_info._version_number(None, "cudnn") is None


def test_probe_runs_here_for_the_local_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    """The module as docs/gpu.md runs it on a machine without Docker (here: CPU builds)."""
    assert build_info.main(["numpy"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["stack"] == "numpy" and info["framework"].startswith("numpy ") and info["gpus"] == []
    assert info["python"] == sys.version.split()[0]
    assert build_info.main(["tensorflow"]) == 2


def test_probe_source_is_standard_library_only_at_import() -> None:
    """It is sent into images as `python -c`: no import of the harness or suites at module level."""
    source = (REPO / "suites/contract/build_info.py").read_text()
    assert image_probe.PROBE_SOURCE.read_text() == source
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top_level if "suites" in line or "harness" in line], top_level


# ---------------------------------------------------------------------------------------------
# The host's reading of the probe


TORCH_CU12 = {
    "stack": "pytorch",
    "framework": "torch 2.10.0",
    "python": "3.11.2",
    "cuda": "12.8",
    "cudnn": "9.10.2",
    "nccl": "2.27.5",
    "arch_list": ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    "kernels": {"sm": ["sm_70", "sm_90"], "ptx": []},
    "packages": {"torch": "2.10.0", "triton": "3.6.0"},
    "compiler": "/usr/bin/g++",
    "gpus": [],
}
JAX_CU12 = {
    "stack": "jax",
    "framework": "jax 0.10.2",
    "python": "3.11.2",
    "packages": {"jax-cuda12-plugin": "0.10.2", "jax-cuda12-pjrt": "0.10.2"},
    "cuda12_plugin": {
        "cuda_build": "12.9",
        "cuda_runtime": "12.9",
        "cudnn_build": "9.8.0",
        "cudnn_runtime": "9.28.0",
        "kernels": {"sm": ["sm_50", "sm_80", "sm_90"], "ptx": ["compute_120"]},
    },
    "ptxas": {"version": "12.9.86", "targets": ["sm_50", "sm_80", "sm_90", "sm_90a", "sm_120"]},
    "backend": "cpu",
    "gpus": [],
}


def test_a_real_cuda12_report_passes_and_reads_well() -> None:
    assert image_probe.problems("cuda12", TORCH_CU12) == [] and image_probe.problems("cuda12", JAX_CU12) == []
    torch_lines = image_probe.summary(TORCH_CU12)
    assert "CUDA 12.8, cuDNN 9.10.2, NCCL 2.27.5, triton 3.6.0" in torch_lines
    assert "torch.cuda.get_arch_list(): sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120" in torch_lines
    jax_lines = "\n".join(image_probe.summary(JAX_CU12))
    assert "jax-cuda12-plugin 0.10.2, jax-cuda12-pjrt 0.10.2: built against CUDA 12.9, cuDNN 9.8.0" in jax_lines
    assert "sm_50 sm_80 sm_90 + PTX compute_120" in jax_lines and "GPUs visible: none (backend cpu)" in jax_lines


@pytest.mark.parametrize(
    ("report", "change", "problem"),
    [
        (TORCH_CU12, {"cuda": None}, "torch reports CUDA None, not 12.x"),
        (TORCH_CU12, {"cuda": "13.0"}, "not 12.x"),
        (TORCH_CU12, {"arch_list": []}, "get_arch_list() is empty"),
        (TORCH_CU12, {"cudnn": None}, "no cuDNN"),
        (JAX_CU12, {"cuda12_plugin": None}, "no jax-cuda12-plugin"),
        (JAX_CU12, {"ptxas": None}, "no ptxas"),
    ],
)
def test_a_cuda12_image_without_its_cuda_build_is_a_problem(
    report: dict[str, Any], change: dict[str, Any], problem: str
) -> None:
    broken = {k: v for k, v in {**report, **change}.items() if v is not None or k == "cuda"}
    assert any(problem in p for p in image_probe.problems("cuda12", broken)), image_probe.problems("cuda12", broken)
    assert image_probe.problems("cpu", broken) == []


def test_hostile_probe_output_is_refused_or_neutralised() -> None:
    for output in ("", "Traceback ...\nValueError", "[1, 2]", '{"framework": 3}'):
        with pytest.raises(HarnessError, match="not its JSON report"):
            image_probe.parse(output)
    info = image_probe.parse('warning\n{"framework": "torch\\u001b[31m 2", "stack": "pytorch", "cuda": "12.8"}')
    lines = image_probe.summary({**info, "arch_list": "sm_90", "kernels": ["x"], "gpus": "all"})
    assert all("\x1b" not in line for line in lines) and lines[0].startswith("torch?[31m 2")
    assert "torch.cuda.get_arch_list(): empty" in lines and "GPUs visible: none" in lines


def test_a_stack_without_a_host_declaration_is_refused_never_left_unchecked() -> None:
    from harness.core.stack_facts import of_stack

    with pytest.raises(HarnessError, match=r"stack 'tinygrad' has no host declaration .*/stack_tinygrad\.py"):
        of_stack("tinygrad")
    unknown = {**TORCH_CU12, "stack": "tinygrad"}
    for variant in ("cpu", "cuda12"):
        assert image_probe.problems(variant, unknown) == [
            "the probe reports stack 'tinygrad', not one this harness declares"
        ]
    assert "not one this harness declares" in str(image_probe.gpu_kernel_problem(unknown, "9.0"))
    assert image_probe.problems("cuda12", {**TORCH_CU12, "stack": "numpy"}) == []  # numpy: no GPU variant


def test_gpu_kernel_problem_names_the_missing_architecture() -> None:
    assert image_probe.gpu_kernel_problem(TORCH_CU12, "9.0") is None
    assert "built for sm_70" in str(image_probe.gpu_kernel_problem({**TORCH_CU12, "arch_list": ["sm_70"]}, "9.0"))
    assert image_probe.gpu_kernel_problem(JAX_CU12, "8.6") is None  # sm_80 cubins, ptxas has sm_80
    assert "ptxas cannot compile" in str(image_probe.gpu_kernel_problem(JAX_CU12, "10.0"))
    no_ptx = {**JAX_CU12, "cuda12_plugin": {**JAX_CU12["cuda12_plugin"], "kernels": {"sm": ["sm_80"], "ptx": []}}}
    assert "cuda12-plugin carries kernels for sm_80 only" in str(image_probe.gpu_kernel_problem(no_ptx, "9.0"))
    assert image_probe.gpu_kernel_problem(TORCH_CU12, "None") is None  # unknown capability: nothing to say


class _FakeContainers:
    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self.calls: list[dict[str, Any]] = []

    def run(self, tag: str, command: list[str], **kwargs: Any) -> bytes:
        self.calls.append({"tag": tag, "command": command, **kwargs})
        return ("some log line\n" + json.dumps(self.report)).encode()


class _FakeEngine:
    def __init__(self, report: dict[str, Any]) -> None:
        self.client = type("Client", (), {"containers": _FakeContainers(report)})()


@pytest.mark.parametrize(
    ("report", "passed", "detail"),
    [
        ({**TORCH_CU12, "gpus": [{"name": "NVIDIA H100", "cc": "9.0"}]}, True, "NVIDIA H100 (compute capability 9.0)"),
        ({**TORCH_CU12, "gpus": [{"name": "Tesla P100", "cc": "6.0"}]}, False, "torch was built for sm_70"),
        ({**JAX_CU12, "gpus": [{"name": "NVIDIA A100", "cc": "8.0"}]}, True, "sees 1 GPU(s)"),
        ({**JAX_CU12, "gpus": []}, False, "sees no GPU"),
    ],
)
def test_doctor_gpu_check_reads_the_probe(
    monkeypatch: pytest.MonkeyPatch, report: dict[str, Any], passed: bool, detail: str
) -> None:
    """doctor --device gpu on a (stand-in) GPU host: the probe runs with a GPU request, kernels are checked."""
    from harness.execute import doctor

    monkeypatch.setattr(doctor, "existing_image_id", lambda engine, image: "sha256:1")
    engine = _FakeEngine(report)
    check = doctor._stack_check(engine, report["stack"], "gpu")  # type: ignore[arg-type]
    assert check.passed is passed and detail in check.detail, check
    call = engine.client.containers.calls[0]
    assert call["device_requests"] and call["network_mode"] == "none" and call["read_only"]
    assert call["command"][:2] == ["python", "-c"] and call["command"][-1] == report["stack"]
