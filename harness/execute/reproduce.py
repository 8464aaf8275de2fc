"""`harness reproduce RESULT.json|RUN`: run exactly what a result file describes, then compare.

Suite, framework, parameters, repeat/warmup/threads, device and image come from the file.
The image is found by its recorded tag; when the tag is gone it is rebuilt from the lock with
the recorded hash, which is only possible while the checked-in lock still has that hash --
otherwise the current lock is used and the user is warned that the stacks differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from harness.backends.base import FACTORIES, make_backend
from harness.core.errors import HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import is_regular
from harness.core.schema import InvalidResult, load_result
from harness.execute.runner import execute
from harness.execute.session import Finished, Settings
from harness.judge import conclusion
from harness.judge.assessment import Assessment as Assessment  # re-exported: what the renderers take
from harness.judge.assessment import assess
from harness.judge.compare import Comparison
from harness.store.plan import Job, Plan, get_framework, get_suite, make_job, new_run_id
from harness.store.run_folder import Run as Run  # re-exported: the recorded run
from harness.store.run_folder import load_run, resolve_run
from harness.text.escape import plain
from suites.contract.spec import SpecError


@dataclass
class Reproduction:
    old: Run
    plan: Plan
    backend: str
    # stack -> recorded image record, for images the docker backend should use as they are
    pinned: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _source(ref: str, results_dir: Path) -> tuple[Run, list[Result]]:
    path = Path(ref)
    if path.is_file():
        try:
            doc = load_result(path)
        except InvalidResult as error:
            raise HarnessError(str(error)) from None
        run = load_run(path.parent) if is_regular(path.parent / "summary.json") else Run(path.parent, {}, {})
        run.results = {doc["framework"]: doc}
        run.summary = dict(run.summary or {}, suite=doc["suite"], run_id=doc["run_id"], baseline=doc["framework"])
        return run, [doc]
    run = load_run(resolve_run(ref, results_dir))
    docs = [d for d in run.results.values() if d["status"] == "ok"]
    if not docs:
        raise HarnessError(f"{ref}: no ok result to reproduce")
    return run, docs


def _job(doc: Mapping[str, Any], data_dir: str | None) -> Job:
    """The recorded job, put through the same checks as a fresh `harness run` (a file can be edited)."""
    spec = get_suite(doc["suite"])
    try:
        params = spec.resolve(doc["params"])
    except SpecError as error:
        raise HarnessError(f"the recorded parameters no longer fit suite {spec.name}: {error}") from None
    settings = doc["settings"]
    try:
        return make_job(
            spec,
            doc["framework"],
            params,
            repeat=settings.get("repeat"),
            warmup=settings.get("warmup"),
            device=doc["device"],
            threads=settings.get("threads"),
            timeout_s=None,
            data_dir=data_dir,
            precision=settings.get("precision") or "fp32",  # a tf32 run is reproduced in tf32
        )
    except HarnessError as error:
        raise HarnessError(
            f"the recorded settings of {doc['framework']} cannot be run ({error}); the result file was edited"
        ) from None


def recorded_backend(recorded: set[str]) -> str:
    """Where a reproduction runs unless told: where the jobs ran (a Slurm job on the cluster again);
    jobs that ran in the stack images elsewhere (Kubernetes, compose) run in them with docker."""
    if "slurm" in recorded:
        return "slurm"
    return "docker" if recorded & {"docker", "kubernetes", "compose"} else "local"


def plan_reproduction(
    ref: str, results_dir: Path, backend: str | None, data_dir: str | None, device: str | None = None
) -> Reproduction:
    old, docs = _source(ref, results_dir)
    moved = [d["framework"] for d in docs if device is not None and d["device"] != device]
    if moved:
        docs = [cast(Result, dict(d, device=device, image=None)) for d in docs]
    recorded = {d["backend"] for d in docs}
    chosen = backend or recorded_backend(recorded)
    jobs = tuple(_job(doc, data_dir) for doc in docs)
    suite = jobs[0].suite
    if any(job.suite != suite for job in jobs):
        raise HarnessError(f"{ref} mixes suites; reproduce one run or one result file at a time")
    baseline = old.baseline if old.baseline in {j.framework for j in jobs} else jobs[0].framework
    plan = Plan(run_id=new_run_id(suite), suite=suite, baseline=baseline, jobs=jobs, backend=chosen)
    repro = Reproduction(old=old, plan=plan, backend=chosen)
    if moved:
        repro.warnings.append(f"--device {device} differs from the recorded device of {', '.join(moved)}: a new stack")
    if chosen == "docker":
        _match_images(repro, docs)
    elif chosen == "local" and recorded & {"docker", "kubernetes", "compose", "slurm"}:
        repro.warnings.append(
            "the result came from a pinned stack; this re-run uses local interpreters (stacks differ)"
        )
    return repro


def job_stack(doc: Mapping[str, Any]) -> str:
    """The stack the registry gives the recorded framework (the file's own `stack` is not trusted)."""
    return get_framework(get_suite(doc["suite"]), doc["framework"]).stack


def _match_images(repro: Reproduction, docs: Sequence[Mapping[str, Any]]) -> None:
    from harness.store.images import connect, stack_image, variant_for

    with connect(timeout=30) as engine:
        for doc in docs:
            record = doc.get("image")
            if not record:
                repro.warnings.append(f"{doc['framework']}: the result records no image; using the current lock")
                continue
            current = stack_image(job_stack(doc), record.get("variant") or variant_for(doc["device"]))
            if current.lock_hash == record.get("lock_hash"):
                continue  # the same lock: the backend reuses the tag or rebuilds it identically
            tags = {t for image in engine.client.images.list() for t in image.tags}
            complete = all(isinstance(record.get(k), str) for k in ("tag", "variant", "lock_hash"))
            if complete and record.get("tag") in tags:
                repro.pinned[job_stack(doc)] = record
                repro.warnings.append(
                    f"{doc['framework']}: the lock changed since; reusing the recorded image {record['tag']}"
                )
            else:
                repro.warnings.append(
                    f"{doc['framework']}: recorded image {record.get('tag')} is gone and its lock "
                    f"({str(record.get('lock_hash'))[:12]}) is not the checked-in one; using {current.tag} instead"
                )


class ReproduceSession:
    """`harness reproduce` as a session (execute/session.py): `ref` (a result file, or a run folder or
    id) planned again on `backend` (None: where it ran) and `device` (None: the recorded one), with the
    jobs' data in `data_dir`; `settings` say where the new run goes and how its jobs run."""

    def __init__(
        self, ref: str, *, backend: str | None, device: str | None, data_dir: Path, settings: Settings
    ) -> None:
        if backend is not None and backend not in FACTORIES:
            raise HarnessError(f"--backend {plain(backend)!r} is not one of {', '.join(FACTORIES)}")
        # The options are refused first, then the data folder is resolved, then the files are read:
        # the order `reproduce` has always said its refusals in.
        self.settings, self.options = settings, settings.options()
        data = str(data_dir.resolve())
        self.repro = repro = plan_reproduction(ref, settings.results_dir, backend, data, device)
        self.old: Run = repro.old  # the recorded run
        self.warnings: list[str] = repro.warnings  # what differs from it (a device, an image): text from a file
        gpus = settings.gpus
        if gpus is not None and (repro.backend != "docker" or any(j.device != "gpu" for j in repro.plan.jobs)):
            raise HarnessError(f"--gpus {gpus} selects GPUs for docker jobs on --device gpu; drop --gpus")

    def run(self, argv: list[str]) -> Finished:
        chosen = make_backend(self.repro.backend, replace(self.options, pinned=self.repro.pinned))
        run_dir = execute(self.repro.plan, chosen, self.settings.results_dir, argv=argv)
        return Finished(run_dir, assess(load_run(run_dir)), None)


def reproduction_comparison(old: Run, judged: Assessment) -> Comparison:
    """The recorded run against its reproduction, finished as `harness compare OLD NEW` finishes it
    (judge/conclusion.py: the noise floor of the machine included); HarnessError when the two share
    nothing to compare (e.g. the new jobs all failed)."""
    return conclusion.finish(assess(old), judged)
