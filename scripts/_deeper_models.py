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


class DecodeStep(nn.Module):
    """One decode step of a tiny Llama-style model with an explicit KV cache.

    ``forward(token [1, 1] int64, pos [1] int64, k_cache, v_cache [1, heads, max_seq, head_dim])``
    returns ``(logits [1, vocab], k_cache', v_cache')``: RMSNorm, q/k/v projections, rotary
    embedding from cos/sin tables indexed by ``pos``, the new k/v written at ``pos``, causal
    attention over the cache, output projection, LM head (no MLP: the fixture stays small). Prefill and decode are the
    same method, one token per run.
    """

    def __init__(self, vocab: int = 16, dim: int = 8, heads: int = 2, max_seq: int = 6) -> None:
        super().__init__()
        from _realistic_models import RMSNorm, rope_tables

        self.heads, self.head_dim, self.max_seq = heads, dim // heads, max_seq
        self.embed = nn.Embedding(vocab, dim)
        self.norm1, self.norm_out = RMSNorm(dim), RMSNorm(dim)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.head = nn.Linear(dim, vocab, bias=False)
        cos, sin = rope_tables(self.head_dim, max_seq)
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        pairs = x.reshape(1, self.heads, self.head_dim // 2, 2)
        re, im = pairs[..., 0], pairs[..., 1]
        return torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1).reshape(1, self.heads, 1, self.head_dim)

    def forward(self, token: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.embed(token).reshape(1, -1)
        h = self.norm1(x)
        cos = torch.index_select(self.rope_cos, 0, pos)
        sin = torch.index_select(self.rope_sin, 0, pos)
        q = self._rope(self.wq(h), cos, sin)
        k = self._rope(self.wk(h), cos, sin)
        v = self.wv(h).reshape(1, self.heads, 1, self.head_dim)
        slot = (torch.arange(self.max_seq) == pos).to(x.dtype).reshape(1, 1, self.max_seq, 1)
        k_cache = k_cache * (1 - slot) + k * slot
        v_cache = v_cache * (1 - slot) + v * slot
        visible = (torch.arange(self.max_seq) <= pos).to(x.dtype).reshape(1, 1, 1, self.max_seq)
        scores = torch.matmul(q, k_cache.transpose(-1, -2)) / self.head_dim ** 0.5 + (visible - 1) * 1e4
        attn = torch.matmul(torch.softmax(scores, dim=-1), v_cache).reshape(1, -1)
        x = x + self.wo(attn)
        return self.head(self.norm_out(x)), k_cache, v_cache


def bad_rope_from(position: int, factor: float):  # type: ignore[no-untyped-def]
    """Twin plant: the rotary tables' rows for positions >= ``position`` scaled by ``factor``."""
    def plant(model: nn.Module) -> None:
        with torch.no_grad():
            model.rope_cos[position:] *= factor  # type: ignore[index,operator]
            model.rope_sin[position:] *= factor  # type: ignore[index,operator]
    return plant
