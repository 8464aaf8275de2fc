"""`harness build` and `harness wheelhouse`: the pinned stack images, and the wheels that build them
offline. The store prints each build's progress as it goes (cli/stacks.py only parses)."""

from __future__ import annotations

from pathlib import Path

from harness.store.images import DEFAULT_BASE_IMAGE as DEFAULT_BASE_IMAGE  # re-exported: --base-image's default
from harness.store.images import build_images, fill_images_wheelhouse, parse_stacks


def build(
    stacks: str | None, variant: str, base_image: str, wheelhouse: Path | None, *, echo: bool, verify: bool
) -> None:
    """Build (or reuse) the images of `stacks` (None: every stack); `verify`: then probe what each was
    built for (CUDA, cuDNN, GPU kernels)."""
    done = build_images(parse_stacks(stacks), variant, base_image, wheelhouse, echo=echo)
    if verify:
        from harness.store.image_probe import verify_images  # loaded for --verify alone

        verify_images(done)


def fill_wheelhouse(folder: Path, stacks: str | None, variant: str, find_links: list[Path]) -> None:
    """Download every wheel the stacks' locks pin into `folder`, for an offline `harness build`."""
    fill_images_wheelhouse(folder, parse_stacks(stacks), variant, find_links)
