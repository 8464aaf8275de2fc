"""`harness export k8s|slurm` and `harness collect`: jobs out for another scheduler, a normal run folder back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.backends.base import make_limits
from harness.backends.k8s import collect, export
from harness.cli.options import (
    Device,
    DeviceOption,
    Precision,
    PrecisionOption,
    ResultsDir,
    Variant,
    VariantOption,
    default_results_dir,
)
from harness.core.errors import HarnessError
from harness.core.safe_files import MissingFile, UnsafeFile
from harness.store.plan import PlanRequest, make_plan
from harness.store.run_folder import read_plan_record

export_app = typer.Typer(no_args_is_help=True, help="Write the jobs of a run for another scheduler.")


@export_app.command("k8s")
def export_k8s(
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name (see `harness list`)")],
    out: Annotated[Path, typer.Option("--out", help="folder for the manifests")],
    frameworks: Annotated[Optional[str], typer.Option("--frameworks", "-f", help="comma-separated")] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value")] = [],  # noqa: B006
    repeat: Annotated[Optional[int], typer.Option(help="timed steady-state calls per metric")] = None,
    warmup: Annotated[Optional[int], typer.Option(help="untimed calls after the first call")] = None,
    device: DeviceOption = Device("cpu"),
    precision: PrecisionOption = Precision("fp32"),
    variant: VariantOption = Variant.cpu,
    registry: Annotated[Optional[str], typer.Option(help="registry prefix the images were pushed to")] = None,
    namespace: Annotated[str, typer.Option(help="Kubernetes namespace")] = "default",
    data_claim: Annotated[
        Optional[str], typer.Option("--data-claim", help="PersistentVolumeClaim holding `harness data` (read-only)")
    ] = None,
    baseline: Annotated[Optional[str], typer.Option(help="framework the ratios refer to")] = None,
    timeout: Annotated[Optional[float], typer.Option(help="per-job deadline in seconds")] = None,
    memory: Annotated[
        Optional[str], typer.Option("--memory", help="memory request = limit per pod, e.g. 16g [default: 8g]")
    ] = None,
    cpus: Annotated[Optional[float], typer.Option("--cpus", help="CPU request = limit per pod [default: 2]")] = None,
) -> None:
    """One Kubernetes Job per framework job, the suites in a ConfigMap; apply with kubectl."""
    plan = make_plan(
        PlanRequest(
            suite=suite,
            frameworks=frameworks,
            params=tuple(param),
            repeat=repeat,
            warmup=warmup,
            device=device.value,
            baseline=baseline,
            timeout_s=timeout,
            data_dir=data_claim,
            precision=precision.value,
        ),
        backend="kubernetes",
    )
    limits = make_limits(memory, cpus)
    paths = export(
        plan, out, variant=variant.value, registry=registry, namespace=namespace, data_claim=data_claim, limits=limits
    )
    for path in paths:
        typer.echo(f"wrote {path}")
    typer.echo(f"run id: {plan.run_id}")
    typer.echo(
        f"next: kubectl apply -f {out} && kubectl wait --for=condition=complete --timeout=1h job -l fw-harness/run-id"
    )
    typer.echo(f"then: harness collect {out}")


@export_app.command("slurm")
def export_slurm(
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name (see `harness list`)")],
    out: Annotated[Path, typer.Option("--out", help="a new folder for the scripts (copy it to the cluster)")],
    frameworks: Annotated[Optional[str], typer.Option("--frameworks", "-f", help="comma-separated")] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value")] = [],  # noqa: B006
    repeat: Annotated[Optional[int], typer.Option(help="timed steady-state calls per metric")] = None,
    warmup: Annotated[Optional[int], typer.Option(help="untimed calls after the first call")] = None,
    device: DeviceOption = Device("cpu"),
    precision: PrecisionOption = Precision("fp32"),
    baseline: Annotated[Optional[str], typer.Option(help="framework the ratios refer to")] = None,
    timeout: Annotated[Optional[float], typer.Option(help="per-job time limit in seconds (sbatch --time)")] = None,
    runtime: Annotated[str, typer.Option(help="venv (from the lock files), apptainer or podman")] = "venv",
    envs: Annotated[
        Optional[str], typer.Option(help="venv: shared folder on the cluster for the stack venvs [default: OUT/envs]")
    ] = None,
    python: Annotated[str, typer.Option("--python", help="venv: CPython 3.11 on the nodes")] = "python3",
    images: Annotated[
        Optional[str],
        typer.Option(help="apptainer: folder of <stack>-<variant>-<hash>.sif or docker://REGISTRY; podman: REGISTRY"),
    ] = None,
    wheelhouse: Annotated[
        Optional[str], typer.Option(help="venv: install only from this folder on the cluster, no index")
    ] = None,
    find_links: Annotated[
        list[str], typer.Option("--find-links", help="venv: extra wheel folder on the cluster; repeatable")
    ] = [],  # noqa: B006
    sbatch: Annotated[
        str, typer.Option("--sbatch", help='extra sbatch options, e.g. "--partition=gpu --account=proj"')
    ] = "",
    gpus: Annotated[Optional[str], typer.Option(help="--device gpu: a GPU count, or all [default: all]")] = None,
    data_dir: Annotated[
        Optional[str], typer.Option("--data-dir", help="absolute dataset folder on the cluster (`harness data`)")
    ] = None,
    memory: Annotated[Optional[str], typer.Option("--memory", help="sbatch --mem [default: the whole node]")] = None,
    cpus: Annotated[Optional[float], typer.Option("--cpus", help="sbatch --cpus-per-task")] = None,
    nodes: Annotated[
        int,
        typer.Option(
            "--nodes",
            min=1,
            help="data-parallel jobs (--param devices=N): nodes to spread the N ranks over, N/nodes on each",
        ),
    ] = 1,
) -> None:
    """One sbatch script per framework job, each on a node of its own (a data-parallel job: its ranks
    on --nodes nodes); submit with submit.sh."""
    from harness.backends.slurm.export import export as export_scripts
    from harness.backends.slurm.settings import (
        SlurmSettings,
        check_gpus,
        check_python,
        check_runtime,
        parse_sbatch_options,
    )

    if gpus is not None and device.value != "gpu":
        raise HarnessError(f"--gpus {gpus} selects GPUs for --device gpu; add --device gpu or drop --gpus")
    if data_dir is not None and not data_dir.startswith("/"):
        raise HarnessError(f"--data-dir {data_dir!r} must be an absolute path on the cluster")
    settings = SlurmSettings(
        runtime=check_runtime(runtime, "--runtime"),
        envs=envs,
        python=check_python(python, "--python"),
        images=images,
        sbatch_options=parse_sbatch_options(sbatch, "--sbatch"),
        find_links=tuple(find_links),
        wheelhouse=wheelhouse,
        gpus=check_gpus(gpus),
    )
    plan = make_plan(
        PlanRequest(
            suite=suite,
            frameworks=frameworks,
            params=tuple(param),
            repeat=repeat,
            warmup=warmup,
            device=device.value,
            baseline=baseline,
            timeout_s=timeout,
            data_dir=data_dir,
            precision=precision.value,
        ),
        backend="slurm",
    )
    for path in export_scripts(plan, out, settings, make_limits(memory, cpus), nodes=nodes):
        typer.echo(f"wrote {path}")
    typer.echo(f"run id: {plan.run_id}")
    if runtime == "venv":
        typer.echo(f"next: copy {out} to the cluster; on a login node run its prepare-*.sh, then bash submit.sh")
    else:
        typer.echo(f"next: copy {out} to the cluster and run bash submit.sh there")
    typer.echo(f"then: copy the folder back and run harness collect {out}")


def _exported_by_slurm(folder: Path) -> bool:
    try:
        record = read_plan_record(folder)
    except (MissingFile, UnsafeFile):
        return False  # the k8s path reports the missing plan
    return isinstance(record, dict) and record.get("backend") == "slurm"


def collect_command(
    manifests: Annotated[
        Path, typer.Argument(metavar="DIR", help="the folder `harness export k8s` or `export slurm` wrote")
    ],
    logs: Annotated[
        Optional[Path], typer.Option("--logs", help="folder of saved pod logs (<job-name>.log); default: kubectl logs")
    ] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Turn what exported Kubernetes or Slurm jobs left into a run folder for show, report and compare."""
    if _exported_by_slurm(manifests):
        from harness.backends.slurm.export import collect as collect_slurm

        if logs is not None:
            raise HarnessError("--logs is for Kubernetes exports; a Slurm export folder holds its own logs/")
        run_dir = collect_slurm(manifests, results_dir or default_results_dir())
    else:
        run_dir = collect(manifests, results_dir or default_results_dir(), logs)
    typer.echo(f"run folder: {run_dir}")
