"""The harness's end of a fork server (suites/runtime/fork_server.py has the why and the protocol).

While a session's rounds run on the local backend, each (interpreter, framework, settings that shape
the import) gets one server: it imports the framework once, and each later job of that key is a child
it forks. `ForkedJob` stands where a `subprocess.Popen` stood (pid, wait, poll, returncode, stdout,
stderr), so the local backend waits for, times out and kills a forked job exactly as a started one.

Whatever goes wrong with a server (it cannot start, its import fails, it dies, it answers nonsense)
the job runs as a fresh process instead: the server is a speed-up, never a way to lose a job.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import Callable
from typing import IO, Any

MAX_MESSAGE = 1 << 16
MAX_CODE_FILES = 1000
_DIGEST = re.compile(r"[0-9a-f]{64}")
ANSWER_S = 30.0  # a fork takes milliseconds; a server silent this long is not one to send jobs to
CLOSE_S = 5.0


class ServerGone(Exception):
    """The server ended, or said something that is not the protocol: jobs go to fresh processes."""


def _receive(sock: socket.socket, timeout: float | None) -> dict[str, Any]:
    sock.settimeout(timeout)
    try:
        data = sock.recv(MAX_MESSAGE)
    except (TimeoutError, BlockingIOError):  # a timeout of 0 makes the socket non-blocking
        raise TimeoutError from None
    except OSError as error:
        raise ServerGone(str(error)) from None
    if not data:
        raise ServerGone("the server ended")
    try:
        message = json.loads(data)
    except ValueError:
        raise ServerGone("not a message") from None
    if not isinstance(message, dict):
        raise ServerGone("not a message")
    return message


def _int(message: dict[str, Any], field: str) -> int:
    if not isinstance(value := message.get(field), int) or isinstance(value, bool):
        raise ServerGone(f"no {field} in {str(message)[:200]}")
    return value


class ForkServer:
    """One running server and the socket to it; `fork` starts a job, `close` ends the server."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, import_s: float) -> None:
        self.proc, self.sock, self.import_s = proc, sock, import_s
        self.code: dict[str, str] = {}  # "suites/...py" -> sha256 of each file it loaded before forking

    @classmethod
    def start(
        cls,
        cmd: list[str],
        env: dict[str, str],
        cwd: str,
        preexec: Callable[[], None],
        ready_s: float | None,
    ) -> ForkServer | None:
        """`cmd` is `python -m suites serve --job FIRST`; None when no server could be made ready."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen(
                [*cmd, "--socket", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                # The server prints nothing of its own; its children get the job's pipes. An import that
                # fails here fails again, with its traceback in the job's log, in the fresh process.
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,  # not in the harness's session: the terminal's Ctrl-C is the harness's
                preexec_fn=preexec,
            )
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        server = cls(proc, ours, 0.0)
        try:
            ready = _receive(ours, ready_s)
            value = ready.get("import_s")
            if ready.get("ready") is not True or not isinstance(value, float) or not 0 <= value < 1e6:
                raise ServerGone("not ready")
            server.import_s = value
            server.code = _code(ready.get("code"))
        except (TimeoutError, ServerGone):
            server.close()
            return None
        except BaseException:  # an interrupt while it imports: it must not outlive the harness's wish
            server.close()
            raise
        return server

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, spec_path: str, root: str) -> ForkedJob:
        """A child of the server running the job at `spec_path` with the `suites` below `root`, its
        output on two fresh pipes."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            request = json.dumps({"job": spec_path, "root": root}).encode()
            socket.send_fds(self.sock, [request], [out_write, err_write])
            pid = _int(_receive(self.sock, ANSWER_S), "pid")
        except (OSError, TimeoutError, ServerGone) as error:
            for fd in (out_read, err_read):
                os.close(fd)
            raise ServerGone(str(error)) from None
        finally:
            os.close(out_write)  # the child holds them now: the pipes end when it (and what it started) ends
            os.close(err_write)
        return ForkedJob(self, pid, os.fdopen(out_read, "rb"), os.fdopen(err_read, "rb"))

    def close(self) -> None:
        """End the server (it ends when its socket does) and reap it."""
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.proc.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()


def _code(value: Any) -> dict[str, str]:
    """The server's digests of the files it loaded, checked: names are matched against another
    checkout's files (harness/backends/fork_pool.py), so a bad one ends the server's use."""
    if not isinstance(value, dict) or len(value) > MAX_CODE_FILES:
        raise ServerGone("no digests of the code it loaded")
    for name, digest in value.items():
        if not (isinstance(digest, str) and _DIGEST.fullmatch(digest) and isinstance(name, str)):
            raise ServerGone("a digest that is not a sha256")
    return dict(value)


class ForkedJob:
    """A job the server forked, with the part of `subprocess.Popen` the local backend uses."""

    def __init__(self, server: ForkServer, pid: int, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.server, self.pid, self.stdout, self.stderr = server, pid, stdout, stderr
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = _int(_receive(self.server.sock, timeout), "exit")
            except TimeoutError:
                raise subprocess.TimeoutExpired(["forked job"], timeout or 0.0) from None
            except ServerGone:
                # The child dies with its server (parent-death signal): say it was killed, and send no
                # more jobs to this server.
                self.returncode = -signal.SIGKILL
                self.server.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(timeout=0.0)
        return self.returncode
