"""Job entry point: `python -m suites run --suite S --framework F --out FILE [...]`.

Runs one (suite, framework) job and writes exactly one result file. A failing workload
still writes its file (status failed, with the reason); the traceback goes to stderr,
which the harness keeps.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from suites.runtime import machine
from suites.runtime.context import Context
from suites.runtime.errors import JobError, Skip
from suites.runtime.files import write_json_atomic
from suites.runtime.frameworks import FRAMEWORKS
from suites.runtime.registry import all_suites, implementation_module
from suites.runtime.result import new_result, utc_now
from suites.runtime.settings import Settings, apply_environment, recorded_variables


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m suites")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one (suite, framework) job")
    run.add_argument("--suite", required=True)
    run.add_argument("--framework", required=True)
    run.add_argument("--params", default="{}", help="JSON object of suite parameters")
    run.add_argument("--repeat", type=int)
    run.add_argument("--warmup", type=int)
    run.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    run.add_argument("--threads", type=int)
    run.add_argument("--run-id", default="adhoc")
    run.add_argument("--backend", default="local")
    run.add_argument("--out", required=True, type=Path)
    run.add_argument("--data-dir", type=Path, help="read-only dataset folder")
    return parser


def _log(prefix: str, text: str) -> None:
    print(f"[{prefix}] {text}", flush=True)


def run_job(args: argparse.Namespace) -> int:
    spec = all_suites()[args.suite]
    framework = FRAMEWORKS[args.framework]
    params = spec.resolve(json.loads(args.params))
    repeat = spec.repeat if args.repeat is None else args.repeat
    warmup = spec.warmup if args.warmup is None else args.warmup
    settings = Settings(device=args.device, threads=args.threads, x64=spec.x64)
    result = new_result(
        run_id=args.run_id,
        suite=spec.name,
        framework=framework.name,
        stack=framework.stack,
        backend=args.backend,
        device=args.device,
        params=params,
        settings={"repeat": repeat, "warmup": warmup, "threads": args.threads, "x64": spec.x64},
    )
    prefix = f"{spec.name}/{framework.name}"
    started = time.perf_counter()
    apply_environment(settings)  # before the framework is imported: thread pools read it then
    env: dict[str, Any] = {"machine": machine.describe()}
    ctx: Context | None = None
    code = 0
    try:
        adapter = importlib.import_module(framework.adapter)
        env["precision"] = adapter.configure(settings)
        env.update(adapter.environment(settings))
        impl = importlib.import_module(implementation_module(spec.name, framework.name))
        ctx = Context(
            spec,
            framework.name,
            params,
            repeat=repeat,
            warmup=warmup,
            device=adapter.device(settings),
            device_kind=args.device,
            sync=adapter.sync,
            data_dir=args.data_dir,
            artifacts_dir=args.out.parent / f"{framework.name}-artifacts",
            result_path=args.out,
        )
        _log(prefix, f"start: params {json.dumps(params)}, repeat {repeat}, warmup {warmup}")
        impl.run(ctx)
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
    env["variables"] = recorded_variables()
    result["environment"] = env
    if ctx is not None:
        result["metrics"], result["checks"], result["notes"] = ctx.metrics, ctx.checks, ctx.notes
        if ctx.dataset is not None:
            result["dataset"] = ctx.dataset
        if ctx.training:
            result["training"] = ctx.training
        for metric in ctx.metrics:
            s = metric["stats"]
            _log(prefix, f"{metric['name']}: median {s['median']:.6g} {metric['unit']} (n={s['n']})")
    result["finished_at"] = utc_now()
    result["duration_s"] = time.perf_counter() - started
    write_json_atomic(args.out, result)
    _log(prefix, f"{result['status']}" + (f": {result['reason']}" if result["reason"] else ""))
    return code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return run_job(args)


if __name__ == "__main__":
    sys.exit(main())
