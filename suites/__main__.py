"""Job entry point: `python -m suites run --job PATH`, PATH being the job's job.json.

Runs one (suite, framework) job as its job.json says (suites/contract/job_spec.py: the whole
spec, written by the backend into the job's folder) and writes exactly one result file. A
failing workload still writes its file (status failed, with the reason); the traceback goes to
stderr, which the harness keeps. A job.json that cannot be run is one line on stderr and exit
code 2, with no result file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from suites.contract import job_spec, machine, ranks
from suites.contract.errors import JobError, Skip
from suites.contract.files import write_json_atomic
from suites.contract.frameworks import Framework, load_adapter
from suites.contract.job_spec import JobSpec, JobSpecError
from suites.contract.registry import implementation_module
from suites.contract.result import new_result, utc_now
from suites.contract.settings import (
    Settings,
    apply_caches,
    apply_environment,
    recorded_caches,
    recorded_variables,
)
from suites.contract.spec import ParamValue, SuiteSpec
from suites.runtime import data_parallel, fork_server, nvml, rendezvous
from suites.runtime.context import Context

BAD_SPEC = 2  # exit code for a job.json this job cannot run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m suites")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one (suite, framework) job")
    run.add_argument("--job", required=True, type=Path, help=f"the job's {job_spec.JOB_FILE} (its whole spec)")
    # Rounds on the local backend: import once, fork a job per round (suites/runtime/fork_server.py).
    serve = sub.add_parser("serve", help="import a framework once, then fork each job sent on a socket")
    serve.add_argument("--job", required=True, type=Path, help="the first job's spec: its settings shape the import")
    serve.add_argument("--socket", required=True, type=int, help="the descriptor of the harness's socket")
    return parser


def _log(prefix: str, text: str) -> None:
    print(f"[{prefix}] {text}", flush=True)


def job_settings(job: JobSpec, spec: SuiteSpec) -> Settings:
    # Warm needs somewhere to keep the caches; without one the job is cold, and says so.
    cache = "warm" if job.cache == "warm" and job.cache_dir else "cold"
    return Settings(
        device=job.device,
        threads=job.threads,
        x64=spec.x64,
        cache=cache,
        cache_dir=job.cache_dir,
        precision=job.precision,
    )


def _profiler_of(adapter: Any, settings: Settings) -> Any:
    """A factory of the framework's profiler (None: the adapter has none, as NumPy's)."""
    make = getattr(adapter, "profiler", None)
    return None if make is None else (lambda: make(settings))


def _scratch(out: Path, backend: str) -> str:
    """A new folder for the job's cold caches. A local job's folder (its result's) is the harness's
    and is removed after the job whatever happened, so a job killed at its timeout leaves nothing in
    /tmp; in a container /tmp goes with the container, and a results volume must not hold caches."""
    if backend == "local":
        with contextlib.suppress(OSError):
            return tempfile.mkdtemp(prefix="cache-", dir=out.parent)
    return tempfile.mkdtemp(prefix="harness-cache-")


def run_job(
    job: JobSpec,
    spec: SuiteSpec,
    framework: Framework,
    params: dict[str, ParamValue],
    process: dict[str, Any] | None = None,
) -> int:
    """The job, in this process. `process`: how the process started, when a fork server made it
    (suites/runtime/fork_server.py): the framework is imported already, and the import it paid once is
    the cold path's."""
    repeat, warmup = job.repeat, job.warmup
    settings = job_settings(job, spec)
    try:  # a data-parallel job's rank (contract/ranks.py); a plain job is a world of one
        me = ranks.from_environment(ranks.processes(params))
    except ranks.RankError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return BAD_SPEC
    data_parallel.start(me)
    if me.world > 1:
        settings = data_parallel.take_device(me, settings)  # before any framework reads its threads or GPUs
    cache = settings.cache
    result = new_result(
        run_id=job.run_id,
        suite=spec.name,
        framework=framework.name,
        stack=framework.stack,
        backend=job.backend,
        device=job.device,
        params=params,
        settings={
            "repeat": repeat,
            "warmup": warmup,
            "threads": settings.threads,  # a data-parallel rank's: its share of the cores
            "x64": spec.x64,
            "cache": cache,
            "precision": job.precision,
            "profile": job.profile,
        },
    )
    out = Path(job.result_path)
    prefix = f"{spec.name}/{framework.name}"
    started = time.perf_counter()
    apply_environment(settings)  # before the framework is imported: thread pools read it then
    scratch = _scratch(out, job.backend)  # cold caches start here, and are removed
    apply_caches(settings, scratch)
    env: dict[str, Any] = {"machine": machine.describe(), "process": process or {"start": "fresh"}}
    # The cold path, each part on its own clock (the first call and steady state are per metric).
    cold: dict[str, float] = {}
    env["cold_path"] = cold
    ctx: Context | None = None
    code = 0
    try:
        clock = time.perf_counter()
        for module in framework.modules:
            importlib.import_module(module)
        cold["import_s"] = time.perf_counter() - clock if process is None else process["server_import_s"]
        adapter = load_adapter(framework)
        clock = time.perf_counter()
        if me.world > 1:  # the processes meet before any backend starts (jax.distributed must come first)
            rendezvous.join(framework.stack, me, job.device, job.timeout_s)
            cold["rendezvous_s"] = time.perf_counter() - clock
            clock = time.perf_counter()
        env["precision"] = adapter.configure(settings)
        adapter.initialise(settings)
        cold["device_init_s"] = time.perf_counter() - clock
        env.update(adapter.environment(settings))
        meter = None
        if job.device == "gpu":  # driver, clocks, power limit, ECC: what makes two GPU numbers comparable
            env["nvml"] = nvml.environment()
            meter = nvml.EnergyMeter if env["nvml"] is not None else None
        # Before any timing, with the suite's own settings: what the arithmetic really is.
        clock = time.perf_counter()
        env["precision"]["measured"] = adapter.precision_probe(settings)
        cold["precision_probe_s"] = time.perf_counter() - clock
        impl = importlib.import_module(implementation_module(spec.name, framework.name))
        ctx = Context(
            spec,
            framework.name,
            params,
            repeat=repeat,
            warmup=warmup,
            device=adapter.device(settings),
            device_kind=job.device,
            precision=job.precision,
            sync=adapter.sync,
            barrier=adapter.barrier_for(settings),
            # Off only to measure the barrier's own cost (benchmarks/) or to test the lints alone;
            # every metric then says `sync: unchecked`, so it cannot pass for a checked one.
            sync_check=os.environ.get("HARNESS_SYNC_CHECK", "on") != "off",
            holds_work=adapter.holds_work,
            energy_meter=meter,
            # Compilations inside a steady sample's clock mark it `compiled` (a retrace per call).
            compile_counter=getattr(adapter, "compile_counter", None),
            profiler=_profiler_of(adapter, settings),
            profile_steps=job.profile,
            data_dir=Path(job.data_dir) if job.data_dir is not None else None,
            artifacts_dir=out.parent / f"{framework.name}-artifacts",
            result_path=out,
        )
        _log(prefix, f"start: params {json.dumps(params)}, repeat {repeat}, warmup {warmup}")
        clock = time.perf_counter()
        impl.run(ctx)
        cold["workload_s"] = time.perf_counter() - clock
        # Optional: what the work itself loaded or changed (numpy: SciPy's BLAS pool, if it used it).
        after = getattr(adapter, "after_work", None)
        if after is not None:
            env["precision"].update(after(settings))
    except Skip as skip:
        result["status"], result["reason"] = "skipped", str(skip)
    except MemoryError:
        # Under a memory limit (local --memory, or an allocator refusing) the job can still say so.
        result["status"], result["reason"] = "oom", "out of memory (MemoryError inside the job)"
        code = 1
    except JobError as error:
        result["status"], result["reason"] = "failed", str(error)
        code = 1
    except Exception as error:  # the job's result must still be written
        traceback.print_exc()
        result["status"], result["reason"] = "failed", f"{type(error).__name__}: {error}"
        code = 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    env["variables"] = recorded_variables()
    env["caches"] = recorded_caches(settings)
    result["environment"] = env
    if ctx is not None:
        result["metrics"], result["checks"], result["notes"] = ctx.metrics, ctx.checks, ctx.notes
        if ctx.dataset is not None:
            result["dataset"] = ctx.dataset
        if ctx.training:
            result["training"] = ctx.training
        if ctx.profiles:
            result["profiles"] = ctx.profiles
        if ctx.parallel is not None:
            result["parallel"] = ctx.parallel
        if ctx.inference is not None:
            result["inference"] = ctx.inference
    result["finished_at"] = utc_now()
    result["duration_s"] = time.perf_counter() - started
    if not me.leader:  # rank 0 writes the job's one result; this rank's figures reached it by a collective
        _log(prefix, f"rank {me.rank}: {result['status']}" + (f": {result['reason']}" if result["reason"] else ""))
        return code
    write_json_atomic(out, result)
    _log(prefix, f"{result['status']}" + (f": {result['reason']}" if result["reason"] else ""))
    return code


def run_path(path: Path, process: dict[str, Any] | None = None, key: dict[str, Any] | None = None) -> int:
    """The job whose spec is at `path`. A fork server's child passes how it started and the key the
    server imported for: a job that does not match it (the harness's bug) is refused like a bad spec."""
    try:
        job = job_spec.read(path)
        if key is not None and fork_server.key_of(job) != key:
            raise JobSpecError(f"this fork server imported for {key}, not {fork_server.key_of(job)}")
        spec, framework, params = job_spec.resolve(job)
    except JobSpecError as error:
        print(f"error: {path}: {error}", file=sys.stderr, flush=True)
        return BAD_SPEC
    return run_job(job, spec, framework, params, process)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return fork_server.serve(args.job, args.socket, job_settings)
    return run_path(args.job)


def exit_now(code: int) -> None:
    """End the job process without the interpreter's teardown, once everything it wrote is out.

    Why: the result file is complete on disk (written and renamed) before this, and what the
    teardown does after it (module finalisers, thread pools and device handles of jax or torch)
    is nobody's measurement, yet it is paid once a job, i.e. once a round: 0.24 s for jax and
    0.48 s for torch on the 2-core CI machine (benchmarks/round_cost.py has the round's budget).
    Python's buffered streams and logging handlers are flushed first, so nothing the job printed
    is lost; the kernel releases the process's memory, files and devices as at any exit.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: the code must still reach the harness
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
