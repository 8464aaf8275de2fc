"""`harness export k8s` and `harness collect`: Kubernetes Jobs out, a normal run folder back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.options import (
    Device,
    DeviceOption,
    ResultsDir,
    Variant,
    VariantOption,
    default_results_dir,
)
from harness.k8s import collect, export
from harness.limits import make_limits
from harness.plan import make_plan

export_app = typer.Typer(no_args_is_help=True, help="Write the jobs of a run for another scheduler.")


@export_app.command("k8s")
def export_k8s(
    suite: Annotated[str, typer.Option("--suite", "-s", help="suite name (see `harness list`)")],
    out: Annotated[Path, typer.Option("--out", help="folder for the manifests")],
    frameworks: Annotated[Optional[str], typer.Option("--frameworks", "-f", help="comma-separated")] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value")] = [],  # noqa: B006
    repeat: Annotated[Optional[int], typer.Option(help="timed steady-state calls per metric")] = None,
    warmup: Annotated[Optional[int], typer.Option(help="untimed calls after the first call")] = None,
    device: DeviceOption = Device.cpu,
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
        suite=suite,
        frameworks=frameworks,
        params=param,
        repeat=repeat,
        warmup=warmup,
        device=device.value,
        threads=None,
        baseline=baseline,
        backend="kubernetes",
        timeout_s=timeout,
        data_dir=data_claim,
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


def collect_command(
    manifests: Annotated[Path, typer.Argument(metavar="DIR", help="the folder `harness export k8s` wrote")],
    logs: Annotated[
        Optional[Path], typer.Option("--logs", help="folder of saved pod logs (<job-name>.log); default: kubectl logs")
    ] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Turn what the Kubernetes Jobs printed into a run folder for show, report and compare."""
    run_dir = collect(manifests, results_dir or default_results_dir(), logs)
    typer.echo(f"run folder: {run_dir}")
