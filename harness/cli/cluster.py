"""`harness export k8s|slurm` and `harness collect`: jobs out for another scheduler, a normal run folder back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import PlanOptions, ResultsDir, Variant, VariantOption, default_results_dir, plans
from harness.core.errors import HarnessError
from harness.execute import exports
from harness.execute.session import PlanRequest

export_app = typer.Typer(no_args_is_help=True, help="Write the jobs of a run for another scheduler.")


@export_app.command("k8s")
@plans(skip=("data_dir",), session=False)
def export_k8s(
    out: Annotated[Path, typer.Option("--out", help="folder for the manifests")],
    variant: VariantOption = Variant.cpu,
    registry: Annotated[Optional[str], typer.Option(help="registry prefix the images were pushed to")] = None,
    namespace: Annotated[str, typer.Option(help="Kubernetes namespace")] = "default",
    data_claim: Annotated[
        Optional[str], typer.Option("--data-claim", help="PersistentVolumeClaim holding `harness data` (read-only)")
    ] = None,
    memory: Annotated[
        Optional[str], typer.Option("--memory", help="memory request = limit per pod, e.g. 16g [default: 8g]")
    ] = None,
    cpus: Annotated[Optional[float], typer.Option("--cpus", help="CPU request = limit per pod [default: 2]")] = None,
    *,
    plan: PlanOptions,
) -> None:
    """One Kubernetes Job per framework job, the suites in a ConfigMap; apply with kubectl."""
    request = _required(plan)
    done = exports.export_k8s(
        request, out, variant=variant.value, registry=registry, namespace=namespace, data_claim=data_claim,
        memory=memory, cpus=cpus,
    )  # fmt: skip
    for path in done.paths:
        typer.echo(f"wrote {path}")
    typer.echo(f"run id: {done.run_id}")
    typer.echo(
        f"next: kubectl apply -f {out} && kubectl wait --for=condition=complete --timeout=1h job -l fw-harness/run-id"
    )
    typer.echo(f"then: harness collect {out}")


def _required(plan: PlanOptions) -> PlanRequest:
    request = plan.request()
    if not request.suite:
        raise HarnessError("--suite is required (see `harness list`)")
    return request


@export_app.command("slurm")
@plans(skip=("data_dir",), session=False)
def export_slurm(
    out: Annotated[Path, typer.Option("--out", help="a new folder for the scripts (copy it to the cluster)")],
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
    *,
    plan: PlanOptions,
) -> None:
    """One sbatch script per framework job, each on a node of its own (a data-parallel job: its ranks
    on --nodes nodes); submit with submit.sh."""
    given = exports.SlurmExport(
        runtime=runtime, envs=envs, python=python, images=images, wheelhouse=wheelhouse, find_links=tuple(find_links),
        sbatch=sbatch, gpus=gpus, data_dir=data_dir, memory=memory, cpus=cpus, nodes=nodes,
    )  # fmt: skip
    done = exports.export_slurm(_required(plan), out, given)
    for path in done.paths:
        typer.echo(f"wrote {path}")
    typer.echo(f"run id: {done.run_id}")
    if runtime == "venv":
        typer.echo(f"next: copy {out} to the cluster; on a login node run its prepare-*.sh, then bash submit.sh")
    else:
        typer.echo(f"next: copy {out} to the cluster and run bash submit.sh there")
    typer.echo(f"then: copy the folder back and run harness collect {out}")


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
    run_dir = exports.collect(manifests, results_dir or default_results_dir(), logs)
    typer.echo(f"run folder: {run_dir}")
