"""A fork server for a session's rounds: `python -m suites serve --job PATH --socket FD`.

Why: a round is a fresh process so that each round's layout, caches and thread placement vary as
they do between real runs; but a fresh JAX job spent 0.71 s of its 1.56 s importing jax (pytorch
about as much, benchmarks/round_cost.py), and the rounds a time budget buys are what finds a small
change (issue 39). So the local backend starts one server per (side, framework, settings) that
applies the environment the jobs' settings ask for, imports the framework once and then forks one
child per job. The child is the job process: its own session, its own pid, the harness's pipes as
its stdout and stderr; it runs the job exactly as `python -m suites run` would, except that the
import already happened: its `cold_path.import_s` is the server's (paid once) and
`environment.process` says it was forked, and how many jobs the server forked before it.

What the server must never do before forking: initialise a device, start a thread pool, or run a
framework operation. A child forked from a multithreaded process can deadlock (JAX installs its
fork warning only once its backend is up, jax PR 20734; PyTorch's DataLoader forks after import
the same way). It imports, and waits.

Protocol, over a SOCK_SEQPACKET socket pair the harness made (one message a packet, one job at a
time; harness/backends/fork_server.py is the other end):
    server -> harness  {"ready": true, "import_s": x}                once imported
    harness -> server  {"job": "/abs/path/job.json"} + 2 descriptors (the job's stdout, stderr)
    server -> harness  {"pid": n}, and when that child has ended {"exit": code}
The end of the socket ends the server. Standard library only: this runs inside the stack images.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from suites.contract import job_spec
from suites.contract.frameworks import Framework
from suites.contract.job_spec import JobSpec, JobSpecError
from suites.contract.settings import Settings, apply_caches, apply_environment
from suites.contract.spec import SuiteSpec

PR_SET_PDEATHSIG = 1  # linux/prctl.h
MAX_MESSAGE = 1 << 16
KEY_FIELDS = ("framework", "device", "threads", "cache", "cache_dir")  # what shapes the import


def key_of(job: JobSpec) -> dict[str, Any]:
    """What a job must share with the server that forks it: everything the environment set before the
    framework's import depends on (threads and the device: thread pools and platforms; the caches:
    JAX reads its cache folder at import)."""
    return {name: getattr(job, name) for name in KEY_FIELDS}


# Runs one job in this process and returns its exit code (suites/__main__.py's, given what the server did).
RunJob = Callable[[JobSpec, dict[str, Any]], int]


def _prctl() -> Any:
    """libc's prctl, looked up before any fork (ctypes must not load libraries in a child)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode())


def serve(first: Path, fd: int, settings_for: Callable[[JobSpec, SuiteSpec], Settings], run: RunJob) -> int:
    """Import the framework of the job `first` names under its settings, then fork every job sent on `fd`."""
    sock = socket.socket(fileno=fd)
    try:
        job = job_spec.read(first)
        suite, framework, _ = job_spec.resolve(job)
    except JobSpecError as error:
        print(f"error: {first}: {error}", file=sys.stderr, flush=True)
        return 2
    key = key_of(job)
    base = dict(os.environ)  # each child starts from it and applies its own settings, as a fresh job does
    settings = settings_for(job, suite)
    apply_environment(settings)
    scratch = tempfile.mkdtemp(prefix="harness-serve-")
    apply_caches(settings, scratch)
    prctl = _prctl()
    try:
        import_s = _import(framework)
        _send(sock, {"ready": True, "import_s": import_s})
        forks = 0
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
            except OSError:
                return 0
            if not data:  # the harness closed its end: the session is over
                for extra in fds:
                    os.close(extra)
                return 0
            path = _request(data, fds)
            if path is None:
                for extra in fds:
                    os.close(extra)
                _send(sock, {"error": "a request is a job path and two descriptors"})
                continue
            process = {"start": "forked", "server_import_s": import_s, "forked_before": forks}
            for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
                stream.flush()
            started, told = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(started)
                _child(sock, fds, told, path, base, key, process, prctl, run)  # never returns
            os.close(told)
            for extra in fds:
                os.close(extra)
            # The pid goes out once the child leads a session of its own (it closes `told` then), so a
            # kill of its group at once can never miss it.
            with os.fdopen(started, "rb") as pipe:
                pipe.read()
            _send(sock, {"pid": pid})
            _, status = os.waitpid(pid, 0)
            forks += 1
            _send(sock, {"exit": os.waitstatus_to_exitcode(status)})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _import(framework: Framework) -> float:
    """The framework's modules and its adapter: imports only, nothing that starts a device or a thread."""
    clock = time.perf_counter()
    for module in framework.modules:
        importlib.import_module(module)
    import_s = time.perf_counter() - clock
    importlib.import_module(framework.adapter)
    return import_s


def _request(data: bytes, fds: list[int]) -> Path | None:
    try:
        message = json.loads(data)
    except ValueError:
        return None
    path = message.get("job") if isinstance(message, dict) else None
    if not isinstance(path, str) or len(fds) != 2 or not os.path.isabs(path):
        return None
    return Path(path)


def _child(
    sock: socket.socket,
    fds: list[int],
    told: int,
    path: Path,
    base: dict[str, str],
    key: dict[str, Any],
    process: dict[str, Any],
    prctl: Any,
    run: RunJob,
) -> None:
    """The forked job: a process of its own, then the job; it ends here whatever happens."""
    code = 70  # EX_SOFTWARE: only if the lines below fail before the job's own code is known
    try:
        os.setsid()  # its own session and group: a timeout kills the job and what it started, not the server
        server = os.getppid()
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # dies with the server, which dies with the harness
            if os.getppid() != server:
                os._exit(1)
        os.close(told)
        sock.close()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for extra in fds:
            os.close(extra)
        os.environ.clear()
        os.environ.update(base)
        try:
            job = job_spec.read(path)
        except JobSpecError as error:
            print(f"error: {path}: {error}", file=sys.stderr, flush=True)
            code = 2
        else:
            if key_of(job) != key:  # the harness sends only matching jobs: a mismatch is its bug
                print(f"error: {path}: this fork server imported for {key}, not {key_of(job)}", file=sys.stderr)
                code = 2
            else:
                code = run(job, process)
    except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
