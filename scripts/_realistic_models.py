"""Small but realistic models for the oracle fixtures of ``scripts/make_realistic_fixtures.py``.

Dev-only (oracle virtualenv). Stack traces recorded in the ``tests/fixtures/realistic``
fixtures point into this file, so keep edits here deliberate: moving a line changes the
recorded stack traces on regeneration.
"""

from __future__ import annotations

import torch
from torch import nn


def randomize_batchnorm(model: nn.Module) -> nn.Module:
    """Give every BatchNorm non-trivial running statistics and affine parameters (eval mode)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.7, 1.3)
                m.bias.uniform_(-0.1, 0.1)
    return model.eval()


# --------------------------------------------------------------------------- MobileNet-style CNN


class ConvBNReLU6(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(),
        )


class DepthwiseSeparable(nn.Module):
    """Depthwise 3x3 + pointwise 1x1 (BatchNorm each); residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.depthwise = ConvBNReLU6(cin, cin, 3, stride, groups=cin)
        self.pointwise = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pointwise(self.depthwise(x))
        return x + y if self.residual else y


class TinyMobileNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = ConvBNReLU6(3, 8, 3, 2)
        self.blocks = nn.Sequential(DepthwiseSeparable(8, 8), DepthwiseSeparable(8, 16, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(y, 1))


def tiny_mobilenet() -> TinyMobileNet:
    model = TinyMobileNet()
    randomize_batchnorm(model)
    return model


# --------------------------------------------------------------------------- small Llama


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim: int, seq: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), freqs)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of the last dimension (x: batch, seq, heads, head_dim)."""
    b, t, h, d = x.shape
    pairs = x.reshape(b, t, h, d // 2, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    c = cos[:t].view(1, t, 1, d // 2)
    s = sin[:t].view(1, t, 1, d // 2)
    out = torch.stack((re * c - im * s, re * s + im * c), dim=-1)
    return out.reshape(b, t, h, d)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(batch, seq, kv_heads, head_dim) -> (batch, seq, kv_heads * n_rep, head_dim)."""
    b, t, kv, d = x.shape
    return x[:, :, :, None, :].expand(b, t, kv, n_rep, d).reshape(b, t, kv * n_rep, d)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        n_rep = self.heads // self.kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(2, 3) / self.head_dim**0.5 + mask[:t, :t]
        out = torch.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = SwiGLU(dim, hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class TinyLlama(nn.Module):
    """Llama-style decoder: token embedding, 2 blocks (RoPE, GQA, SwiGLU, RMSNorm), LM head."""

    def __init__(self, vocab: int = 64, dim: int = 32, layers: int = 2, heads: int = 4,
                 kv_heads: int = 2, hidden: int = 64, max_seq: int = 8) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(TransformerBlock(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        cos, sin = rope_tables(dim // heads, max_seq)
        self.register_buffer("freqs_cos", cos, persistent=False)
        self.register_buffer("freqs_sin", sin, persistent=False)
        mask = torch.triu(torch.full((max_seq, max_seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.freqs_cos, self.freqs_sin, self.mask)
        return self.output(self.norm(h))


# --------------------------------------------------------------------------- recurrent


class LstmGru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.gru = nn.GRU(8, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        z, _ = self.gru(y)
        return self.head(z[:, -1])


# --------------------------------------------------------------------------- control flow


class CondModel(nn.Module):
    """Linear, then torch.cond on the sign of the sum picks one of two branches, then Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc_in = nn.Linear(8, 8)
        self.pos = nn.Linear(8, 8)
        self.neg = nn.Linear(8, 8)
        self.fc_out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc_in(x))

        def true_fn(t: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.pos(t))

        def false_fn(t: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.neg(t)) - t

        h = torch.cond(h.sum() > 1.0, true_fn, false_fn, (h,))
        return self.fc_out(h)


# --------------------------------------------------------------------------- dynamic shapes


class DynamicMLP(nn.Module):
    """Token-wise MLP plus a softmax over the (dynamic) sequence dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.fc1(x))
        w = torch.softmax(h.sum(-1, keepdim=True), dim=1)
        return self.fc2(h * w)


# --------------------------------------------------------------------------- quantized, portable


class ConvLinearQ(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2)
        self.fc1 = nn.Linear(4 * 3 * 3, 12)
        self.fc2 = nn.Linear(12, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv1(x))
        y = torch.relu(self.conv2(y))
        y = torch.relu(self.fc1(torch.flatten(y, 1)))
        return self.fc2(y)


# --------------------------------------------------------------------------- two methods


class EncoderDecoder(nn.Module):
    """``forward`` decodes a code; ``encode`` maps an input to a code (exported separately)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(8, 4)
        self.dec = nn.Linear(4, 8)

    def forward(self, code: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.dec(code))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.enc(x))


class EncodeMethod(nn.Module):
    def __init__(self, model: EncoderDecoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.encode(x)


# --------------------------------------------------------------------------- fp16


class HalfConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y)
