"""The cuda12 images, for real: built from their locks and probed without a GPU.

Not part of the default run (marker `cuda_images`, deselected in pyproject's addopts): the two
images pull several GB of NVIDIA wheels from PyPI and take tens of minutes on a 2-core machine.

    python -m pytest -m cuda_images          # needs a Docker engine and PyPI; see docs/gpu.md

What it proves: `harness build --variant cuda12 --verify` succeeds on a machine without a GPU,
each image imports its framework, reports the CUDA/cuDNN it was built against and loads (the
versions the lock pins), and carries kernels for today's data-centre GPUs (8.0, 9.0). Whether
those kernels run is for a GPU machine: `harness doctor --device gpu`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.store.image_probe import probe
from harness.store.images import Engine, locked_packages, stack_image
from suites.contract.build_info import covers
from tests.conftest import harness

pytestmark = pytest.mark.cuda_images

STACKS = ("jax", "pytorch")


def _pinned(stack: str) -> dict[str, str]:
    return locked_packages(stack_image(stack, "cuda12").lock_file.read_text())


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


@pytest.fixture(scope="module")
def built(engine: Any) -> dict[str, Any]:
    proc = harness("build", "--stacks", ",".join(STACKS), "--variant", "cuda12", "--verify", "--quiet", timeout=7200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    wrapped = Engine(engine)  # not closed here: the client is the session's
    reports = {stack: probe(wrapped, stack_image(stack, "cuda12").tag, stack) for stack in STACKS}
    return {"output": proc.stdout, "reports": reports}


def test_build_verify_prints_each_images_cuda_build(built: dict[str, Any]) -> None:
    out = built["output"]
    for stack in STACKS:
        assert f"{stack}: verify {stack_image(stack, 'cuda12').tag}" in out
    torch_pins = _pinned("pytorch")
    assert f"torch {torch_pins['torch']}" in out
    assert f"CUDA {_major_minor(torch_pins['nvidia-cuda-runtime-cu12'])}" in out
    assert "PROBLEM" not in out


def test_pytorch_image_is_the_locked_cuda12_build(built: dict[str, Any]) -> None:
    info, pins = built["reports"]["pytorch"], _pinned("pytorch")
    assert info["framework"].split("+")[0] == f"torch {pins['torch']}"  # 2.10.0+cu128
    assert info["cuda"] == _major_minor(pins["nvidia-cuda-runtime-cu12"])
    assert info["cudnn"] == ".".join(pins["nvidia-cudnn-cu12"].split(".")[:3])
    assert info["packages"]["triton"] == pins["triton"] and info["compiler"]  # torch.compile's toolchain
    for capability in ("8.0", "9.0"):  # A100, H100
        assert covers(info["arch_list"], capability), info["arch_list"]
    # the fat-binary reader finds cubins for every architecture torch says it was compiled for
    assert {a for a in info["arch_list"] if a.startswith("sm_")} <= set(info["kernels"]["sm"])
    assert info["gpus"] == []  # no GPU here, and none pretended


def test_jax_image_is_the_locked_cuda12_build(built: dict[str, Any]) -> None:
    info, pins = built["reports"]["jax"], _pinned("jax")
    assert info["framework"] == f"jax {pins['jax']}"
    assert info["packages"]["jax-cuda12-plugin"] == pins["jax-cuda12-plugin"]
    assert info["packages"]["jax-cuda12-pjrt"] == pins["jax-cuda12-pjrt"]
    plugin = info["cuda12_plugin"]
    assert plugin["cuda_build"].startswith("12.")
    assert plugin["cuda_runtime"] == _major_minor(pins["nvidia-cuda-runtime-cu12"])
    assert plugin["cudnn_runtime"] == ".".join(pins["nvidia-cudnn-cu12"].split(".")[:3])
    assert info["ptxas"]["version"] == pins["nvidia-cuda-nvcc-cu12"]
    for capability in ("8.0", "9.0"):
        assert covers(plugin["kernels"]["sm"] + plugin["kernels"]["ptx"], capability), plugin["kernels"]
        assert covers(info["ptxas"]["targets"], capability)
    assert info["backend"] == "cpu" and info["gpus"] == []


def test_images_carry_nvml_bindings_and_their_labels(engine: Any, built: dict[str, Any]) -> None:
    for stack in STACKS:
        image = stack_image(stack, "cuda12")
        assert "nvidia-ml-py" in built["reports"][stack]["packages"]
        labels = engine.images.get(image.tag).labels
        assert labels["org.fw-harness.variant"] == "cuda12" and labels["org.fw-harness.lock-hash"] == image.lock_hash
        # without a driver, NVML reports nothing rather than failing the job
        raw = engine.containers.run(
            image.tag,
            ["python", "-c", "import pynvml, json\ntry:\n pynvml.nvmlInit()\nexcept pynvml.NVMLError as e:\n"
             " print(json.dumps(str(e)))"],
            network_mode="none", remove=True,
        )  # fmt: skip
        assert "NVML Shared Library Not Found" in json.loads(raw.decode().strip().splitlines()[-1])
