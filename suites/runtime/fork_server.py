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

One server may fork the jobs of two checkouts (`harness ab`'s sides, harness/backends/fork_pool.py):
so that a server's mark on its children (the pages it imported into, its heap's layout) falls on
both sides alike instead of being one side's. That is sound only if the server ran the same code
for both: it reports the digest of every `suites` file it loaded, and the harness sends it another
checkout's job only when that checkout's files are byte for byte the same. Each child, whichever
side it runs, then drops every `suites` module and imports its own checkout's from scratch (the
suite's code, the runtime that times it, the adapter): the code under test is always the child's.

Protocol, over a SOCK_SEQPACKET socket pair the harness made (one message a packet, one job at a
time; harness/backends/fork_server.py is the other end):
    server -> harness  {"ready": true, "import_s": x, "code": {"suites/...py": sha256}}  once imported
    harness -> server  {"job": "/abs/path/job.json", "root": "/abs/checkout"} + 2 descriptors
                       (the job's stdout and stderr; root: the folder holding the job's `suites`)
    server -> harness  {"pid": n}, and when that child has ended {"exit": code}
The end of the socket ends the server. Standard library only: this runs inside the stack images.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
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


def _prctl() -> Any:
    """libc's prctl, looked up before any fork (ctypes must not load libraries in a child)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode())


def serve(first: Path, fd: int, settings_for: Callable[[JobSpec, SuiteSpec], Settings]) -> int:
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
    folder = str(Path(__file__).resolve().parents[2])  # the checkout whose `suites` this is
    settings = settings_for(job, suite)
    apply_environment(settings)
    scratch = tempfile.mkdtemp(prefix="harness-serve-")
    apply_caches(settings, scratch)
    prctl = _prctl()
    try:
        import_s = _import(framework)
        _send(sock, {"ready": True, "import_s": import_s, "code": loaded_code(folder)})
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
            request = _request(data, fds)
            if request is None:
                for extra in fds:
                    os.close(extra)
                _send(sock, {"error": "a request is a job path, its root and two descriptors"})
                continue
            path, root = request
            process = {"start": "forked", "server_import_s": import_s, "forked_before": forks}
            for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
                stream.flush()
            started, told = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(started)
                _child(sock, fds, told, path, moved(base, root), key, process, prctl)  # never returns
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


def loaded_code(folder: str) -> dict[str, str]:
    """The sha256 of every file of the `suites` package (below `folder`) this process has loaded."""
    package = os.path.join(folder, "suites") + os.sep
    code = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.realpath(file).startswith(package):
            relative = os.path.relpath(os.path.realpath(file), folder).replace(os.sep, "/")
            with open(file, "rb") as handle:
                code[relative] = hashlib.sha256(handle.read()).hexdigest()
    return dict(sorted(code.items()))


def moved(base: dict[str, str], root: str) -> tuple[dict[str, str], list[str], str]:
    """The environment, sys.path and working folder a fresh job from `root` would have had. The server's
    own checkout is the first entry of its PYTHONPATH (the backend puts it there) and of sys.path
    (`python -m` puts the working folder there): both become `root`."""
    env = dict(base)
    own = base.get("PYTHONPATH", "").split(os.pathsep)
    if own[0]:
        env["PYTHONPATH"] = os.pathsep.join([root, *own[1:]])
    path = [root, *sys.path[1:]]
    if own[0] in path[1:]:
        path[path.index(own[0], 1)] = root
    return env, path, root


def _request(data: bytes, fds: list[int]) -> tuple[Path, str] | None:
    try:
        message = json.loads(data)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    path, root = message.get("job"), message.get("root")
    if not isinstance(path, str) or not isinstance(root, str) or len(fds) != 2:
        return None
    if not (os.path.isabs(path) and os.path.isabs(root)):
        return None
    return Path(path), root


def _child(
    sock: socket.socket,
    fds: list[int],
    told: int,
    path: Path,
    moved: tuple[dict[str, str], list[str], str],
    key: dict[str, Any],
    process: dict[str, Any],
    prctl: Any,
) -> None:
    """The forked job: a process of its own, its checkout's code, then the job; it ends here whatever happens."""
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
        env, sys.path[:], folder = moved
        os.environ.clear()
        os.environ.update(env)
        os.chdir(folder)
        # Every `suites` module again, from the job's own checkout: the framework stays imported, the
        # code that runs and times the job is the job's (and its paths, e.g. the registry's folder).
        for name in [name for name in sys.modules if name == "suites" or name.startswith("suites.")]:
            del sys.modules[name]
        entry = importlib.import_module("suites.__main__")
        code = entry.run_path(path, process, key)
    except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
