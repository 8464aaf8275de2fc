"""`harness reproduce` as a session (execute/session.py): what a result file or run records, planned
again (execute/reproduce.py), run through the same backend table as `run`, judged, and the recorded
run compared with its reproduction as `harness compare` compares them. cli/reproduce.py prints."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.backends.base import FACTORIES, make_backend
from harness.core.errors import HarnessError
from harness.execute.reproduce import plan_reproduction
from harness.execute.runner import execute
from harness.execute.session import Settings
from harness.judge import conclusion
from harness.judge.assessment import Assessment as Assessment  # re-exported: what the renderers take
from harness.judge.assessment import assess, run_exit_code
from harness.judge.compare import Comparison
from harness.store.run_folder import Run as Run  # re-exported: the recorded run
from harness.store.run_folder import load_run
from harness.text.escape import plain


@dataclass(frozen=True)
class Reproduced:
    """What a reproduction returns for the command to print."""

    run_dir: Path
    judged: Assessment

    @property
    def exit_code(self) -> int:
        return run_exit_code(self.judged)


class ReproduceSession:
    """`ref` (a result file, or a run folder or id) planned again: on `backend` (None: where it ran),
    on `device` (None: the recorded device), with the jobs' data in `data_dir`. `settings` says where
    the new run goes and how its jobs run (quiet, limits, GPUs, transfer, wheelhouse)."""

    def __init__(
        self,
        ref: str,
        *,
        backend: str | None,
        device: str | None,
        data_dir: Path,
        settings: Settings,
    ) -> None:
        if backend is not None and backend not in FACTORIES:
            raise HarnessError(f"--backend {plain(backend)!r} is not one of {', '.join(FACTORIES)}")
        # The options are refused first, then the data folder is resolved, then the files are read:
        # the order `reproduce` has always said its refusals in.
        self.settings, self.options = settings, settings.options()
        data = str(data_dir.resolve())
        self.repro = repro = plan_reproduction(ref, settings.results_dir, backend, data, device)
        gpus = settings.gpus
        if gpus is not None and (repro.backend != "docker" or any(j.device != "gpu" for j in repro.plan.jobs)):
            raise HarnessError(f"--gpus {gpus} selects GPUs for docker jobs on --device gpu; drop --gpus")

    @property
    def warnings(self) -> list[str]:
        """What differs from the recorded run (a device, a stack, an image): text from a file."""
        return self.repro.warnings

    @property
    def old(self) -> Run:
        return self.repro.old

    def run(self, argv: list[str]) -> Reproduced:
        chosen = make_backend(self.repro.backend, replace(self.options, pinned=self.repro.pinned))
        run_dir = execute(self.repro.plan, chosen, self.settings.results_dir, argv=argv)
        return Reproduced(run_dir, assess(load_run(run_dir)))


def reproduction_comparison(old: Run, judged: Assessment) -> Comparison:
    """The recorded run against its reproduction, finished as `harness compare OLD NEW` finishes it
    (judge/conclusion.py: the noise floor of the machine included); HarnessError when the two share
    nothing to compare (e.g. the new jobs all failed)."""
    return conclusion.finish(assess(old), judged)
