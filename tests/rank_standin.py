"""A STAND-IN for the data-parallel job, for the Slurm rank tests only (tests/integration/test_slurm_ranks.py).

The real job (`python -m suites run --job job.json`, its data-parallel loop) is written elsewhere; these
tests check what the launcher owns, so each rank runs this instead, with the same arguments, in the
same place (the stack's venv, the job's folder): it reads who it is the way the real job does
(`suites.contract.ranks.from_environment`), obeys a planted HARNESS_RANK_FAULT (crash:R exits 3), and
the ranks really meet over TCP at HARNESS_COORDINATOR. Rank 0 then writes a minimal valid result whose
notes are every rank's account of itself; the other ranks write nothing.

Standard library and suites/contract only: it runs in the stack venv, as the job does.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from suites.contract.files import write_json_atomic
from suites.contract.ranks import FAULT_VAR, fault_from, from_environment, processes
from suites.contract.result import new_result, utc_now

MEET_S = 60.0
CRASH_CODE = 3


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[argv.index("--job") + 1]).read_text())
    me = from_environment(processes(spec["params"]))
    fault = fault_from(os.environ.get(FAULT_VAR))
    if fault is not None and fault.kind == "crash" and fault.rank == me.rank:
        print(f"stand-in rank {me.rank}: planted crash (RuntimeError)", flush=True)
        print(f"RuntimeError: planted crash of rank {me.rank}", file=sys.stderr, flush=True)
        return CRASH_CODE
    account = (
        f"rank {me.rank} of {me.world} local {me.local_rank} source {me.source} "
        f"coordinator {me.coordinator} host {socket.gethostname()}"
    )
    print(f"stand-in {account}", flush=True)
    assert me.coordinator is not None
    host, port = me.coordinator.rsplit(":", 1)
    if me.rank != 0:
        deadline = time.monotonic() + MEET_S
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=5) as sock:
                    sock.sendall(account.encode() + b"\n")
                    sock.recv(16)  # rank 0's "ok": it has heard this rank
                return 0
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    accounts = [account]
    with socket.create_server(("", int(port)), reuse_port=False) as server:
        server.settimeout(MEET_S)
        while len(accounts) < me.world:
            conn, _ = server.accept()
            with conn:
                accounts.append(conn.makefile().readline().strip())
                conn.sendall(b"ok")
    result = new_result(
        run_id=spec["run_id"],
        suite=spec["suite"],
        framework=spec["framework"],
        stack=spec["framework"],
        backend=spec["backend"],
        device=spec["device"],
        params=spec["params"],
        settings={},
    )
    result.update(finished_at=utc_now(), duration_s=0.0, notes=sorted(accounts))
    write_json_atomic(Path(spec["result_path"]), result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
