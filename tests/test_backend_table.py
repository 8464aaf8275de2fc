"""One backend table for every command: `run` and `reproduce` build the same backend from the same
options, and a reproduction against a remote engine moves files by copy, not by bind mounts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.backends import base as factory
from harness.backends.base import BackendOptions, Limits, make_backend, resolve_backend
from harness.backends.docker_transfer import transfer_mode
from harness.cli import main
from harness.core.errors import HarnessError
from tests.factories import metric, result, write_run


class Built(Exception):
    """Raised by the recording factory, so nothing runs after the backend is made."""


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, BackendOptions]]:
    seen: list[tuple[str, BackendOptions]] = []

    def recorder(name: str) -> Any:
        def make(options: BackendOptions) -> Any:
            seen.append((name, options))
            raise Built

        return make

    for name in list(factory.FACTORIES):
        monkeypatch.setitem(factory.FACTORIES, name, recorder(name))
    return seen


def _call(*args: str) -> None:
    with pytest.raises(Built):
        main(list(args))


OPTIONS = ("--memory", "1g", "--cpus", "1", "--transfer", "copy", "-q")


def test_run_and_reproduce_build_the_same_backend(tmp_path: Path, built: list[tuple[str, BackendOptions]]) -> None:
    doc = result("numpy", [metric("matmul", [0.1, 0.1, 0.1])])
    doc["backend"] = "docker"
    run_dir = write_run(tmp_path / "old", [doc])
    results = str(tmp_path / "results")
    _call("run", "--suite", "xla", "--frameworks", "numpy", "--backend", "docker", "--calibrate", "never",
          "--results-dir", results, *OPTIONS)  # fmt: skip
    _call("reproduce", str(run_dir), "--results-dir", results, *OPTIONS)
    (run_name, run_options), (repro_name, repro_options) = built
    assert run_name == repro_name == "docker"
    assert run_options.limits == repro_options.limits == Limits(memory_bytes=2**30, cpus=1.0)
    assert run_options.transfer == repro_options.transfer == "copy"
    assert run_options.echo is repro_options.echo is False
    assert repro_options.pinned == {}  # nothing recorded to pin: the lock's image


def test_reproduce_against_a_remote_engine_uses_copy_transfer(
    tmp_path: Path, built: list[tuple[str, BackendOptions]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The remote engine still holds the recorded image of a lock that moved since: it is pinned."""
    import harness.store.images

    record = {"tag": "fw-harness/numpy:cpu-0123456789ab", "variant": "cpu", "lock_hash": "0123456789ab" * 5}

    @contextmanager
    def remote(timeout: float = 30, hint: str = "") -> Iterator[Any]:
        image = SimpleNamespace(tags=[record["tag"]])
        yield SimpleNamespace(client=SimpleNamespace(images=SimpleNamespace(list=lambda: [image])))

    monkeypatch.setattr(harness.store.images, "connect", remote)
    monkeypatch.setenv("DOCKER_HOST", "ssh://bench@gpu-box")
    doc = result("numpy", [metric("matmul", [0.1, 0.1, 0.1])])
    doc["backend"], doc["image"] = "docker", record
    _call("reproduce", str(write_run(tmp_path / "old", [doc])), "--results-dir", str(tmp_path / "r"))
    ((name, options),) = built
    assert name == "docker"
    assert transfer_mode(options.transfer) == "copy"  # what the docker factory gives DockerBackend
    assert options.pinned == {"numpy": record}


def test_the_docker_factory_hands_limits_transfer_and_pins_to_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.backends.docker_backend as docker_backend

    captured: dict[str, Any] = {}

    class FakeDocker:
        def __init__(self, engine: Any, **kwargs: Any) -> None:
            captured.update(kwargs, engine=engine)

    monkeypatch.setattr(docker_backend, "DockerBackend", FakeDocker)
    monkeypatch.setattr(docker_backend, "connect", lambda hint: "engine")  # the module the table names
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
    pins = {"numpy": {"tag": "fw-harness/numpy:cpu-abc"}}
    make_backend("docker", BackendOptions(limits=Limits(cpus=2.0), gpus="2", pinned=pins))
    assert captured["engine"] == "engine"
    assert captured["transfer"] == "copy"
    assert captured["limits"] == Limits(cpus=2.0)
    assert captured["pinned"] == pins
    assert captured["gpus"] is not None


def test_unknown_backends_are_one_line_errors() -> None:
    with pytest.raises(HarnessError, match="not one of local, docker"):
        make_backend("pbs", BackendOptions())
    with pytest.raises(HarnessError, match="not one of auto, local, docker"):
        resolve_backend("kubernetes", pythons={}, gpus=None, device="cpu")
    assert resolve_backend("local", pythons={}, gpus=None, device="cpu") == "local"


def test_reproduce_refuses_an_unknown_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["reproduce", str(tmp_path), "--backend", "pbs"])
    assert exit_.value.code == 2
    assert "--backend 'pbs' is not one of local, docker" in capsys.readouterr().err


def test_a_reproduction_runs_where_the_result_ran(tmp_path: Path, built: list[tuple[str, BackendOptions]]) -> None:
    from harness.execute.reproduce import recorded_backend

    assert recorded_backend({"slurm"}) == "slurm"
    assert recorded_backend({"kubernetes"}) == recorded_backend({"compose"}) == "docker"
    assert recorded_backend({"local"}) == "local"
    doc = result("numpy", [metric("matmul", [0.1, 0.1, 0.1])])
    doc["backend"] = "slurm"
    _call("reproduce", str(write_run(tmp_path / "old", [doc])), "--results-dir", str(tmp_path / "r"), "-q")
    assert [name for name, _ in built] == ["slurm"]
