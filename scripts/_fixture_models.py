"""Small models for the oracle fixtures (dev-only helper of ``scripts/make_fixtures.py``).

Stack traces recorded in the fixtures point into this file, so keep edits here
deliberate: moving a line changes the recorded stack traces on regeneration.
"""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...] = (8, 16, 4)) -> None:
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(sizes[1], sizes[2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class ConvBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.body(x))


class NestedCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(ConvBlock(3, 4), ConvBlock(4, 8))
        self.head = nn.Sequential(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ConvLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(6 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.conv(x))
        return self.fc(torch.flatten(y, 1))


class QuantMLP(nn.Module):
    """Linear-ReLU-Linear with a sigmoid between, so quantized partitions are split."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu(self.fc1(x))
        h = torch.sigmoid(self.fc2(h))
        return self.fc3(h)


class MultiOutput(nn.Module):
    """Ops with several outputs (max_pool2d with indices, topk, var_mean, max.dim, split)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        pooled, indices = nn.functional.max_pool2d(y, 2, return_indices=True)
        flat = pooled.flatten(1)
        values, _ = torch.topk(flat, 5, dim=1)
        var, mean = torch.var_mean(flat, dim=1, keepdim=True)
        a, b = torch.split(flat, [8, flat.shape[1] - 8], dim=1)
        top, _ = torch.max(b, dim=1, keepdim=True)
        z = (values - mean) / (var + 1.0) + a[:, :5] * 2.0 + b.sum(dim=1, keepdim=True) - top
        return z, indices.to(torch.float32).sum(dim=(2, 3))


class TinyAttention(nn.Module):
    """Single-head-split self-attention written by hand (reshape/transpose/bmm)."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // h) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class SmallConvNet(nn.Module):
    """For many_runs/no_etrecord: conv, relu, mean, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return torch.tanh(self.fc(y))


def nested_cnn() -> NestedCNN:
    """NestedCNN with non-trivial BatchNorm statistics (eval mode)."""
    model = NestedCNN()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


class SplitQuantMLP(nn.Module):
    """Linear-ReLU-Linear, a cumsum XNNPACK does not take, then Linear: two delegate partitions."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(self.relu(self.fc1(x)))
        h = torch.cumsum(h, dim=-1)
        return self.fc3(h)
