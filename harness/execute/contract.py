"""The framework contract, checked: what adding a framework must bring, in every place it must go.

A framework (suites/contract/frameworks.py) needs an adapter module fulfilling `Adapter`; its stack
needs an image folder with a Dockerfile and a lock per variant (cpu, cuda12), a service in
compose.yaml, a place in images/lock.sh's default list, an entry in the job's build probe and a
host declaration (harness/stack_facts: image checks, colours, version package) that matches it. Run by tests/test_contract.py and by
`python -m harness.execute.contract` (exit 1 with one line per missing piece) in a checkout.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import yaml

from harness.core.stack_facts import STACKS
from suites.contract.build_info import PROBES
from suites.contract.frameworks import ADAPTER_FUNCTIONS, FRAMEWORKS

REPO = Path(__file__).resolve().parents[2]
VARIANTS = ("cpu", "cuda12")


def _adapter_problems() -> list[str]:
    found = []
    for fw in FRAMEWORKS.values():
        try:
            module = importlib.import_module(fw.adapter)  # adapters import their framework lazily
        except ImportError as error:
            found.append(f"framework {fw.name}: adapter module {fw.adapter} cannot be imported ({error})")
            continue
        missing = [name for name in ADAPTER_FUNCTIONS if not callable(getattr(module, name, None))]
        if missing:
            found.append(f"framework {fw.name}: adapter {fw.adapter} lacks {', '.join(missing)}")
    return found


def _stack_problems(root: Path) -> list[str]:
    found = []
    try:
        services = (yaml.safe_load((root / "compose.yaml").read_text()) or {}).get("services") or {}
    except (OSError, yaml.YAMLError) as error:
        return [f"compose.yaml: unreadable ({error})"]
    lock_sh = (root / "images" / "lock.sh").read_text() if (root / "images" / "lock.sh").is_file() else ""
    match = re.search(r'^stacks=\$\{1:-"([^"]*)"\}', lock_sh, re.MULTILINE)
    locked = set(match.group(1).split()) if match else set()
    for stack in sorted({fw.stack for fw in FRAMEWORKS.values()}):
        folder = root / "images" / stack
        wanted = ["Dockerfile"] + [f"lock-{v}.txt" for v in VARIANTS] + [f"requirements-{v}.in" for v in VARIANTS]
        for name in wanted:
            if not (folder / name).is_file():
                found.append(f"stack {stack}: images/{stack}/{name} is missing")
        if stack not in services:
            found.append(f"stack {stack}: compose.yaml has no service {stack!r}")
        if stack not in locked:
            found.append(f"stack {stack}: images/lock.sh does not lock it by default")
    return found


def _declaration_problems() -> list[str]:
    """Each stack's host declaration (harness/stack_facts) against the registry and the job's build probe."""
    found = []
    for stack in sorted({fw.stack for fw in FRAMEWORKS.values()}):
        members = {fw.name for fw in FRAMEWORKS.values() if fw.stack == stack}
        if stack not in PROBES:
            found.append(f"stack {stack}: suites/contract/build_info.py has no entry in PROBES")
        facts = STACKS.get(stack)
        if facts is None:
            found.append(f"stack {stack}: no host declaration: add harness/core/stack_facts/stack_{stack}.py")
            continue
        for name in sorted(members - set(facts.frameworks)):
            found.append(f"framework {name}: harness/core/stack_facts/stack_{stack}.py does not declare it")
        for name in sorted(set(facts.frameworks) - members):
            found.append(f"stack {stack}: harness/core/stack_facts/stack_{stack}.py declares {name}, not in its stack")
        on_gpu = any("gpu" in fw.devices for fw in FRAMEWORKS.values() if fw.stack == stack)
        if on_gpu and facts.gpu is None:
            found.append(f"stack {stack}: its frameworks run on a GPU, but its declaration has no GPU checks")
        if not on_gpu and facts.gpu is not None:
            found.append(f"stack {stack}: its declaration has GPU checks, but none of its frameworks runs on a GPU")
    return found


def problems(root: Path = REPO) -> list[str]:
    return _adapter_problems() + _stack_problems(root) + _declaration_problems()


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
