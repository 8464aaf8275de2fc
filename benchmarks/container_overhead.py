"""What does a container cost per job? (issue: docker backend)

Per stack, runs the `xla` job (N = 64, 1 repeat: the work is negligible) through the docker
backend and measures
  overhead = (time the result file appears - time `run_job` was called) - the job's duration_s,
where duration_s is the job's own clock from before the framework import to the result write,
so the overhead is container create + start + interpreter start until the job's clock starts,
plus the write. Median of 5 per stack (target: under 1.5 s), interleaved across stacks. The
local backend's figure (a subprocess instead of a container) is shown beside it.
Also: the image sizes and the time of a `harness build` with nothing changed (median of 3).

    python benchmarks/container_overhead.py [--runs 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.backends.base import Backend  # noqa: E402
from harness.backends.docker_backend import DockerBackend  # noqa: E402
from harness.backends.local import LocalBackend  # noqa: E402
from harness.store.images import connect, image_size, stack_image  # noqa: E402
from harness.store.plan import PlanRequest, make_plan  # noqa: E402

STACKS = ("numpy", "jax", "pytorch")


def one_job(backend: Backend, framework: str, scratch: Path, index: int) -> dict[str, float]:
    plan = make_plan(
        PlanRequest(suite="xla", frameworks=framework, params=("matrix_size=64",), repeat=1, warmup=0),
        backend=backend.name,
    )
    (job,) = plan.jobs
    run_dir = scratch / f"{backend.name}-{framework}-{index}"
    run_dir.mkdir()
    called = time.time()
    started = time.perf_counter()
    outcome = backend.run_job(job, plan.run_id, run_dir)
    returned = time.perf_counter() - started
    out = run_dir / job.result_file()
    result = json.loads(out.read_text())
    assert result["status"] == "ok", result["reason"]
    to_file = out.stat().st_mtime - called
    return {
        "to_result_s": to_file,
        "job_duration_s": float(result["duration_s"]),
        "overhead_s": to_file - float(result["duration_s"]),
        "returned_s": returned,  # also waiting for the log streams and removing the container
        "exit_code": float(outcome.exit_code or 0),
    }


def rebuild_seconds(rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "harness.cli", "build", "-q"], cwd=REPO, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with connect() as engine:
        docker_backend = DockerBackend(engine, echo=False)
        local_backend = LocalBackend(echo=False)
        samples: dict[str, dict[str, list[dict[str, float]]]] = {"docker": {}, "local": {}}
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp)
            for stack in STACKS:  # builds (if any) and first-use costs stay out of the samples
                one_job(docker_backend, stack, scratch, -1)
            for index in range(args.runs):
                for stack in STACKS:
                    for name, backend in (("docker", docker_backend), ("local", local_backend)):
                        samples[name].setdefault(stack, []).append(one_job(backend, stack, scratch, index))
        sizes = {stack: image_size(engine, engine.client.images.get(stack_image(stack).tag).id) for stack in STACKS}
    rebuild = rebuild_seconds()

    def med(name: str, stack: str, key: str) -> float:
        return statistics.median(s[key] for s in samples[name][stack])

    figures: dict[str, Any] = {"runs": args.runs, "stacks": {}, "no_change_build_s": rebuild}
    print(f"per-job overhead, median of {args.runs} (run_job -> result file, minus the job's own duration_s)")
    print(f"{'stack':8} {'docker':>9} {'local':>9} {'job itself':>11} {'docker total':>13} {'image size':>11}")
    for stack in STACKS:
        row = {
            "docker_overhead_s": med("docker", stack, "overhead_s"),
            "local_overhead_s": med("local", stack, "overhead_s"),
            "job_duration_s": med("docker", stack, "job_duration_s"),
            "docker_returned_s": med("docker", stack, "returned_s"),
            "image_bytes": sizes[stack],
        }
        figures["stacks"][stack] = row
        print(
            f"{stack:8} {row['docker_overhead_s']:8.2f}s {row['local_overhead_s']:8.2f}s "
            f"{row['job_duration_s']:10.2f}s {row['docker_returned_s']:12.2f}s {sizes[stack] / 1e9:9.2f} GB"
        )
    print(f"`harness build` with nothing changed: {rebuild:.2f} s (median of 3)")
    worst = max(row["docker_overhead_s"] for row in figures["stacks"].values())
    print(f"target: overhead under 1.5 s per job: {'met' if worst < 1.5 else 'NOT met'} (worst {worst:.2f} s)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
