"""Which harness process owns a job's container or volume, so `harness clean` never kills a live run.

Every container and volume a harness creates carries `org.fw-harness.core.owner = <boot id>:<pid>:<start
time>` (the process's start time in clock ticks since boot, from /proc: a pid alone is reused).
`clean` removes only what no live harness owns: another boot, a pid that is gone or now belongs to
another process. Where /proc or the boot id is missing, the label is empty and ownership unknown
(treated as not live, as before this label existed).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LABEL_KEY = "owner"


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None  # field 22 of stat: starttime


def label() -> str:
    """This process as an owner label ('' where it cannot be told apart from a later one)."""
    boot, start = _boot_id(), _start_time(os.getpid())
    return f"{boot}:{os.getpid()}:{start}" if boot and start else ""


# A label read back from the engine is hostile (anyone who can reach the engine can label a container):
# only `<boot id>:<pid>:<start>` of the sizes Linux uses is read. A pid is at most 2**22 (pid_max's
# ceiling); a start time is clock ticks since boot; isdigit() alone let '²' and 5,000 digits through
# to int(), which raised (Python's limit on the digits it converts).
_OWNER = re.compile(r"([0-9a-f-]{1,64}):([0-9]{1,7}):([0-9]{1,20})")
MAX_PID = 2**22


def is_live(value: object) -> bool:
    """True when the owner named by a label is a process running now on this machine; a label that is
    not one this module writes names no live process."""
    if not isinstance(value, str) or len(value) > 100:
        return False
    if (found := _OWNER.fullmatch(value)) is None:
        return False
    boot, pid, start = found.groups()
    if boot != _boot_id() or not 0 < int(pid) <= MAX_PID:
        return False
    return _start_time(int(pid)) == start
