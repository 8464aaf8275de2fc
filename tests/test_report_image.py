"""The report image runs the harness (compose's plan and report services): its lock holds every
host dependency pyproject.toml declares, but the Docker SDK, which those services never use.

A new host dependency added to pyproject.toml and not to images/report/requirements.in only
showed up as `docker compose up` failing with ModuleNotFoundError in the plan service.
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
NOT_IN_THE_IMAGE = {"docker"}  # compose's services talk to no engine


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def locked_names(text: str) -> set[str]:
    return {_name(line) for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)}


def test_the_report_image_lock_holds_every_host_dependency() -> None:
    declared = {_name(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    locked = locked_names((ROOT / "images" / "report" / "lock.txt").read_text(encoding="utf-8"))
    missing = sorted(declared - NOT_IN_THE_IMAGE - locked)
    assert not missing, (
        f"images/report/lock.txt lacks {missing}: add them to requirements.in, run images/lock.sh report"
    )


def test_a_missing_dependency_is_found() -> None:
    assert locked_names("typer==0.29.2 \\\n    --hash=sha256:00\n    # via x\n") == {"typer"}
    assert "packaging" not in locked_names("typer==0.29.2 \\\n")
