"""`harness list`, `harness describe` and the suites `selftest` is asked for: what the suites are, read
from the registry alone, as the lines cli/catalog.py prints."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.judge.assessment import tolerance_text
from harness.store.plan import get_suite as get_suite  # re-exported: `describe` looks its suite up by this name
from harness.store.plan import visible_suites
from harness.text.escape import plain
from suites.contract.registry import broken_suites
from suites.contract.spec import CheckSpec, SuiteSpec


def _param_lines(spec: SuiteSpec) -> list[str]:
    return [f"--param {p.name}={p.default}  ({p.type}; {p.describe_range()}) {p.help}" for p in spec.params]


def _defaults_line(spec: SuiteSpec) -> str:
    return f"  defaults: repeat {spec.repeat}, warmup {spec.warmup}, timeout {spec.timeout_s:g} s"


def listing(include_hidden: bool) -> list[str]:
    """Every suite, its frameworks, parameters with defaults and what it measures; a blank line after each."""
    lines: list[str] = []
    for spec in visible_suites(include_hidden=include_hidden).values():
        lines.append(f"{spec.name}: {spec.description}")
        lines.append(f"  frameworks: {', '.join(spec.frameworks)}")
        lines += [f"  {fw}: skipped ({reason})" for fw, reason in spec.unsupported.items()]
        lines += [f"  {line}" for line in _param_lines(spec)]
        lines += [_defaults_line(spec), ""]
    # A broken folder is listed too, so that a suite someone is writing does not just vanish.
    for name, problem in broken_suites().items():
        lines += [f"{plain(name)}: BROKEN, left out of every command: {problem}", ""]
    return lines


def _check_line(check: CheckSpec) -> str:
    who = f" (reported by {', '.join(check.frameworks)})" if check.frameworks is not None else ""
    when = "" if check.required else " (only where the parameters produce it)"
    return f"{check.name}: {tolerance_text(check.as_record())}{who}{when} -- {check.help}"


def description(spec: SuiteSpec) -> list[str]:
    """Parameters (defaults, meaning), metrics, and the check values with their tolerances."""
    lines = [f"{spec.name}: {spec.description}", f"  frameworks: {', '.join(spec.frameworks)}"]
    lines += [f"  {fw}: skipped ({reason})" for fw, reason in spec.unsupported.items()]
    lines.append("parameters (--param NAME=VALUE; the value shown is the default):")
    lines += [f"  {line}" for line in _param_lines(spec) or ["none"]]
    if spec.smoke:
        lines.append("  --smoke: " + ", ".join(f"{k}={v}" for k, v in spec.smoke.items()))
    lines.append(_defaults_line(spec))
    if spec.metrics or spec.peak_shares:
        lines.append("metrics: " + (", ".join(spec.metrics) or "named by the run (they depend on the parameters)"))
    for metric, name in spec.peak_shares.items():
        lines.append(f"  {metric}: its % of peak (achieved FLOP/s over the datasheet peak) is the {name}")
    lines.append("checks (every framework reports them; a value outside its tolerance fails the agreement gate):")
    lines += [f"  {_check_line(check)}" for check in spec.checks] or ["  none"]
    return lines


def selftest_suites(suites: str | None) -> list[str] | None:
    """`selftest --suites`: the names given (None: every visible suite), each a known suite that is not
    internal, refused in one line before anything runs."""
    if suites is None:
        return None
    names = [n.strip() for n in suites.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise HarnessError(f"--suites {suites!r} has an empty or repeated name; give e.g. --suites xla,mnist")
    for name in names:  # an unknown or test-only name is one line before anything runs
        if get_suite(name).hidden:
            raise HarnessError(f"suite {name} is internal; selftest runs {', '.join(visible_suites())}")
    return names
