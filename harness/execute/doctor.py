"""`harness doctor`: can this machine produce numbers we stand behind? One pass/fail line per check.

The checks run in order because each depends on the previous: no engine, no image checks;
no working GPU device request, no framework-sees-the-GPU checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.backends.docker_backend import NVIDIA_HINT, GpuRequest
from harness.core.errors import HarnessError
from harness.core.stack_facts import of_stack
from harness.core.stack_facts.facts import clean
from harness.store.image_probe import gpu_kernel_problem, probe
from harness.store.images import DEFAULT_BASE_IMAGE, LABEL, Engine, connect, existing_image_id, stack_image, variant_for
from suites.contract.frameworks import STACKS

# Free space a run needs beside its images: its containers' writable layers and the results.
RUN_GB = 1.0


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f"\n      fix: {self.fix}" if self.fix and not self.passed else ""
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.detail}{fix}"


def _engine_check() -> tuple[Check, Engine | None]:
    try:
        engine = connect(timeout=10)
    except HarnessError as error:
        host = os.environ.get("DOCKER_HOST", "the default socket")
        fix = "start Docker, or set DOCKER_HOST / `docker context use`"
        return Check("docker engine", False, f"not reachable at {host}: {error}", fix), None
    version = engine.client.version()
    where = os.environ.get("DOCKER_HOST") or "local socket"
    detail = f"Docker {version.get('Version')} ({version.get('Os')}/{version.get('Arch')}) at {where}"
    return Check("docker engine", True, detail), engine


def _compose_check() -> Check:
    fix = "install the Docker Compose v2 plugin"
    try:
        proc = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Check("compose v2", False, f"`docker compose` did not run ({error})", fix)
    if proc.returncode != 0:
        return Check("compose v2", False, "`docker compose` is missing", fix)
    return Check("compose v2", True, f"docker compose {proc.stdout.strip()}")


def _disk_check(engine: Engine, variant: str) -> Check:
    """Room for the images still to build (each stack declares what a build needs) and for a run;
    an image already built needs no more, so a full disk beside built images still passes."""
    info = engine.client.info()
    root = info.get("DockerRootDir", "/var/lib/docker")
    if not os.path.isdir(root):  # a remote engine: its disk is not ours to measure
        return Check("disk for images", True, f"{root} is on the remote engine; not measured from here")
    missing = [s for s in STACKS if existing_image_id(engine, stack_image(s, variant)) is None]
    need = RUN_GB + sum(of_stack(s).build_gb[variant] for s in missing)
    to_build = f"the {variant} images of {', '.join(missing)} to build" if missing else f"the {variant} images built"
    free = shutil.disk_usage(root).free / 1e9
    return Check(
        "disk for images",
        free >= need,
        f"{free:.1f} GB free at {root}, {need:.1f} GB needed ({to_build}, {RUN_GB:.0f} GB for runs)",
        f"free space (old harness images: docker image prune -a --filter label={LABEL}.stack) or move Docker's "
        "data-root",
    )


def _gpu_request_check(engine: Engine) -> Check:
    """A GPU device request actually works: the NVIDIA Container Toolkit is installed and sees a GPU."""
    import docker.errors

    driver = shutil.which("nvidia-smi")
    tags = [t for i in engine.client.images.list() for t in i.tags]
    image = (
        DEFAULT_BASE_IMAGE
        if DEFAULT_BASE_IMAGE in tags
        else next((t for t in tags if t.startswith("fw-harness/")), None)
    )
    if image is None:
        return Check("gpu device request", False, "no local image to test with", "harness build --variant cuda12")
    probe = engine.client.containers.create(
        image, ["true"], device_requests=[GpuRequest().device_request()], network_mode="none"
    )
    try:
        probe.start()  # the device request is honoured (or refused) here, not at create
        probe.wait(timeout=60)
    except docker.errors.APIError as error:
        reason = (error.explanation or str(error)).strip().splitlines()[0]
        host = "driver present (nvidia-smi found)" if driver else "no NVIDIA driver on this host (nvidia-smi not found)"
        return Check("gpu device request", False, f"refused: {reason}; {host}", NVIDIA_HINT)
    finally:
        probe.remove(force=True)
    return Check("gpu device request", True, "a container with --gpus all starts")


def _stack_check(engine: Engine, stack: str, device: str) -> Check:
    """The stack image's build probe (suites/contract/build_info.py): framework, and on GPUs the kernels."""
    variant = variant_for(device)
    image = stack_image(stack, variant)
    if existing_image_id(engine, image) is None:
        fix = f"harness build --stacks {stack} --variant {variant}"
        return Check(f"{stack} image", False, f"{image.tag} is not built", fix)
    kwargs: dict[str, Any] = {"device_requests": [GpuRequest().device_request()]} if device == "gpu" else {}
    try:
        seen = probe(engine, image.tag, stack, **kwargs)
    except HarnessError as error:  # a probe that cannot run is exactly what doctor reports
        return Check(f"{stack} image", False, str(error), f"rebuild the image: harness build --stacks {stack}")
    detail = f"{clean(seen['framework'])} in {image.tag}"
    if device != "gpu" or of_stack(stack).gpu is None:  # a stack with no GPU variant has nothing to see
        return Check(f"{stack} image", True, detail)
    gpus = [g for g in seen.get("gpus") or [] if isinstance(g, dict)] if isinstance(seen.get("gpus"), list) else []
    if not gpus:
        return Check(f"{stack} sees GPU", False, f"{detail} sees no GPU", NVIDIA_HINT)
    capability = clean(gpus[0].get("cc"), 10)
    detail += f" sees {len(gpus)} GPU(s): {clean(gpus[0].get('name'))} (compute capability {capability})"
    problem = gpu_kernel_problem(seen, capability)
    if problem is not None:
        fix = f"use a {stack} release built for compute capability {capability} (update the lock: images/lock.sh)"
        return Check(f"{stack} sees GPU", False, f"{detail}, but {problem}", fix)
    return Check(f"{stack} sees GPU", True, detail)


def run_checks(device: str, emit: Callable[[Check], None]) -> bool:
    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        emit(check)

    engine_check, engine = _engine_check()
    record(engine_check)
    record(_compose_check())
    if engine is None:
        return False
    with engine:
        record(_disk_check(engine, variant_for(device)))
        if device == "gpu":
            gpu = _gpu_request_check(engine)
            record(gpu)
            if not gpu.passed:
                record(Check("framework GPU checks", False, "not run: no GPU reaches a container", NVIDIA_HINT))
                return False
        for stack in STACKS:
            record(_stack_check(engine, stack, device))
    return all(c.passed for c in checks)
