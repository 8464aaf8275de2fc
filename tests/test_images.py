"""Image tags, lock hashes, wheelhouses and the docker backend's container request, without Docker."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import Limits
from harness.backends.docker_backend import DATA_MOUNT, RESULTS_MOUNT, SUITES_MOUNT, DockerBackend, GpuRequest
from harness.core.errors import HarnessError
from harness.store import images
from harness.store.images import Ensured, locked_packages, select_wheels, stack_image, wheel_fits, wheels_for
from harness.store.plan import Job
from tests.conftest import REPO, finished, harness, read, run_folder

STACKS = ("numpy", "jax", "pytorch")


def test_tag_names_stack_variant_and_lock_hash() -> None:
    for stack in STACKS:
        for variant in images.VARIANTS:
            image = stack_image(stack, variant)
            lock = REPO / "images" / stack / f"lock-{variant}.txt"
            assert image.lock_hash == hashlib.sha256(lock.read_bytes()).hexdigest()
            assert image.tag == f"fw-harness/{stack}:{variant}-{image.lock_hash[:12]}"
            assert image.labels()["org.fw-harness.lock-hash"] == image.lock_hash


def test_other_base_image_is_another_tag_and_recipe() -> None:
    default, other = stack_image("numpy"), stack_image("numpy", base_image="registry.local/python:3.11")
    assert other.tag.startswith(default.tag + "-") and other.recipe_hash != default.recipe_hash
    assert other.lock_hash == default.lock_hash


def test_changed_lock_or_dockerfile_changes_tag_or_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "images"
    shutil.copytree(REPO / "images" / "numpy", copy / "numpy")
    monkeypatch.setattr(images, "IMAGES_DIR", copy)
    before = stack_image("numpy")
    (copy / "numpy" / "Dockerfile").write_text((copy / "numpy" / "Dockerfile").read_text() + "\n# edited\n")
    edited = stack_image("numpy")
    assert edited.tag == before.tag and edited.recipe_hash != before.recipe_hash  # rebuilt under the same tag
    lock = copy / "numpy" / "lock-cpu.txt"
    lock.write_text(lock.read_text().replace("threadpoolctl==3.8.0", "threadpoolctl==3.7.0"))
    assert stack_image("numpy").tag != before.tag


@pytest.mark.parametrize(
    ("stack", "variant", "base", "message"),
    [
        ("tensorflow", "cpu", images.DEFAULT_BASE_IMAGE, "unknown stack 'tensorflow'"),
        ("jax", "rocm", images.DEFAULT_BASE_IMAGE, "--variant 'rocm' is not one of cpu, cuda12"),
        ("jax", "cpu", "python 3.11", "--base-image 'python 3.11' is not an image reference"),
    ],
)
def test_bad_image_choices_are_one_line_errors(stack: str, variant: str, base: str, message: str) -> None:
    with pytest.raises(HarnessError, match=re.escape(message)) as error:
        stack_image(stack, variant, base)
    assert "\n" not in str(error.value)


def test_locks_are_fully_pinned_with_hashes() -> None:
    for lock in sorted((REPO / "images").glob("*/lock*.txt")):
        text = lock.read_text()
        pinned = locked_packages(text)
        assert pinned, lock
        requirement_lines = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
        assert len(requirement_lines) == len(pinned), f"{lock}: a requirement without == pin"
        assert text.count("--hash=sha256:") >= len(pinned), f"{lock}: a pin without a hash"
    assert locked_packages((REPO / "images/pytorch/lock-cpu.txt").read_text())["torch"] == "2.13.0+cpu"
    assert locked_packages((REPO / "images/pytorch/lock-cuda12.txt").read_text())["torch"] == "2.10.0"
    cuda_jax = locked_packages((REPO / "images/jax/lock-cuda12.txt").read_text())
    assert "jax-cuda12-plugin" in cuda_jax and any(name.endswith("-cu12") for name in cuda_jax)


def test_compose_lock_hashes_match_the_locks() -> None:
    """compose.yaml passes each lock's sha256 to its build, which refuses a stale one."""
    compose = (REPO / "compose.yaml").read_text()
    found = re.findall(r"LOCK_HASH: ([0-9a-f]{64}) +# sha256 of images/(\S+)", compose)
    assert len(found) == 6  # report, three cpu stacks, two cuda12 stacks
    for digest, lock in found:
        assert digest == hashlib.sha256((REPO / "images" / lock).read_bytes()).hexdigest(), (
            f"run images/lock.sh ({lock})"
        )


def test_compose_image_tags_name_their_locks() -> None:
    """A changed lock is a new tag, so `docker compose up` builds it instead of reusing a stale image."""
    compose = (REPO / "compose.yaml").read_text()
    tags = re.findall(r"image: fw-harness-compose/(\w+):(\w+)-([0-9a-f]{12})$", compose, re.M)
    assert len(tags) == 6, tags
    for stack, variant, digest in tags:
        lock = REPO / "images" / stack / ("lock.txt" if stack == "report" else f"lock-{variant}.txt")
        assert digest == hashlib.sha256(lock.read_bytes()).hexdigest()[:12], f"run images/lock.sh ({stack} {variant})"


def test_dockerfiles_follow_the_contract() -> None:
    for stack in (*STACKS, "report"):
        text = (REPO / "images" / stack / "Dockerfile").read_text()
        assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in text
        assert re.search(r"^USER 10001:10001$", text, re.M)
        assert "--no-cache-dir" in text and "--require-hashes" in text
        assert not re.search(r"^(COPY|ADD)\b.*suites", text, re.M)  # suites/ is mounted, never baked in
        for key in ("stack", "variant", "lock-hash"):
            assert f"org.fw-harness.{key}=" in text
        # the lock is installed before anything that changes often: nothing follows but the copy-out
        assert text.index("COPY lock") < text.index("pip install")


@pytest.mark.parametrize(
    ("filename", "fits"),
    [
        ("numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", ("numpy", "2.4.6")),
        ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", ("torch", "2.13.0+cpu")),
        ("ml_dtypes-0.6.0-cp311-cp311-manylinux_2_17_x86_64.whl", ("ml-dtypes", "0.6.0")),
        ("typing_extensions-4.16.0-py3-none-any.whl", ("typing-extensions", "4.16.0")),
        ("cryptography-46.0.0-cp39-abi3-manylinux_2_34_x86_64.whl", ("cryptography", "46.0.0")),
        ("numpy-2.4.6-cp312-cp312-manylinux_2_28_x86_64.whl", None),
        ("numpy-2.4.6-cp311-cp311-macosx_14_0_arm64.whl", None),
        ("numpy-2.4.6.tar.gz", None),
    ],
)
def test_wheel_fits_the_images_platform(filename: str, fits: tuple[str, str] | None) -> None:
    assert wheel_fits(filename) == fits


def test_wheelhouse_errors_name_the_problem_and_the_fix(tmp_path: Path) -> None:
    image = stack_image("numpy")
    with pytest.raises(HarnessError, match="holds no wheels.*harness wheelhouse"):
        wheels_for(image, tmp_path)
    (tmp_path / "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    with pytest.raises(
        HarnessError, match=r"lacks 2 of the wheels the numpy cpu lock pins \(scipy==1.17.1, threadpoolctl"
    ):
        wheels_for(image, tmp_path)
    with pytest.raises(HarnessError, match="is not a folder"):
        wheels_for(image, tmp_path / "missing")


def test_select_wheels_takes_only_what_the_lock_pins(tmp_path: Path) -> None:
    for name in (
        "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl",
        "numpy-2.3.0-cp311-cp311-manylinux_2_28_x86_64.whl",  # another version: not offered
        "scipy-1.17.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "threadpoolctl-3.8.0-py3-none-any.whl",
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",  # another stack's
    ):
        (tmp_path / name).write_bytes(b"")
    chosen, missing = select_wheels(tmp_path, (REPO / "images/numpy/lock-cpu.txt").read_text())
    assert [p.name.split("-")[0] for p in chosen] == ["numpy", "scipy", "threadpoolctl"] and not missing
    assert "2.3.0" not in " ".join(p.name for p in chosen)


def test_gpu_request_parsing() -> None:
    assert GpuRequest.parse("all") == GpuRequest(count=-1)
    assert GpuRequest.parse("2") == GpuRequest(count=2)
    assert GpuRequest.parse("device=0,2") == GpuRequest(count=0, device_ids=("0", "2"))
    for bad in ("0", "two", "device=", "-1"):
        with pytest.raises(HarnessError, match="--gpus"):
            GpuRequest.parse(bad)


class _FakeEngine:
    class client:  # noqa: N801 - stands in for docker.DockerClient
        @staticmethod
        def info() -> dict[str, Any]:
            return {"NCPU": 2}


def _job(device: str = "cpu", data_dir: str | None = None) -> Job:
    return Job(
        suite="xla", framework="jax", stack="jax", params={"matrix_size": 64}, repeat=3, warmup=1,
        device=device, threads=None, timeout_s=60.0, data_dir=data_dir,
    )  # fmt: skip


def _kwargs(backend: DockerBackend, job: Job, tmp_path: Path) -> dict[str, Any]:
    image = stack_image("jax", "cuda12" if job.device == "gpu" else "cpu")
    return backend.create_kwargs(job, "run-1", tmp_path, Ensured(image, "sha256:abc", False, 0.0))


def test_planned_container_is_isolated(tmp_path: Path) -> None:
    backend = DockerBackend(_FakeEngine(), limits=Limits(memory_bytes=2**30, cpus=1.5))  # type: ignore[arg-type]
    kwargs = _kwargs(backend, _job(data_dir=str(tmp_path)), tmp_path)
    assert kwargs["network_mode"] == "none" and kwargs["read_only"] is True
    assert kwargs["cap_drop"] == ["ALL"] and kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["pids_limit"] > 0 and "/tmp" in kwargs["tmpfs"]
    assert not kwargs["user"].startswith("0:")
    mounts = {m["Target"]: m for m in kwargs["mounts"]}
    assert mounts[SUITES_MOUNT]["ReadOnly"] is True and mounts[DATA_MOUNT]["ReadOnly"] is True
    assert mounts[RESULTS_MOUNT]["ReadOnly"] is False
    assert kwargs["nano_cpus"] == 1_500_000_000 and kwargs["mem_limit"] == kwargs["memswap_limit"] == 2**30
    assert kwargs["labels"]["org.fw-harness.run-id"] == "run-1"
    assert kwargs["labels"]["org.fw-harness.framework"] == "jax"
    assert kwargs["command"] == ["python", "-m", "suites", "run", "--job", f"{RESULTS_MOUNT}/job.json"]
    spec = backend.job_spec(_job(data_dir=str(tmp_path)), "run-1")  # what the container finds in /results/job.json
    assert (spec.result_path, spec.data_dir, spec.run_id) == (f"{RESULTS_MOUNT}/jax.json", DATA_MOUNT, "run-1")
    assert "device_requests" not in kwargs


def test_gpu_job_carries_the_device_request(tmp_path: Path) -> None:
    backend = DockerBackend(_FakeEngine())  # type: ignore[arg-type]
    (request,) = _kwargs(backend, _job(device="gpu"), tmp_path)["device_requests"]
    assert request["Driver"] == "nvidia" and request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    picked = DockerBackend(_FakeEngine(), gpus=GpuRequest.parse("device=1"))  # type: ignore[arg-type]
    (request,) = _kwargs(picked, _job(device="gpu"), tmp_path)["device_requests"]
    assert request["DeviceIDs"] == ["1"]


def test_cpus_beyond_the_host_is_refused() -> None:
    with pytest.raises(HarnessError, match="--cpus 4 is more than the Docker host's 2 CPUs"):
        DockerBackend(_FakeEngine(), limits=Limits(cpus=4))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("build", "--stacks", "numpy,tensorflow"), "--stacks: unknown stack 'tensorflow'"),
        (("run", "--suite", "xla", "--backend", "docker", "--python", "jax=/usr/bin/python3"), "--python picks local"),
        (("run", "--suite", "xla", "--gpus", "all"), "--gpus all selects GPUs for --device gpu"),
        (("run", "--suite", "xla", "--backend", "local", "--device", "gpu", "--gpus", "1"), "use --backend docker"),
        (("run", "--suite", "xla", "-f", "jax", "--backend", "docker", "--device", "gpu", "--gpus", "x"), "--gpus 'x'"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = harness(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_build_with_an_empty_wheelhouse_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = harness("build", "--stacks", "numpy", "--wheelhouse", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --wheelhouse {tmp_path} holds no wheels (*.whl); fill it where PyPI is reachable with "
        f"`harness wheelhouse {tmp_path}`"
    )


def test_auto_without_an_engine_runs_locally_with_a_notice(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    proc = harness(
        "run", "--suite", "xla", "--frameworks", "numpy", "--backend", "auto", "--param", "matrix_size=16",
        "--repeat", "1", "--results-dir", str(results),
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "no Docker engine answers" in notes[0] and "local backend" in notes[0]
    run = run_folder(proc.stdout)
    assert read(run / "summary.json")["backend"] == "local" and read(run / "numpy.json")["backend"] == "local"


@pytest.mark.parametrize("args", [("build", "--stacks", "numpy"), ("run", "--suite", "xla", "--backend", "docker")])
def test_no_engine_is_one_line_exit_2(args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    proc = harness(*args)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: no Docker engine answers (") and "start Docker" in line


def test_an_image_is_reused_only_on_the_base_bytes_it_was_built_on() -> None:
    """A base tag such as python:3.11-slim-bookworm moves; the image records (and is checked
    against) the base image's content id, so a moved base rebuilds and every result names it."""
    from types import SimpleNamespace

    import docker.errors

    image = images.stack_image("numpy")
    held: dict[str, Any] = {}

    class Images:
        def get(self, ref: str) -> Any:
            if ref not in held:
                raise docker.errors.ImageNotFound(ref)
            return held[ref]

    engine: Any = SimpleNamespace(client=SimpleNamespace(images=Images()))
    labels = dict(image.labels(), **{images.BASE_ID_LABEL: "sha256:aaa"})
    held[image.tag] = SimpleNamespace(id="sha256:built", labels=labels)
    held["sha256:built"] = held[image.tag]
    held[image.base_image] = SimpleNamespace(id="sha256:aaa", labels={})
    assert images.existing_image_id(engine, image) == "sha256:built"
    assert images.built_on(engine, "sha256:built") == "sha256:aaa"
    held[image.base_image] = SimpleNamespace(id="sha256:bbb", labels={})  # the tag was re-pulled
    assert images.existing_image_id(engine, image) is None
    del held[image.base_image]  # not on this engine: nothing to compare with, the image stands
    assert images.existing_image_id(engine, image) == "sha256:built"
    record = images.Ensured(image, "sha256:built", False, 0.0, "sha256:aaa").record()
    assert record["base_image_id"] == "sha256:aaa" and record["lock_hash"] == image.lock_hash
