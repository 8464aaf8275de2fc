"""`harness doctor`'s disk check: room for the images still to build and a run, not for images already built.

On a CI machine with every image built and 6 GB free, the check asked for 8 GB "for the cpu images"
and failed a machine that needed nothing more. The engine is a stand-in (its disk is a temporary
folder, its images a set); the arithmetic and the stacks' declarations are the real ones.
"""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

from harness.core.stack_facts import STACKS
from harness.execute import doctor
from harness.store.images import VARIANTS

Usage = namedtuple("Usage", "total used free")


class _Engine:
    def __init__(self, root: Path) -> None:
        self.client = type("Client", (), {"info": lambda _self: {"DockerRootDir": str(root)}})()


def _check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, built: set[str], free_gb: float, variant: str) -> Any:
    monkeypatch.setattr(doctor, "existing_image_id", lambda engine, image: "sha256:1" if image.stack in built else None)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(0, 0, free_gb * 1e9))
    return doctor._disk_check(_Engine(tmp_path), variant)  # type: ignore[arg-type]


def test_every_stack_declares_the_space_its_build_needs_on_every_variant() -> None:
    for facts in STACKS.values():
        assert set(facts.build_gb) == set(VARIANTS), facts.stack
        assert all(gb > 0 for gb in facts.build_gb.values()), facts.stack


def test_images_already_built_need_only_room_for_a_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    check = _check(monkeypatch, tmp_path, set(STACKS), free_gb=doctor.RUN_GB + 0.5, variant="cpu")
    assert check.passed, check
    assert "images built" in check.detail
    full = _check(monkeypatch, tmp_path, set(STACKS), free_gb=doctor.RUN_GB / 2, variant="cpu")
    assert not full.passed and "docker image prune" in full.fix


@pytest.mark.parametrize("variant", ["cpu", "cuda12"])
def test_each_missing_image_adds_what_its_stack_declares(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variant: str
) -> None:
    missing = "pytorch"
    need = doctor.RUN_GB + STACKS[missing].build_gb[variant]
    built = set(STACKS) - {missing}
    short = _check(monkeypatch, tmp_path, built, free_gb=need - 0.2, variant=variant)
    assert not short.passed and f"of {missing} to build" in short.detail, short
    assert f"{need:.1f} GB needed" in short.detail
    assert _check(monkeypatch, tmp_path, built, free_gb=need + 0.2, variant=variant).passed
    nothing = _check(monkeypatch, tmp_path, set(), free_gb=need + 0.2, variant=variant)
    assert not nothing.passed and all(stack in nothing.detail for stack in STACKS)


def test_a_remote_engine_disk_is_not_measured_from_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    check = _check(monkeypatch, tmp_path / "not-here", set(), free_gb=0.0, variant="cpu")
    assert check.passed and "remote engine" in check.detail
