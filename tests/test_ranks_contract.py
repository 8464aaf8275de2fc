"""The data-parallel contract (suites/contract/ranks.py) and the host's supervision of ranks
(harness/backends/ranks.py): who a rank is, planted faults, the straggler rule, ending the ranks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.backends import ranks as supervision
from suites.contract import ranks


def test_a_plain_process_is_a_world_of_one() -> None:
    assert ranks.from_environment(1, {}) == ranks.Ranks(0, 1, 0, 1, None, "single")


def test_the_harness_variables_say_who_a_rank_is() -> None:
    env = ranks.rank_environment(1, 4, "10.0.0.1:29500")
    me = ranks.from_environment(4, env)
    assert (me.rank, me.world, me.local_rank, me.local_world, me.coordinator) == (1, 4, 1, 4, "10.0.0.1:29500")
    assert not me.leader and me.source == "harness"


def test_slurm_and_kubernetes_give_the_rank_their_own_way() -> None:
    slurm = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", ranks.COORDINATOR_VAR: "node1:20001"}
    me = ranks.from_environment(4, slurm)
    assert (me.rank, me.local_rank, me.local_world, me.source) == (3, 1, 1, "slurm")  # srun binds the cores
    k8s = {"JOB_COMPLETION_INDEX": "2", ranks.WORLD_VAR: "4", ranks.COORDINATOR_VAR: "job-0.svc:29500"}
    assert ranks.from_environment(4, k8s).rank == 2


@pytest.mark.parametrize(
    ("expected", "env", "words"),
    [
        (2, {}, "HARNESS_RANK is not set"),
        (2, {ranks.RANK_VAR: "0", ranks.WORLD_VAR: "3", ranks.COORDINATOR_VAR: "h:1"}, "asks for 2"),
        (2, {ranks.RANK_VAR: "2", ranks.WORLD_VAR: "2", ranks.COORDINATOR_VAR: "h:1"}, "outside 0..1"),
        (2, {ranks.RANK_VAR: "1", ranks.WORLD_VAR: "2"}, "host:port"),
        (2, {ranks.RANK_VAR: "-1", ranks.WORLD_VAR: "2", ranks.COORDINATOR_VAR: "h:1"}, "not a whole number"),
        (2, {ranks.RANK_VAR: "١", ranks.WORLD_VAR: "2", ranks.COORDINATOR_VAR: "h:1"}, "not a whole number"),
    ],
)
def test_an_environment_that_does_not_add_up_is_refused(expected: int, env: dict[str, str], words: str) -> None:
    with pytest.raises(ranks.RankError, match=words):
        ranks.from_environment(expected, env)


def test_planted_faults_parse_and_a_typo_is_an_error() -> None:
    assert ranks.fault_from("slow:1:25") == ranks.Fault("slow", 1, 25.0)
    assert ranks.fault_from("crash:0") == ranks.Fault("crash", 0)
    assert ranks.fault_from("") is None
    for bad in ("slow:1", "crash:x", "explode:1", "slow:1:-5", "slow:1:abc", "hang:1:5"):
        with pytest.raises(ranks.RankError):
            ranks.fault_from(bad)


def test_devices_decide_the_processes_and_strong_scaling_needs_an_even_split() -> None:
    assert ranks.processes({}) == 1 and ranks.processes({"devices": 0}) == 1 and ranks.processes({"devices": 4}) == 4
    assert not ranks.data_parallel({"devices": 0}) and ranks.data_parallel({"devices": 1})
    assert ranks.batch_problem({"devices": 3, "scaling": "strong", "batch_size": 32}) is not None
    assert ranks.batch_problem({"devices": 3, "scaling": "weak", "batch_size": 32}) is None
    assert ranks.batch_problem({"devices": 4, "scaling": "strong", "batch_size": 32}) is None


def test_the_straggler_rule_names_a_consistently_slow_rank_only() -> None:
    fast, slow = [0.010, 0.011, 0.010] * 2, [0.016, 0.017, 0.016] * 2
    assert ranks.straggler([fast, slow]) == {"rank": 1, "ratio": pytest.approx(1.6)}
    # One slow sample is noise, not a straggler; nor is a consistent 10 %; nor are too few samples.
    assert ranks.straggler([fast, [0.010, 0.030, 0.011] * 2]) is None
    assert ranks.straggler([[0.010] * 6, [0.011] * 6]) is None
    assert ranks.straggler([fast[:5], slow[:5]]) is None  # 5 samples: 0.8 % of A/A pairs would be "apart"
    assert ranks.straggler([[0.01] * 6]) is None


def test_the_straggler_rule_survives_an_a_a_on_noise() -> None:
    """The same code on every rank, samples with 20 % noise: never a straggler in 2,000 draws."""
    rng = random.Random(7)
    for _ in range(2000):
        world = rng.choice((2, 4, 8))
        compute = [[0.01 * rng.uniform(0.85, 1.15) for _ in range(6)] for _ in range(world)]
        assert ranks.straggler(compute) is None


class FakeRanks:
    """Processes as exit codes over time: `ends[r]` is when rank r exits by itself (None: never)."""

    def __init__(self, ends: list[tuple[float, int] | None]) -> None:
        self.ends, self.now, self.killed_at = ends, 0.0, {}  # type: ignore[var-annotated]

    def poll(self, r: int) -> int | None:
        end = self.ends[r]
        if r in self.killed_at:
            return -9
        return end[1] if end is not None and self.now >= end[0] else None

    def kill(self, r: int) -> None:
        self.killed_at[r] = self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _supervise(fake: FakeRanks, timeout: float | None, grace: float = 5.0) -> supervision.Supervised:
    polls = [lambda r=r: fake.poll(r) for r in range(len(fake.ends))]
    return supervision.supervise(polls, fake.kill, timeout, grace, clock=lambda: fake.now, sleep=fake.sleep)


def test_every_rank_exiting_cleanly_is_a_clean_job() -> None:
    done = _supervise(FakeRanks([(1.0, 0), (1.2, 0)]), timeout=60)
    assert done.exit_codes == [0, 0] and not done.failed and done.reason() is None


def test_a_crashed_rank_ends_the_others_after_the_grace_period_and_is_named() -> None:
    fake = FakeRanks([None, (2.0, 3), None])
    done = _supervise(fake, timeout=600, grace=5.0)
    assert done.first_failed == 1 and done.killed == [0, 2]
    assert all(2.0 + 5.0 <= t < 2.0 + 5.0 + 0.2 for t in fake.killed_at.values())
    assert done.reason(600) is not None and done.reason(600).startswith("rank 1 of 3 exited with code 3")  # type: ignore[union-attr]


def test_a_hang_is_ended_by_the_timeout() -> None:
    fake = FakeRanks([None, None])
    done = _supervise(fake, timeout=30)
    assert done.timed_out and done.first_failed is None and sorted(fake.killed_at) == [0, 1]
    assert "timeout of 30 s" in (done.reason(30) or "")


def test_a_rank_killed_by_a_signal_is_said_so() -> None:
    done = _supervise(FakeRanks([(1.0, -11), (1.0, 0)]), timeout=None)
    assert "killed by signal 11" in (done.reason() or "")


def test_rank_logs_sit_beside_the_job_logs() -> None:
    assert supervision.rank_log_names("flax", 0) == ("flax.stdout.log", "flax.stderr.log")
    assert supervision.rank_log_names("flax", 3) == ("flax.rank3.stdout.log", "flax.rank3.stderr.log")


def test_a_planted_fault_with_a_typo_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    from tests.conftest import harness

    proc = harness("run", "--suite", "mnist", "--smoke", "--backend", "local", "--param", "devices=2", "--dry-run",
                   "--results-dir", str(tmp_path), env={"HARNESS_RANK_FAULT": "crsh:1"})  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "HARNESS_RANK_FAULT" in proc.stderr and "Traceback" not in proc.stderr


def test_of_failures_found_in_one_poll_the_first_to_end_is_named() -> None:
    """A crash and its peer's broken connection a millisecond later: the poll finds both, the crash is named."""
    fake = FakeRanks([(2.0, 1), (2.0, 3)])
    polls = [lambda r=r: fake.poll(r) for r in range(2)]
    ended = {0: 2.001, 1: 2.0}
    done = supervision.supervise(polls, fake.kill, 60, clock=lambda: fake.now, sleep=fake.sleep, ended=ended.get)
    assert done.first_failed == 1
    assert supervision.supervise(polls, fake.kill, 60, clock=lambda: fake.now, sleep=fake.sleep).first_failed == 0


def test_compose_refuses_a_data_parallel_job_in_one_line(tmp_path: Path) -> None:
    """A compose job service is one process: a devices=2 job is refused at the plan step, nothing written."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "harness.backends.compose_steps", "--results", str(tmp_path), "plan",
         "--suite", "mnist", "--param", "devices=2", "--param", "dataset=synthetic"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--backend docker" in proc.stderr and not list(tmp_path.iterdir())
