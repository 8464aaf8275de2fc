"""The faults themselves; standard library only so every stack behaves the same."""

from __future__ import annotations

import os
import sys
import time

from suites.contract.errors import JobError
from suites.runtime.context import Context

CHUNK = 64 * 2**20


def run(ctx: Context) -> None:
    mode = ctx.params["mode"] if ctx.params["target"] in ("all", ctx.framework) else "ok"
    if mode == "crash":
        print("fault: crashing on purpose", file=sys.stderr, flush=True)
        os.abort()
    if mode == "hang":
        print("fault: hanging on purpose", flush=True)
        while True:
            time.sleep(3600)
    if mode == "oom":
        hoard = []
        for _ in range(ctx.params["oom_cap_mb"] * 2**20 // CHUNK):
            chunk = bytearray(CHUNK)
            chunk[::4096] = b"x" * len(chunk[::4096])  # touch every page so it is really resident
            hoard.append(chunk)
        raise JobError(f"no memory limit stopped {ctx.params['oom_cap_mb']} MB of allocations; run with --memory")
    if mode == "garbage-output":
        if ctx.result_path is None:
            raise JobError("garbage-output needs the result path")
        ctx.result_path.write_bytes(b'{"schema_version": 1, "status": "ok", \x00 garbage')
        os._exit(0)
    if mode == "no-output":
        os._exit(0)
    if mode == "slow-start":
        time.sleep(ctx.params["delay_s"])
    size = ctx.params["work"]  # benchmarks/false_alarms.py plants a slowdown by editing this line in a copy
    ctx.measure("noop", lambda: sum(range(size)))
