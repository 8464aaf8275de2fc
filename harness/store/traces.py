"""One profile trace of a run folder, read as hostile input.

A job writes its profiles under `<run>/<framework>-artifacts/profiles/` (suites/runtime/profiling.py):
gzipped Chrome trace-event JSON, as jax.profiler and torch.profiler export it. The name comes from
the job's own result file, the bytes from the job: a name that leaves the folder, a planted link at
any level below the run folder, a gzip bomb, a JSON nest or a million junk events must each end in
one line naming the file and the problem, never in a read outside the run, a hang or a traceback.

What is kept is what attribution reads (harness/judge/attribution.py): complete ('X') events with
finite times, their names, lanes and a few arguments as short strings, and the process and thread
names. Everything else in the file is dropped unread. A JAX profile's `ops` sidecar (what each XLA
operation runs, suites/runtime/hlo_ops.py) is read the same way.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.safe_files import UnsafeFile, kind, read_bytes
from harness.text.escape import plain
from suites.contract.profiles import FOLDER, OPS_SUFFIX, SUFFIX

# The profile folder and file names the job runtime writes (suites/contract/profiles.py; the stem is
# suites/runtime/profiling.py `slug`: letters, digits and '-', at most 60 of them plus a "-N" suffix).
_STEM = r"[a-z0-9][a-z0-9-]{0,69}"
TRACE_NAME = re.compile(rf"{re.escape(FOLDER)}/{_STEM}{re.escape(SUFFIX)}")
# Beside a JAX trace: what each XLA operation runs (suites/runtime/hlo_ops.py `sidecar`, format 1).
OPS_NAME = re.compile(rf"{re.escape(FOLDER)}/{_STEM}{re.escape(OPS_SUFFIX)}")
FRAMEWORK = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

MAX_COMPRESSED = 64 * 2**20
MAX_JSON = 512 * 2**20  # decompressed: a gzip bomb stops here, not at the end of memory
# Events in the file, counted before parsing. A real 50-step GPU profile of a large model holds a
# few hundred thousand; each kept event costs about 200 bytes of memory.
MAX_EVENTS = 2_000_000
# Any time beyond this many microseconds (about 3,000 years: Kineto counts from the Unix epoch,
# 1.8e15 today) is junk, and adding a length to it could overflow.
MAX_TIME = 1e17
MAX_NAME = 200  # characters of an event, process or thread name (kernel names can be kilobytes)
MAX_ARG = 120
# The arguments attribution reads: the XLA op and module of an op event, the step of a step
# annotation, the link between a host launch and its device kernel (Kineto's `correlation`).
KEPT_ARGS = ("hlo_op", "hlo_module", "step_num", "correlation")
_CHUNK = 1 << 20
MAX_OPS_BYTES = 16 * 2**20
MAX_MODULES = 1000
MAX_MODULE_OPS = 20_000  # suites/runtime/hlo_ops.py MAX_OPS
MAX_OPCODES = 200  # distinct opcodes one operation runs

Pid = int | str
# module -> operation (its HLO instruction name, as the trace's hlo_op) -> the opcodes it runs
Contents = Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(slots=True)
class Event:
    """One complete event: `ts` and `dur` in microseconds, as the trace gives them."""

    name: str
    cat: str
    pid: Pid
    tid: Pid
    ts: float
    dur: float
    args: tuple[tuple[str, str], ...] = ()

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def arg(self, key: str) -> str | None:
        for name, value in self.args:
            if name == key:
                return value
        return None


@dataclass(frozen=True)
class Trace:
    """The kept content of one trace file. `path`: the file, relative to the run folder."""

    path: str
    events: tuple[Event, ...]
    processes: Mapping[Pid, str] = field(default_factory=dict)  # pid -> process name
    threads: Mapping[tuple[Pid, Pid], str] = field(default_factory=dict)  # (pid, tid) -> thread name
    dropped: int = 0  # complete events refused (a time that is not a finite number, a negative length...)

    def process(self, pid: Pid) -> str:
        return self.processes.get(pid, "")

    def thread(self, pid: Pid, tid: Pid) -> str:
        return self.threads.get((pid, tid), "")


class BadTrace(HarnessError):
    """A trace file that cannot be read; the message is one line naming the file and the problem."""


def trace_path(run_dir: Path, framework: str, trace: str, pattern: re.Pattern[str] = TRACE_NAME) -> Path:
    """Where a result's `trace` (or `ops`) entry points, after checking both names; nothing is touched
    on disk."""
    if not isinstance(framework, str) or not FRAMEWORK.fullmatch(framework):
        raise BadTrace(f"{plain(run_dir)}: framework {plain(repr(framework))[:80]} is not a framework name")
    if not isinstance(trace, str) or not pattern.fullmatch(trace):
        suffix = ".trace.json.gz" if pattern is TRACE_NAME else ".ops.json"
        raise BadTrace(
            f"{plain(run_dir / f'{framework}-artifacts')}: {plain(repr(trace))[:120]} is not a profile "
            f"file name ({FOLDER}/<name>{suffix})"
        )
    return run_dir / f"{framework}-artifacts" / trace


ROUND = re.compile(r"round-[1-9][0-9]{0,5}")  # harness/execute/rounds.py: rounds/round-<n>/


def job_folder(run_dir: Path, round_name: object) -> tuple[Path, str]:
    """The folder a profile's job wrote under (the run's; for pooled rounds, the round's that the
    pooled result kept: `round`), and that folder relative to the run folder ("" or "rounds/round-4/").
    Both folders must be real ones: a link planted in place of a round is never followed."""
    if round_name is None:
        return run_dir, ""
    if not isinstance(round_name, str) or not ROUND.fullmatch(round_name):
        raise BadTrace(f"{plain(run_dir)}: round {plain(repr(round_name))[:80]} is not a round folder name")
    for folder in (run_dir / "rounds", run_dir / "rounds" / round_name):
        _real_folder(folder)
    return run_dir / "rounds" / round_name, f"rounds/{round_name}/"


def _read(run_dir: Path, framework: str, name: str, pattern: re.Pattern[str], limit: int, what: str) -> bytes:
    path = trace_path(run_dir, framework, name, pattern)
    artifacts = run_dir / f"{framework}-artifacts"
    for folder in (artifacts, artifacts / FOLDER):
        _real_folder(folder)
    try:
        return read_bytes(path, limit, single_link=True, what=what)
    except UnsafeFile as error:
        raise BadTrace(f"{plain(path)}: {error.reason}") from None


def read_trace(run_dir: Path, framework: str, trace: str) -> Trace:
    """The trace a result names, read without following a link anywhere below the run folder."""
    raw = _read(run_dir, framework, trace, TRACE_NAME, MAX_COMPRESSED, "profile trace")
    return parse_trace(raw, f"{framework}-artifacts/{trace}", where=plain(run_dir / f"{framework}-artifacts" / trace))


def read_ops(run_dir: Path, framework: str, ops: str) -> Contents:
    """What each XLA operation of a JAX profile runs (its `ops` sidecar), read like the trace."""
    raw = _read(run_dir, framework, ops, OPS_NAME, MAX_OPS_BYTES, "profile sidecar")
    return parse_ops(raw, plain(run_dir / f"{framework}-artifacts" / ops))


def parse_ops(raw: bytes, where: str) -> Contents:
    """The sidecar's modules -> operations -> opcodes, each capped; anything else in it is refused."""
    document = _load(raw, where)
    modules = document.get("modules") if isinstance(document, dict) and document.get("format") == 1 else None
    if not isinstance(modules, dict) or len(modules) > MAX_MODULES:
        raise BadTrace(f"{where}: is not an operations sidecar (format 1, at most {MAX_MODULES} modules)")
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for module, ops in modules.items():
        if not isinstance(ops, dict) or len(ops) > MAX_MODULE_OPS:
            raise BadTrace(
                f"{where}: module {plain(module)[:80]!r} is not a map of at most {MAX_MODULE_OPS} operations"
            )
        kept: dict[str, tuple[str, ...]] = {}
        for op, opcodes in ops.items():
            if not (isinstance(opcodes, list) and len(opcodes) <= MAX_OPCODES and all(type(o) is str for o in opcodes)):
                raise BadTrace(f"{where}: operation {plain(op)[:80]!r} does not list at most {MAX_OPCODES} opcodes")
            kept[op[:MAX_NAME]] = tuple(o[:MAX_NAME] for o in opcodes)
        found[module[:MAX_NAME]] = kept
    return found


def _real_folder(folder: Path) -> None:
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        raise BadTrace(f"{plain(folder)}: is missing") from None
    except OSError as error:
        raise BadTrace(f"{plain(folder)}: cannot be read ({error.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise BadTrace(f"{plain(folder)}: is a {kind(mode)}, not a folder; a profile is read only from a real folder")


def parse_trace(raw: bytes, name: str, where: str | None = None) -> Trace:
    """The kept events of gzipped trace JSON `raw` (`name`: the file, relative to the run folder)."""
    where = where or plain(name)
    if isinstance(document := _load(_gunzip(raw, where), where), dict):
        events = document.get("traceEvents")
        if not isinstance(events, list):
            raise BadTrace(f"{where}: has no traceEvents list; not a Chrome trace-event file")
    elif isinstance(document, list):
        events = document
    else:
        raise BadTrace(f"{where}: holds a JSON {type(document).__name__}, not a trace-event object or list")
    if len(events) > MAX_EVENTS:
        raise BadTrace(f"{where}: {len(events)} events is more than a profile holds (limit {MAX_EVENTS})")
    return _keep(events, name)


def _gunzip(raw: bytes, where: str) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        raise BadTrace(f"{where}: is not gzip data (a profile trace is written gzipped)")
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            while True:
                # Bounded reads: a few kilobytes that inflate to gigabytes stop at the limit.
                if not (chunk := stream.read(_CHUNK)):
                    break
                if out.tell() + len(chunk) > MAX_JSON:
                    raise BadTrace(f"{where}: inflates to more than {MAX_JSON} bytes (limit); not a profile trace")
                out.write(chunk)
    except (OSError, EOFError, zlib.error) as error:
        raise BadTrace(f"{where}: is not valid gzip data ({plain(error)[:120]})") from None
    return out.getvalue()


def _load(text: bytes, where: str) -> Any:
    # Counted before parsing: the parsed objects of a file at the size limit would not fit in memory.
    if text.count(b'"ph"') > MAX_EVENTS:
        raise BadTrace(f"{where}: holds more than {MAX_EVENTS} events (limit); not a profile of a few steps")
    try:
        return json.loads(text)
    except RecursionError:
        raise BadTrace(f"{where}: nests JSON too deeply to be a trace") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise BadTrace(f"{where}: is not JSON ({plain(error)[:120]})") from None


def _number(value: Any) -> float | None:
    """A time in microseconds, or None: a bool, a string, NaN, infinity, or beyond MAX_TIME."""
    if (kind := type(value)) is float or kind is int:
        return float(value) if -MAX_TIME < value < MAX_TIME else None  # NaN compares false
    return None


def _lane(value: Any) -> Pid | None:
    if (kind := type(value)) is int:
        return value  # type: ignore[no-any-return]
    if kind is str:
        return value[:MAX_NAME]  # type: ignore[no-any-return]
    return None


def _keep(events: list[Any], name: str) -> Trace:
    kept: list[Event] = []
    processes: dict[Pid, str] = {}
    threads: dict[tuple[Pid, Pid], str] = {}
    strings: dict[str, str] = {}  # one string per distinct name: a step repeats the same few hundred
    dropped = 0
    add, make, number, lane = kept.append, Event, _number, _lane
    for raw in events:
        if type(raw) is not dict:
            continue
        if (phase := raw.get("ph")) != "X":
            if phase == "M":
                _metadata(raw, processes, threads)
            continue
        # The common case inline (a million events pass here); anything unusual goes through _number/_lane.
        ts, dur, pid, tid = raw.get("ts"), raw.get("dur"), raw.get("pid", 0), raw.get("tid", 0)
        if not (type(ts) is float and -MAX_TIME < ts < MAX_TIME):
            ts = number(ts)
        if not (type(dur) is float and -MAX_TIME < dur < MAX_TIME):
            dur = number(dur)
        if type(pid) is not int:
            pid = lane(pid)
        if type(tid) is not int:
            tid = lane(tid)
        if type(label := raw.get("name")) is str:
            short = strings.get(label)
            label = short if short is not None else strings.setdefault(label, label[:MAX_NAME])
        else:
            label = None
        if ts is None or dur is None or dur < 0 or label is None or pid is None or tid is None:
            dropped += 1
            continue
        if type(cat := raw.get("cat")) is str:
            short = strings.get(cat)
            cat = short if short is not None else strings.setdefault(cat, cat[:MAX_NAME])
        else:
            cat = ""
        args = raw.get("args")
        add(make(label, cat, pid, tid, ts, dur, _args(args) if type(args) is dict and args else ()))
    return Trace(path=name, events=tuple(kept), processes=processes, threads=threads, dropped=dropped)


def _args(args: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    found = []
    for key in KEPT_ARGS:
        if (value := args.get(key)) is None or type(value) in (dict, list):
            continue
        text = value if type(value) is str else json.dumps(value) if isinstance(value, (int, float, bool)) else ""
        found.append((key, text[:MAX_ARG]))
    return tuple(found)


def _metadata(raw: dict[str, Any], processes: dict[Pid, str], threads: dict[tuple[Pid, Pid], str]) -> None:
    args = raw.get("args")
    label = args.get("name") if type(args) is dict else None
    pid, tid = _lane(raw.get("pid", 0)), _lane(raw.get("tid", 0))
    if type(label) is not str or pid is None or tid is None:
        return
    if raw.get("name") == "process_name":
        processes[pid] = label[:MAX_NAME]
    elif raw.get("name") == "thread_name":
        threads[(pid, tid)] = label[:MAX_NAME]
