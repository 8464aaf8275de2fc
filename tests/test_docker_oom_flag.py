"""The engine's OOMKilled flag can lag the exit it caused (cgroup v2 reports the kill through an inotify
watch on memory.events): a SIGKILLed container is read again for a while before the flag is believed.
A fake container stands in for the engine's lag, which a real one shows only by chance (CI saw it once)."""

from __future__ import annotations

import time
from typing import Any

from harness.backends.docker_objects import SIGKILL_EXIT, oom_killed


class LaggingContainer:
    """A container whose OOMKilled flag turns true on its `flag_after`-th reload."""

    def __init__(self, exit_code: int, flag_after: int | None) -> None:
        self.exit_code, self.flag_after, self.reloads = exit_code, flag_after, 0
        self.attrs: dict[str, Any] = {}

    def reload(self) -> None:
        self.reloads += 1
        flagged = self.flag_after is not None and self.reloads >= self.flag_after
        self.attrs = {"State": {"ExitCode": self.exit_code, "OOMKilled": flagged}}


def test_a_sigkilled_container_waits_for_the_flag_that_arrives_late() -> None:
    container = LaggingContainer(SIGKILL_EXIT, flag_after=4)
    assert oom_killed(container, settle_s=5.0)
    assert container.reloads == 4


def test_a_sigkill_without_an_oom_gives_up_after_the_settling_time() -> None:
    container = LaggingContainer(SIGKILL_EXIT, flag_after=None)
    start = time.monotonic()
    assert not oom_killed(container, settle_s=0.3)
    assert time.monotonic() - start >= 0.3 and container.reloads >= 2


def test_any_other_exit_is_read_once() -> None:
    for code in (0, 1, 3, 139):
        container = LaggingContainer(code, flag_after=2)
        assert not oom_killed(container, settle_s=5.0)
        assert container.reloads == 1


def test_a_flag_already_set_is_believed_whatever_the_exit_code() -> None:
    container = LaggingContainer(1, flag_after=1)
    assert oom_killed(container, settle_s=5.0) and container.reloads == 1
