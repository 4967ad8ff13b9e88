"""Models for the deeper-localization fixtures (scripts/make_deeper_fixtures.py)."""

from __future__ import annotations

import torch
from torch import nn


class SensitiveMLP(nn.Module):
    """fc1 -> relu -> fc2 -> sigmoid -> fc3, with fc2 made sensitive to int8 weight quantization.

    fc1's unit 0 is dead (bias -50: relu always gives 0), and fc2's weight column 0 (which only
    ever multiplies that dead unit) is 30: the float function is unchanged, but the int8 weight
    step of fc2 becomes ~30/127, coarser than every other fc2 weight. fc2 is the layer whose
    quantization costs most.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)
        with torch.no_grad():
            self.fc1.bias[0] = -50.0
            self.fc2.weight[:, 0] = 30.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.sigmoid(self.fc2(h))
        return self.fc3(h)
