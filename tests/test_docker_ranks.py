"""The docker backend's data-parallel jobs without an engine: each rank's container as created (the
single job's, with its own name, environment, GPU and the job's internal network), and, against a
fake of the Docker SDK's objects, the order of making, supervising and removing everything.

The real engine runs the same path in tests/integration/test_docker_ranks.py."""

from __future__ import annotations

import contextlib
import functools
import io
import tarfile
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from harness.backends import docker_ranks, ranks
from harness.backends.docker_backend import RESULTS_MOUNT, DockerBackend, GpuRequest, Owner
from harness.backends.docker_ranks import finished_at, first_to_fail, rank_kwargs, run_ranks
from harness.backends.ranks import Supervised
from harness.core.errors import HarnessError
from harness.store.images import Ensured, stack_image
from harness.store.plan import Job
from suites.contract.ranks import COORDINATOR_VAR, FAULT_VAR, LOCAL_RANK_VAR, RANK_VAR, WORLD_VAR

# What a rank may change of the single job's container; everything else must be the same.
RANK_KEYS = {"name", "labels", "environment", "network", "network_mode", "networking_config", "device_requests"}


class FakeReaper:
    def __init__(self, events: list[tuple[str, ...]]) -> None:
        self.events = events

    def track(self, kind: str, name: str) -> None:
        self.events.append(("track", kind, name))

    def untrack(self, kind: str, name: str) -> None:
        self.events.append(("untrack", kind, name))


class FakeContainer:
    """Answers reload() as the engine would for a container that ends with `code` after `polls` inspects."""

    def __init__(self, client: FakeClient, kwargs: dict[str, Any]) -> None:
        self.client, self.kwargs, self.name = client, kwargs, kwargs["name"]
        self.id = f"id-{self.name}"
        self.rank = int(kwargs["environment"][RANK_VAR])
        self.plan = client.plans[self.rank]
        self.attrs: dict[str, Any] = {"State": {"Status": "created"}}
        self.polls = 0

    def start(self) -> None:
        self.client.events.append(("start", self.name))
        if self.plan.get("start_error"):
            raise docker.errors.APIError("no such device")
        self.attrs["State"] = {"Status": "running", "ExitCode": 0, "FinishedAt": "0001-01-01T00:00:00Z"}

    def logs(self, stdout: bool, stderr: bool, stream: bool, follow: bool) -> Any:
        return iter([self.plan.get("out" if stdout else "err", b"")])

    def reload(self) -> None:
        self.polls += 1
        if self.plan.get("reload_error"):
            raise KeyboardInterrupt  # the harness stopped midway (Ctrl-C while supervising)
        running = self.attrs["State"]["Status"] == "running"
        if running and self.plan.get("code") is not None and self.polls >= self.plan.get("polls", 1):
            self._end(self.plan["code"], self.plan.get("finished", "2030-01-01T00:00:01.5Z"))

    def _end(self, code: int, finished: str) -> None:
        self.attrs["State"] = {"Status": "exited", "ExitCode": code, "FinishedAt": finished, "OOMKilled": False}

    def kill(self) -> None:
        self.client.events.append(("kill", self.name))
        self._end(137, "2030-01-01T00:00:09Z")

    def remove(self, force: bool = False) -> None:
        assert force
        self.client.events.append(("remove", self.name))


class FakeNetwork:
    def __init__(self, client: FakeClient, name: str) -> None:
        self.client, self.name = client, name

    def remove(self) -> None:
        attached = [e for e in self.client.events if e[0] == "create"]
        removed = [e for e in self.client.events if e[0] == "remove"]
        if len(removed) < len(attached):  # the engine refuses while an endpoint is left
            raise docker.errors.APIError("error while removing network: network has active endpoints")
        self.client.events.append(("remove-network", self.name))


class FakeClient:
    def __init__(self, plans: dict[int, dict[str, Any]], create_error_rank: int | None = None) -> None:
        self.plans = plans
        self.events: list[tuple[str, ...]] = []
        self.made: list[FakeContainer] = []
        self.network_kwargs: dict[str, Any] = {}
        self.create_error_rank = create_error_rank
        client = self

        class Containers:
            @staticmethod
            def create(**kwargs: Any) -> FakeContainer:
                if int(kwargs["environment"][RANK_VAR]) == client.create_error_rank:
                    raise docker.errors.APIError("Conflict. The container name is already in use")
                client.events.append(("create", kwargs["name"]))
                made = FakeContainer(client, kwargs)
                client.made.append(made)
                return made

        class Networks:
            @staticmethod
            def create(name: str, **kwargs: Any) -> FakeNetwork:
                client.events.append(("create-network", name))
                client.network_kwargs = {"name": name, **kwargs}
                return FakeNetwork(client, name)

        self.containers, self.networks = Containers, Networks

    @staticmethod
    def info() -> dict[str, Any]:
        return {"NCPU": 2, "MemTotal": 8 * 2**30}


class FakeEngine:
    def __init__(self, client: FakeClient) -> None:
        self.client = client


class FakeHolder:
    """The results holder: /results holds what rank 0 wrote (`result`), or nothing."""

    def __init__(self, result: bytes | None) -> None:
        self.result = result
        self.asked: list[str] = []

    def get_archive(self, path: str) -> tuple[Any, dict[str, Any]]:
        self.asked.append(path)
        name = path.rsplit("/", 1)[-1]
        if self.result is None or not name.endswith(".json"):
            raise docker.errors.NotFound(path)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(self.result)
            tar.addfile(info, io.BytesIO(self.result))
        return iter([buffer.getvalue()]), {}

    def exec_run(self, command: list[str]) -> tuple[int, bytes]:
        return 1, b""  # how full /results is: not known, nothing claimed


def job(devices: int = 2, device: str = "cpu", timeout_s: float = 60.0) -> Job:
    return Job(
        suite="mnist", framework="pytorch", stack="pytorch", params={"devices": devices, "dataset": "synthetic"},
        repeat=1, warmup=0, device=device, threads=None, timeout_s=timeout_s,
    )  # fmt: skip


def image() -> Ensured:
    return Ensured(stack_image("pytorch"), "sha256:abc", False, 0.0)


def backend(client: FakeClient | None = None, gpus: GpuRequest | None = None) -> DockerBackend:
    made = DockerBackend(FakeEngine(client or FakeClient({})), echo=False, gpus=gpus)  # type: ignore[arg-type]
    return made


def single(b: DockerBackend, j: Job, tmp_path: Path) -> dict[str, Any]:
    return b.create_kwargs(j, "run-1", tmp_path, image())


# -- each rank's container ------------------------------------------------------------------------


def test_every_rank_is_the_single_jobs_container_on_the_jobs_network(tmp_path: Path) -> None:
    b = backend()
    one = single(b, job(3), tmp_path)
    made = [rank_kwargs(one, r, 3, "net-1", gpu=False, environ={}) for r in range(3)]
    for r, kwargs in enumerate(made):
        assert kwargs["name"] == f"{one['name']}-rank{r}"
        assert "network_mode" not in kwargs and kwargs["network"] == "net-1"
        assert kwargs["networking_config"]["net-1"]["Aliases"] == [f"rank{r}"]
        # the hardening, limits, command, image and mounts (the one /results volume) are the single job's
        for key in set(one) - RANK_KEYS:
            assert kwargs[key] == one[key], key
        assert {m["Target"] for m in kwargs["mounts"]} >= {RESULTS_MOUNT}
        assert kwargs["read_only"] is True and kwargs["cap_drop"] == ["ALL"] and kwargs["init"] is True
        assert kwargs["labels"] == {**one["labels"], "org.fw-harness.rank": str(r)}
        env = kwargs["environment"]
        assert {k: env[k] for k in one["environment"]} == one["environment"]
        assert (env[RANK_VAR], env[WORLD_VAR], env[LOCAL_RANK_VAR]) == (str(r), "3", str(r))
        assert env[COORDINATOR_VAR] == "rank0:29500"
        assert FAULT_VAR not in env
    assert len({k["name"] for k in made}) == 3
    assert one["network_mode"] == "none"  # the single job's kwargs are left as they were


def test_the_planted_fault_is_forwarded_to_every_rank_only_when_set() -> None:
    one = backend().create_kwargs(job(), "run-1", Path("/tmp/w"), image())
    for r in range(2):
        assert (
            rank_kwargs(one, r, 2, "n", gpu=False, environ={FAULT_VAR: "crash:1"})["environment"][FAULT_VAR]
            == "crash:1"
        )
        assert FAULT_VAR not in rank_kwargs(one, r, 2, "n", gpu=False, environ={FAULT_VAR: ""})["environment"]


@pytest.mark.parametrize(
    ("gpus", "expected"), [(None, ["0", "1"]), ("all", ["0", "1"]), ("2", ["0", "1"]), ("device=3,5", ["3", "5"])]
)
def test_each_gpu_rank_gets_a_device_of_its_own(tmp_path: Path, gpus: str | None, expected: list[str]) -> None:
    request = GpuRequest.parse(gpus) if gpus else None
    b = backend(gpus=request)
    one = single(b, job(2, device="gpu"), tmp_path)
    for r in range(2):
        kwargs = rank_kwargs(one, r, 2, "n", gpu=True, gpus=request, environ={})
        (device,) = kwargs["device_requests"]
        assert device["DeviceIDs"] == [expected[r]] and device["Driver"] == "nvidia"
        assert kwargs["environment"][LOCAL_RANK_VAR] == "0"  # its one GPU is its device 0


@pytest.mark.parametrize(("gpus", "words"), [("1", "--gpus 1 gives 1"), ("device=0", "--gpus names 1")])
def test_too_few_gpus_for_the_ranks_is_one_line_naming_the_fix(tmp_path: Path, gpus: str, words: str) -> None:
    request = GpuRequest.parse(gpus)
    one = single(backend(gpus=request), job(2, device="gpu"), tmp_path)
    with pytest.raises(HarnessError, match=words) as caught:
        rank_kwargs(one, 1, 2, "n", gpu=True, gpus=request, environ={})
    assert "\n" not in str(caught.value) and "devices=2" in str(caught.value)


# -- who failed first -------------------------------------------------------------------------------


class Stopped:
    def __init__(self, finished: str | None) -> None:
        self.attrs = {"State": {"Status": "exited", "FinishedAt": finished}}


def test_finished_at_reads_the_engines_trimmed_nanoseconds() -> None:
    later, earlier = (
        finished_at(Stopped("2030-01-01T00:00:01.5Z")),
        finished_at(Stopped("2030-01-01T00:00:01.000000007Z")),
    )
    assert later == ("2030-01-01T00:00:01", 500_000_000) and earlier == ("2030-01-01T00:00:01", 7)
    assert later > earlier  # type: ignore[operator]
    for unknown in (None, "0001-01-01T00:00:00Z", "yesterday", "2030-01-01T00:00:01.5+02:00"):
        assert finished_at(Stopped(unknown)) is None


def test_the_rank_that_ended_first_is_named_not_the_first_polled() -> None:
    # rank 1 crashed; rank 0's collective broke 30 ms later; one poll saw both, rank 0 first
    seen = Supervised([1, 3], first_failed=0, timed_out=False, killed=[])
    stopped = [Stopped("2030-01-01T00:00:01.04Z"), Stopped("2030-01-01T00:00:01.01Z")]
    assert first_to_fail(seen, stopped) == 1
    # a time the engine did not give: the poll order stands
    assert first_to_fail(seen, [Stopped(None), Stopped("2030-01-01T00:00:01.01Z")]) == 0
    # a killed rank (None) and a clean one (0) never count as the failure
    assert first_to_fail(Supervised([None, 0, 2], 2, False, [0]), [Stopped("2030-01-01T00:00:00Z")] * 3) == 2


# -- the whole path against a fake engine -------------------------------------------------------------


def run_dir(tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "results" / "run-1"
    (run / "logs").mkdir(parents=True)
    (run / ".jobs" / "pytorch-abcd").mkdir(parents=True)
    return run / "logs", run / ".jobs" / "pytorch-abcd"


def ranks_run(
    tmp_path: Path,
    plans: dict[int, dict[str, Any]],
    *,
    j: Job | None = None,
    result: bytes | None = None,
    create_error_rank: int | None = None,
) -> tuple[Any, FakeClient, list[tuple[str, ...]], dict[str, Any]]:
    client = FakeClient(plans, create_error_rank)
    b = backend(client)
    events: list[tuple[str, ...]] = []
    b.reaper = FakeReaper(events)  # type: ignore[assignment]
    logs, work = run_dir(tmp_path)
    annotations: dict[str, Any] = {}
    outcome = run_ranks(
        b, j or job(len(plans)), "run-1", logs, work, image(), None, FakeHolder(result), annotations,
        time.perf_counter(), Owner("run-1"),
    )  # fmt: skip
    return outcome, client, events, annotations


def assert_all_removed(client: FakeClient, reaper_events: list[tuple[str, ...]]) -> None:
    made = [e[1] for e in client.events if e[0] == "create"]
    removed = [e[1] for e in client.events if e[0] == "remove"]
    assert sorted(made) == sorted(removed) and made
    net_made = [e[1] for e in client.events if e[0] == "create-network"]
    assert [e[1] for e in client.events if e[0] == "remove-network"] == net_made == [client.network_kwargs["name"]]
    order = [e[0] for e in client.events]
    assert order.index("create-network") < order.index("create")  # made before the containers attach
    assert max(i for i, e in enumerate(order) if e == "remove") < order.index("remove-network")
    tracked = [(e[1], e[2]) for e in reaper_events if e[0] == "track"]
    untracked = [(e[1], e[2]) for e in reaper_events if e[0] == "untrack"]
    assert sorted(tracked) == sorted(untracked) and ("network", net_made[0]) in tracked
    # the reaper hears of each object before it is made
    assert reaper_events.index(("track", "network", net_made[0])) == 0


def test_two_ranks_that_succeed_are_supervised_logged_and_removed(tmp_path: Path) -> None:
    plans = {0: {"code": 0, "polls": 3, "out": b"rank zero says hi\n", "err": b"zero err\n"},
             1: {"code": 0, "polls": 1, "out": b"rank one\n", "err": b"one err\n"}}  # fmt: skip
    outcome, client, events, annotations = ranks_run(tmp_path, plans, result=b'{"suite": "mnist"}')
    assert outcome.exit_code == 0 and outcome.status is None and not outcome.timed_out and not outcome.oom
    net = client.network_kwargs
    assert net["internal"] is True and net["driver"] == "bridge"
    assert net["labels"]["org.fw-harness.run-id"] == "run-1" and net["labels"]["org.fw-harness.framework"] == "pytorch"
    assert net["labels"] == {k: v for k, v in client.made[0].kwargs["labels"].items() if k != "org.fw-harness.rank"}
    assert [c.kwargs["network"] for c in client.made] == [net["name"]] * 2
    assert [e for e in client.events if e[0] == "start"] == [("start", c.name) for c in client.made]
    assert not [e for e in client.events if e[0] == "kill"]
    logs = tmp_path / "results" / "run-1" / "logs"
    assert (logs / "pytorch.stdout.log").read_bytes() == b"rank zero says hi\n"
    assert (logs / "pytorch.stderr.log").read_bytes() == b"zero err\n"
    assert (logs / "pytorch.rank1.stdout.log").read_bytes() == b"rank one\n"
    assert (logs / "pytorch.rank1.stderr.log").read_bytes() == b"one err\n"
    assert outcome.stdout_log == logs / "pytorch.stdout.log"
    # the result came back from the shared /results, as the single job's does
    assert (tmp_path / "results/run-1/.jobs/pytorch-abcd/pytorch.json").read_bytes() == b'{"suite": "mnist"}'
    record = annotations["ranks"]
    assert record["network"] == {"name": net["name"], "internal": True, "coordinator": "rank0:29500"}
    assert record["containers"] == [{"rank": r, "name": c.name, "id": c.id} for r, c in enumerate(client.made)]
    assert record["exit_codes"] == [0, 0] and record["world"] == 2
    assert (
        annotations["container"]["network_mode"] == net["name"] and annotations["container"]["id"] == client.made[0].id
    )
    assert_all_removed(client, events)


def test_a_crashed_rank_fails_the_job_naming_it_even_when_rank_0_is_polled_first(tmp_path: Path) -> None:
    plans = {0: {"code": 1, "polls": 2, "finished": "2030-01-01T00:00:02.2Z", "err": b"gloo: connection closed\n"},
             1: {"code": 3, "polls": 2, "finished": "2030-01-01T00:00:02.1Z", "err": b"planted crash\n"}}  # fmt: skip
    outcome, client, events, annotations = ranks_run(tmp_path, plans)
    assert outcome.status == "failed" and outcome.reason is not None
    assert outcome.reason.startswith("rank 1 of 2 exited with code 3"), outcome.reason
    assert outcome.stderr_tail == "planted crash"  # the failed rank's, not rank 0's
    assert annotations["ranks"]["exit_codes"] == [1, 3]
    assert_all_removed(client, events)


def test_a_rank_left_running_after_a_failure_is_killed_at_the_grace_periods_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docker_ranks, "supervise", functools.partial(ranks.supervise, grace_s=0.0))
    plans = {0: {"code": None}, 1: {"code": 3, "polls": 1}}
    outcome, client, events, _ = ranks_run(tmp_path, plans)
    assert ("kill", client.made[0].name) in client.events and ("kill", client.made[1].name) not in client.events
    assert outcome.status == "failed" and outcome.reason is not None
    assert outcome.reason.startswith("rank 1 of 2 exited with code 3; rank 0 was stopped"), outcome.reason
    assert outcome.exit_code is None
    assert_all_removed(client, events)


def test_ranks_past_the_timeout_are_killed_and_the_job_timed_out(tmp_path: Path) -> None:
    outcome, client, events, _ = ranks_run(tmp_path, {0: {"code": None}, 1: {"code": None}}, j=job(2, timeout_s=0.3))
    assert outcome.timed_out is True and outcome.status is None  # the runner says "killed after 0.3 s", as for one
    assert {e[1] for e in client.events if e[0] == "kill"} == {c.name for c in client.made}
    assert_all_removed(client, events)


def test_a_rank_that_cannot_start_is_named_and_nothing_is_left(tmp_path: Path) -> None:
    outcome, client, events, _ = ranks_run(tmp_path, {0: {"code": 0}, 1: {"start_error": True}})
    assert outcome.exit_code is None and outcome.status is None
    assert "rank 1 of 2: container did not start: no such device" in outcome.stderr_tail
    assert_all_removed(client, events)


def test_the_harness_stopping_midway_leaves_nothing_behind(tmp_path: Path) -> None:
    client = FakeClient({0: {"code": None}, 1: {"reload_error": True}})
    b = backend(client)
    events: list[tuple[str, ...]] = []
    b.reaper = FakeReaper(events)  # type: ignore[assignment]
    logs, work = run_dir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_ranks(
            b, job(2), "run-1", logs, work, image(), None, FakeHolder(None), {}, time.perf_counter(), Owner("run-1")
        )
    assert_all_removed(client, events)


def test_a_refused_container_removes_the_network_and_the_ranks_made_before(tmp_path: Path) -> None:
    client = FakeClient({0: {"code": 0}, 1: {"code": 0}, 2: {"code": 0}}, create_error_rank=2)
    b = backend(client)
    events: list[tuple[str, ...]] = []
    b.reaper = FakeReaper(events)  # type: ignore[assignment]
    logs, work = run_dir(tmp_path)
    with pytest.raises(docker.errors.APIError):
        run_ranks(
            b, job(3), "run-1", logs, work, image(), None, FakeHolder(None), {}, time.perf_counter(), Owner("run-1")
        )
    assert len(client.made) == 2
    assert_all_removed(client, events)


def test_too_few_gpus_is_a_job_that_never_started_and_nothing_is_made(tmp_path: Path) -> None:
    client = FakeClient({0: {}, 1: {}})
    b = DockerBackend(FakeEngine(client), echo=False, gpus=GpuRequest.parse("1"))  # type: ignore[arg-type]
    logs, work = run_dir(tmp_path)
    outcome = run_ranks(b, job(2, device="gpu"), "run-1", logs, work, image(), None, FakeHolder(None), {},
                        time.perf_counter(), Owner("run-1"))  # fmt: skip
    assert outcome.exit_code is None and "use --gpus 2 (or all), or lower devices" in outcome.stderr_tail
    assert client.events == []


# -- which path a job takes -------------------------------------------------------------------------


@pytest.mark.parametrize(("devices", "path"), [(0, "single"), (1, "single"), (2, "ranks"), (4, "ranks")])
def test_only_a_job_of_two_or_more_processes_runs_as_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, devices: int, path: str
) -> None:
    b = backend()
    taken: list[str] = []
    monkeypatch.setattr(b, "image_for", lambda *a, **k: image())
    monkeypatch.setattr(b, "_results", lambda *a, **k: contextlib.nullcontext(FakeHolder(None)))
    monkeypatch.setattr(b, "_run_container", lambda *a, **k: taken.append("single"))
    monkeypatch.setattr(docker_ranks, "run_ranks", lambda *a, **k: taken.append("ranks"))
    logs, work = run_dir(tmp_path)
    b._run_job(job(devices), "run-1", logs, work, Owner("run-1"))
    assert taken == [path]
