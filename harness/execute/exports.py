"""`harness export k8s|slurm` and `harness collect`: the request's plan written out for another scheduler,
and what such jobs left turned back into a run folder. cli/cluster.py prints the lines these return."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.backends.base import make_limits
from harness.backends.k8s import collect as collect_k8s
from harness.backends.k8s import export
from harness.core.errors import HarnessError
from harness.core.safe_files import MissingFile, UnsafeFile
from harness.execute.session import PlanRequest
from harness.store.plan import make_plan
from harness.store.run_folder import read_plan_record


@dataclass(frozen=True)
class Exported:
    paths: list[Path]
    run_id: str


def export_k8s(
    request: PlanRequest,
    out: Path,
    *,
    variant: str,
    registry: str | None,
    namespace: str,
    data_claim: str | None,
    memory: str | None,
    cpus: float | None,
) -> Exported:
    """One Kubernetes Job per framework job; the dataset claim is the jobs' data folder."""
    plan = make_plan(replace(request, data_dir=data_claim), backend="kubernetes")
    paths = export(
        plan,
        out,
        variant=variant,
        registry=registry,
        namespace=namespace,
        data_claim=data_claim,
        limits=make_limits(memory, cpus),
    )
    return Exported(paths, plan.run_id)


@dataclass(frozen=True)
class SlurmExport:
    """`export slurm`'s own options, as given."""

    runtime: str
    envs: str | None
    python: str
    images: str | None
    wheelhouse: str | None
    find_links: tuple[str, ...]
    sbatch: str
    gpus: str | None
    data_dir: str | None
    memory: str | None
    cpus: float | None
    nodes: int


def export_slurm(request: PlanRequest, out: Path, given: SlurmExport) -> Exported:
    """One sbatch script per framework job (a data-parallel job: its ranks on `nodes` nodes)."""
    from harness.backends.slurm.export import export as export_scripts
    from harness.backends.slurm.settings import (
        SlurmSettings,
        check_gpus,
        check_python,
        check_runtime,
        parse_sbatch_options,
    )

    if given.gpus is not None and request.device != "gpu":
        raise HarnessError(f"--gpus {given.gpus} selects GPUs for --device gpu; add --device gpu or drop --gpus")
    if given.data_dir is not None and not given.data_dir.startswith("/"):
        raise HarnessError(f"--data-dir {given.data_dir!r} must be an absolute path on the cluster")
    settings = SlurmSettings(
        runtime=check_runtime(given.runtime, "--runtime"),
        envs=given.envs,
        python=check_python(given.python, "--python"),
        images=given.images,
        sbatch_options=parse_sbatch_options(given.sbatch, "--sbatch"),
        find_links=given.find_links,
        wheelhouse=given.wheelhouse,
        gpus=check_gpus(given.gpus),
    )
    plan = make_plan(replace(request, data_dir=given.data_dir), backend="slurm")
    paths = export_scripts(plan, out, settings, make_limits(given.memory, given.cpus), nodes=given.nodes)
    return Exported(paths, plan.run_id)


def _exported_by_slurm(folder: Path) -> bool:
    try:
        record = read_plan_record(folder)
    except (MissingFile, UnsafeFile):
        return False  # the k8s path reports the missing plan
    return isinstance(record, dict) and record.get("backend") == "slurm"


def collect(folder: Path, results_dir: Path, logs: Path | None) -> Path:
    """The run folder made from what exported Kubernetes or Slurm jobs left in `folder`."""
    if _exported_by_slurm(folder):
        from harness.backends.slurm.export import collect as collect_slurm

        if logs is not None:
            raise HarnessError("--logs is for Kubernetes exports; a Slurm export folder holds its own logs/")
        return collect_slurm(folder, results_dir)
    return collect_k8s(folder, results_dir, logs)
