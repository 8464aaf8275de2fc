"""The seed-000 CNN in PyTorch (NCHW); nn.Conv2d's default padding=0 is VALID."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from suites.mnist.common import MEAN, STD


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(64 * 12 * 12, 256)
        self.dropout2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return self.fc2(x)  # logits; the loss applies log-softmax + NLL


def prepare(x: torch.Tensor, aux: None) -> torch.Tensor:
    """uint8 batch -> normalised float32 on the device (data stays uint8 there)."""
    return (x.float() / 255.0 - MEAN) / STD
