"""ResNet18 in PyTorch (NCHW), written out (no torchvision in the stack): torchvision's layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from suites.resnet18.common import BLOCKS, BN_EPS, BN_MOMENTUM, MEAN, STAGES, STD


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = _bn(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), _bn(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = _bn(64)
        cin = 64
        for s, (cout, stride) in enumerate(STAGES, start=1):
            blocks = [BasicBlock(cin if b == 0 else cout, cout, stride if b == 0 else 1) for b in range(BLOCKS)]
            setattr(self, f"layer{s}", nn.Sequential(*blocks))
            cin = cout
        self.fc = nn.Linear(512, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
        for s in range(1, len(STAGES) + 1):
            x = getattr(self, f"layer{s}")(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)[:, 0]  # one logit per image


def load_weights(model: ResNet18, weights: dict[str, Any]) -> None:
    """Copy the NumPy initial weights in; every parameter must be matched exactly once."""
    params = dict(model.named_parameters())
    if set(params) != set(weights):
        raise ValueError(f"parameter names differ: {sorted(set(params) ^ set(weights))[:6]}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(weights[name]))


def make_prepare(device: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """uint8 NCHW batch -> normalised float32, with the constants made once on `device` (building
    them per step is a host-to-device copy inside the epoch, a synchronisation on a GPU)."""
    mean = torch.tensor(MEAN, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float32, device=device).view(1, 3, 1, 1)

    def prepare(x: torch.Tensor) -> torch.Tensor:
        return (x.float() / 255.0 - mean) / std

    return prepare
