"""The docker backend for real: images built from the locks, one isolated container per job."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import load_result
from harness.store.images import stack_image
from tests.conftest import finished, harness, read, run_folder
from tests.integration.conftest import STACKS

pytestmark = pytest.mark.integration


def test_build_makes_three_labelled_cpu_images(engine: Any, cpu_images: dict[str, Any]) -> None:
    out = cpu_images["output"]
    for stack in STACKS:
        image = stack_image(stack)
        assert f"{stack}: {image.tag}" in out
        found = engine.images.get(image.tag)
        labels = found.labels
        assert labels["org.fw-harness.stack"] == stack and labels["org.fw-harness.variant"] == "cpu"
        assert labels["org.fw-harness.lock-hash"] == image.lock_hash
        # the exact base bytes it was built on, not only the tag (a tag moves)
        assert labels["org.fw-harness.base-image-id"] == engine.images.get(image.base_image).id
        assert found.attrs["Config"]["User"] == "10001:10001"
        # no suites baked in, no pip cache left behind, the lock's packages importable
        probe = (
            "test ! -e /opt/harness/suites && test ! -d /root/.cache/pip && test ! -d /tmp/.cache/pip"
            " && test ! -d /wheelhouse && python -c 'import numpy, threadpoolctl'"
        )
        engine.containers.run(image.tag, ["sh", "-c", probe], user="0:0", network_mode="none", remove=True)
    if "built in" in out:  # a fresh build: pip saw the wheelhouse only, never an index
        assert "Looking in links: /wheelhouse" in out and "Looking in indexes" not in out


def test_second_build_reuses_the_images(cpu_images: dict[str, Any], wheelhouse: Path, engine: Any) -> None:
    started = time.perf_counter()
    proc = harness("build", "--variant", "cpu", "--wheelhouse", str(wheelhouse))
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("up to date (lock and recipe unchanged)") == 3, proc.stdout
    assert "Step " not in proc.stdout  # the builder was never asked
    for stack in STACKS:
        assert engine.images.get(stack_image(stack).tag).id == cpu_images["ids"][stack]
    assert seconds < 15, f"a no-change build took {seconds:.1f} s"


class ContainerWatch:
    """Inspects every job container of a suite while it runs (they are removed when they end)."""

    def __init__(self, engine: Any, suite: str) -> None:
        self.engine, self.suite = engine, suite
        self.seen: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for container in self.engine.containers.list(filters={"label": f"org.fw-harness.suite={self.suite}"}):
                if container.id not in self.seen:
                    try:
                        self.seen[container.id] = self.engine.api.inspect_container(container.id)
                    except Exception:  # gone between list and inspect: the next one will do
                        continue
            time.sleep(0.1)

    def __enter__(self) -> ContainerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_xla_on_three_stacks_in_isolated_containers(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    with ContainerWatch(engine, "xla") as watch:
        proc = harness(
            "run", "--suite", "xla", "--frameworks", "numpy,jax,pytorch", "--backend", "docker",
            "--param", "matrix_size=64", "--repeat", "3", "--profile", "--profile-steps", "2",
            "--results-dir", str(results),
        )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    assert read(run / "summary.json")["backend"] == "docker"
    for stack in STACKS:
        doc = load_result(run / f"{stack}.json")
        assert doc["status"] == "ok" and doc["backend"] == "docker"
        assert doc["image"]["id"] == cpu_images["ids"][stack] and doc["image"]["tag"] == stack_image(stack).tag
        assert doc["image"]["base_image_id"] == engine.images.get(stack_image(stack).base_image).id
        assert doc["environment"]["machine"]["in_container"] is True
        assert (run / "logs" / f"{stack}.stdout.log").stat().st_size > 0
    assert "matmul GFLOP/s" in proc.stdout and "backend docker" in proc.stdout
    # --profile inside a hardened container (read-only root, no network): the traces come back with the result.
    for stack in ("jax", "pytorch"):
        profiles = load_result(run / f"{stack}.json")["profiles"]
        assert profiles and all("error" not in p for p in profiles), profiles
        for entry in profiles:
            assert (run / f"{stack}-artifacts" / entry["trace"]).is_file()
    assert "jax: profiled step" in proc.stdout and "pytorch: profiled step" in proc.stdout
    run_id = run.name
    ours = [c for c in watch.seen.values() if c["Config"]["Labels"].get("org.fw-harness.run-id") == run_id]
    assert sorted(c["Config"]["Labels"]["org.fw-harness.framework"] for c in ours) == sorted(STACKS)
    for container in ours:
        host = container["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"] and host["PidsLimit"] > 0
        user = container["Config"]["User"]
        assert user and not user.startswith("0:") and user not in ("0", "root")
        mounts = {m["Destination"]: m for m in container["Mounts"]}
        assert mounts["/opt/harness/suites"]["RW"] is False
        assert mounts["/results"]["RW"] is True
        assert not container["NetworkSettings"]["Networks"] or list(container["NetworkSettings"]["Networks"]) == [
            "none"
        ]
    assert not engine.containers.list(all=True, filters={"label": f"org.fw-harness.run-id={run_id}"})


def test_a_crashing_container_fails_alone(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    proc = harness(
        "run", "--suite", "fault", "--frameworks", "numpy,jax,pytorch", "--backend", "docker",
        "--param", "mode=crash", "--param", "target=jax", "--results-dir", str(results),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    assert load_result(run / "numpy.json")["status"] == "ok"
    assert load_result(run / "pytorch.json")["status"] == "ok"
    crashed = load_result(run / "jax.json")
    assert crashed["status"] == "failed" and crashed["backend"] == "docker"
    assert "exited with code 134" in crashed["reason"]  # SIGABRT, through the container's init
    assert "fault: crashing on purpose" in crashed["stderr_tail"]
    assert crashed["image"]["id"] == cpu_images["ids"]["jax"]
    assert not engine.containers.list(all=True, filters={"label": f"org.fw-harness.run-id={run.name}"})
