"""harness/core/owner.py: `harness clean` tells a live harness's containers from a dead one's."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.core import owner


def test_this_process_is_live_and_a_finished_or_reused_or_foreign_owner_is_not() -> None:
    mine = owner.label()
    assert mine and owner.is_live(mine)
    boot, pid, start = mine.split(":")
    assert pid == str(os.getpid())
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = done.stdout.strip()
    assert not owner.is_live(f"{boot}:{gone}:{start}")  # that process has exited
    assert not owner.is_live(f"{boot}:{pid}:{int(start) + 1}")  # same pid, another process (reused)
    assert not owner.is_live(f"another-boot:{pid}:{start}")  # a label from before a reboot
    for bad in ("", None, "x", "a:b:c", f"{boot}::", f"{boot}:-1:{start}"):
        assert not owner.is_live(bad)
