"""The seed-002 CNN in PyTorch (NCHW); padding=1 on the 3x3 convs is Flax's SAME."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from suites.cifar10.common import MEANS, SIZE, STDS


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def _interpolation(start: torch.Tensor, length: torch.Tensor, pos: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """(B, 32 out, 32 in) bilinear weights resizing [start, start + length) to 32 pixels.

    `pos` (output pixel centres) and `grid` (input pixel indices) are built once on the device.
    """
    src = torch.minimum(torch.clamp(pos[None, :] * (length[:, None] / SIZE) - 0.5, min=0.0), length[:, None] - 1.0)
    src = src + start[:, None]
    return torch.clamp(1.0 - torch.abs(src[:, :, None] - grid), min=0.0)


def make_prepare(device: torch.device | str) -> Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]:
    """`prepare` with its constants made once on `device`.

    Building them per step (torch.tensor(..., device=cuda)) copies from host memory on every
    step: on a GPU a synchronous transfer inside the epoch, which the harness promises not to have.
    """
    mean = torch.tensor(MEANS, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STDS, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    grid = torch.arange(SIZE, dtype=torch.float32, device=device)
    pos = grid + 0.5

    def prepare(x: torch.Tensor, aux: torch.Tensor | None) -> torch.Tensor:
        """uint8 NCHW batch -> (flip + resized crop when `aux` is given) -> normalised float32."""
        x = x.float()
        if aux is not None:
            top, height, left, width, flip = aux.unbind(1)
            rows = _interpolation(top, height, pos, grid)
            cols = _interpolation(left, width, pos, grid)
            cols = torch.where(flip[:, None, None] > 0.5, cols.flip(2), cols)  # read the mirrored column
            x = torch.einsum("bih,bchw,bjw->bcij", rows, x, cols)
        return (x / 255.0 - mean) / std

    return prepare
