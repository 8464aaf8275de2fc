"""Data-parallel jobs through the docker backend on a real engine: N ranks, N containers of the job's
image on an internal network made for the job, every rank's log, nothing left behind.

Two layers:
- a stand-in job (as in test_hostile_docker.py and test_results_cap_docker.py, the job's command is
  swapped for a small script; the containers, network, image, mounts and hardening are the backend's
  own): the ranks meet at rank0:29500 over the job's network and rank 0 writes what it heard into the
  shared /results; a planted `HARNESS_RANK_FAULT=crash:1` fails the job naming rank 1;
- the real job, end to end through the CLI (`harness run --suite mnist --param devices=2`), which
  needs the job side's data-parallel loop (suites/runtime/data_parallel.py).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.backends import docker_backend
from harness.backends.docker_backend import DockerBackend
from harness.core.schema import load_result
from harness.store.images import connect
from harness.store.plan import Job
from suites.contract.ranks import FAULT_VAR
from tests.conftest import finished, harness, run_folder

pytestmark = pytest.mark.integration

RUN_LABEL = "org.fw-harness.run-id"
RANK_LABEL = "org.fw-harness.rank"

# $1: the result path. Every rank says who it is; rank 0 listens at the coordinator, the others
# connect by its alias and say hello; rank 0 writes what it heard as the "result".
STAND_IN = r"""
import json, os, socket, sys, time
rank, world = int(os.environ["HARNESS_RANK"]), int(os.environ["HARNESS_WORLD_SIZE"])
host, port = os.environ["HARNESS_COORDINATOR"].rsplit(":", 1)
print(f"stand-in rank {rank} of {world}, local rank {os.environ['HARNESS_LOCAL_RANK']}", flush=True)
print(f"stand-in rank {rank} on stderr", file=sys.stderr, flush=True)
if os.environ.get("HARNESS_RANK_FAULT") == f"crash:{rank}":
    print("stand-in: crashing on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
os.listdir("/results")  # every rank mounts the job's one /results
if rank == 0:
    server = socket.create_server(("0.0.0.0", int(port)))
    server.settimeout(90)
    heard = []
    for _ in range(world - 1):
        conn, _ = server.accept()
        heard.append(conn.recv(64).decode())
    time.sleep(2)  # long enough for the test's watcher to see every rank
    with open(sys.argv[1], "w") as sink:
        json.dump({"heard": sorted(heard)}, sink)
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    conn.sendall(f"rank {rank}".encode())
    conn.close()
    time.sleep(2)
"""


class RankWatch:
    """Inspects every rank container (and the networks) of a run while it runs; they go when it ends."""

    def __init__(self, engine: Any, run_id: str | None = None) -> None:
        self.engine, self.run_id = engine, run_id
        self.containers: dict[str, dict[str, Any]] = {}
        self.networks: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        selector = RANK_LABEL if self.run_id is None else f"{RUN_LABEL}={self.run_id}"
        while not self._stop.is_set():
            try:
                for container in self.engine.containers.list(filters={"label": selector}):
                    if RANK_LABEL in container.labels and container.id not in self.containers:
                        self.containers[container.id] = self.engine.api.inspect_container(container.id)
                for network in self.engine.networks.list(filters={"label": RUN_LABEL}):
                    self.networks.setdefault(network.name, self.engine.api.inspect_network(network.id))
            except Exception:  # gone between list and inspect: the next round will do
                pass
            time.sleep(0.1)

    def __enter__(self) -> RankWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def left_behind(engine: Any, run_id: str) -> list[str]:
    selector = {"label": f"{RUN_LABEL}={run_id}"}
    return [
        *(c.name for c in engine.containers.list(all=True, filters=selector)),
        *(n.name for n in engine.networks.list(filters=selector)),
        *(v.name for v in engine.volumes.list(filters=selector)),
    ]


def assert_ranks_on_an_internal_network(watch: RankWatch, world: int) -> str:
    """Every rank ran, hardened as a single job is, on one network of the job's own, internal."""
    assert len(watch.containers) == world, list(watch.containers)
    ranks = sorted(int(c["Config"]["Labels"][RANK_LABEL]) for c in watch.containers.values())
    assert ranks == list(range(world))
    attached = {name for c in watch.containers.values() for name in c["NetworkSettings"]["Networks"]}
    assert len(attached) == 1, attached
    (network,) = attached
    assert watch.networks[network]["Internal"] is True
    assert watch.networks[network]["Labels"][RUN_LABEL]
    for container in watch.containers.values():
        host = container["HostConfig"]
        assert host["NetworkMode"] == network
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"] and host["PidsLimit"] > 0
        assert "no-new-privileges" in host["SecurityOpt"] and host["Privileged"] is False
        assert container["Config"]["User"] and not container["Config"]["User"].startswith("0:")
        mounts = {m["Destination"]: m for m in container["Mounts"]}
        assert mounts["/opt/harness/suites"]["RW"] is False and mounts["/results"]["RW"] is True
    results = {
        next(m["Name"] for m in c["Mounts"] if m["Destination"] == "/results") for c in watch.containers.values()
    }
    assert len(results) == 1  # one /results volume, shared
    rank0 = next(c for c in watch.containers.values() if c["Config"]["Labels"][RANK_LABEL] == "0")
    assert "rank0" in rank0["NetworkSettings"]["Networks"][network]["Aliases"]
    return network


def stand_in_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any, fault: str | None
) -> tuple[Any, Path, RankWatch, str]:
    original = docker_backend.DockerBackend.create_kwargs

    def swapped(self: DockerBackend, job: Job, run_id: str, *args: Any) -> dict[str, Any]:
        kwargs = original(self, job, run_id, *args)
        kwargs["command"] = ["python", "-c", STAND_IN, self.job_spec(job, run_id).result_path]
        return kwargs

    monkeypatch.setattr(docker_backend.DockerBackend, "create_kwargs", swapped)
    if fault is None:
        monkeypatch.delenv(FAULT_VAR, raising=False)
    else:
        monkeypatch.setenv(FAULT_VAR, fault)  # the harness's environment, forwarded to every rank
    run_id = f"ranks-{secrets.token_hex(4)}"
    run_dir = tmp_path / "results" / run_id
    (run_dir / "logs").mkdir(parents=True)
    job = Job(
        suite="mnist", framework="pytorch", stack="pytorch", params={"devices": 2}, repeat=1, warmup=0,
        device="cpu", threads=None, timeout_s=120.0,
    )  # fmt: skip
    with connect() as connected, RankWatch(engine, run_id) as watch:
        outcome = DockerBackend(connected, echo=False).run_job(job, run_id, run_dir)
    return outcome, run_dir, watch, run_id


def test_two_stand_in_ranks_meet_on_the_jobs_internal_network(
    cpu_images: dict[str, Any], engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, run_dir, watch, run_id = stand_in_run(tmp_path, monkeypatch, engine, None)
    assert outcome.exit_code == 0 and outcome.status is None and not outcome.timed_out, outcome
    network = assert_ranks_on_an_internal_network(watch, 2)
    # rank 1 reached rank 0 by its alias, and rank 0's file came back from the shared /results
    assert json.loads((run_dir / "pytorch.json").read_text()) == {"heard": ["rank 1"]}
    logs = run_dir / "logs"
    assert "stand-in rank 0 of 2, local rank 0" in (logs / "pytorch.stdout.log").read_text()
    assert "stand-in rank 1 of 2, local rank 1" in (logs / "pytorch.rank1.stdout.log").read_text()
    assert "stand-in rank 0 on stderr" in (logs / "pytorch.stderr.log").read_text()
    assert "stand-in rank 1 on stderr" in (logs / "pytorch.rank1.stderr.log").read_text()
    record = outcome.annotations["ranks"]
    assert record["network"] == {"name": network, "internal": True, "coordinator": "rank0:29500"}
    assert {c["id"] for c in record["containers"]} == set(watch.containers)
    assert [c["name"] for c in record["containers"]] == [
        c["Name"].lstrip("/")
        for c in sorted(watch.containers.values(), key=lambda c: c["Config"]["Labels"][RANK_LABEL])
    ]
    assert not left_behind(engine, run_id)


def test_a_planted_crash_of_rank_1_fails_the_job_naming_it_and_leaves_nothing(
    cpu_images: dict[str, Any], engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, run_dir, watch, run_id = stand_in_run(tmp_path, monkeypatch, engine, "crash:1")
    assert outcome.status == "failed" and outcome.reason is not None
    assert outcome.reason.startswith("rank 1 of 2 exited with code 3; rank 0 was stopped"), outcome.reason
    assert "stand-in: crashing on purpose" in outcome.stderr_tail
    assert "crashing on purpose" in (run_dir / "logs" / "pytorch.rank1.stderr.log").read_text()
    assert not (run_dir / "pytorch.json").exists()
    assert not left_behind(engine, run_id)


# -- the real job (needs the data-parallel loop of suites/runtime) ------------------------------------

MNIST_TWO_RANKS = ("run", "--suite", "mnist", "--frameworks", "pytorch", "--backend", "docker",
                   "--param", "devices=2", "--param", "dataset=synthetic", "--smoke")  # fmt: skip


def test_mnist_on_two_ranks_runs_as_two_containers_on_an_internal_network(
    cpu_images: dict[str, Any], engine: Any, results: Path
) -> None:
    with RankWatch(engine) as watch:
        proc = harness(*MNIST_TWO_RANKS, "--results-dir", str(results), env={FAULT_VAR: ""})
    assert finished(proc), proc.stdout[-4000:] + proc.stderr
    run = run_folder(proc.stdout)
    doc = load_result(run / "pytorch.json")
    assert doc["status"] == "ok" and doc["backend"] == "docker", doc.get("reason")
    assert doc["parallel"]["devices"] == 2
    watch.containers = {k: v for k, v in watch.containers.items() if v["Config"]["Labels"][RUN_LABEL] == run.name}
    network = assert_ranks_on_an_internal_network(watch, 2)
    assert doc["environment"]["launch"]["ranks"]["network"] == {
        "name": network,
        "internal": True,
        "coordinator": "rank0:29500",
    }
    for name in ("pytorch.stdout.log", "pytorch.stderr.log", "pytorch.rank1.stdout.log", "pytorch.rank1.stderr.log"):
        assert (run / "logs" / name).is_file(), name
    assert not left_behind(engine, run.name)


def test_mnist_with_rank_1_crashing_fails_naming_rank_1(cpu_images: dict[str, Any], engine: Any, results: Path) -> None:
    proc = harness(*MNIST_TWO_RANKS, "--results-dir", str(results), env={FAULT_VAR: "crash:1"})
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr
    run = run_folder(proc.stdout)
    doc = load_result(run / "pytorch.json")
    assert doc["status"] == "failed" and doc["reason"].startswith("rank 1 of 2 "), doc["reason"]
    assert (run / "logs" / "pytorch.rank1.stderr.log").is_file()
    assert not left_behind(engine, run.name)
