"""`harness bisect` as a session (execute/session.py): the request's plan run against several versions of
one package (execute/bisect/), and what cli/bisect.py prints: the verdicts and the exit status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.execute.bisect.locks import parse_versions
from harness.execute.bisect.render import render
from harness.execute.bisect.run import Request, plan_bisect, run_bisect
from harness.execute.bisect.verdict import exit_code
from harness.execute.session import PlanRequest, Settings, plan_record
from harness.text.escape import plain
from suites.contract.frameworks import STACKS


@dataclass(frozen=True)
class BisectOutcome:
    text: str  # the verdicts, rendered
    folder: Path
    exit_code: int


class BisectSession:
    def __init__(
        self,
        request: PlanRequest,
        settings: Settings,
        *,
        metric: str,
        stack: str,
        package: str,
        versions: str,
        framework: str | None,
        find_links: list[Path],
        no_index: bool,
    ) -> None:
        if not request.suite:
            raise HarnessError("--suite is required (see `harness list --all`)")
        if stack not in STACKS:
            raise HarnessError(f"--stack {plain(stack)!r} is not one of {', '.join(STACKS)}")
        if no_index and not find_links:
            raise HarnessError("--no-index needs --find-links DIR: without an index pip has nowhere to look")
        self.settings = settings
        self.request = Request(
            plan=request,
            metric=metric,
            stack=stack,
            package=package,
            versions=parse_versions(versions),
            results_dir=settings.results_dir,
            framework=framework,
            rounds=settings.rounds,
            find_links=[p.resolve() for p in find_links],
            no_index=no_index,
            echo=not settings.quiet,
            fork_rounds=settings.processes == "forked",
            backend=settings.backend,
            wheelhouse=settings.wheelhouse,
            budget_s=settings.budget_s,
        )
        self.plan, _ = plan_bisect(self.request)  # every check, before an environment is built

    def plan_text(self) -> str:
        """--dry-run: the plan every version runs."""
        return plan_record(self.plan)

    def run(self, argv: list[str]) -> BisectOutcome:
        outcome = run_bisect(self.request, argv=argv)
        return BisectOutcome(render(outcome), outcome.folder, exit_code(list(outcome.runs.values()), outcome.pairs))
