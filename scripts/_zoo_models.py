"""The model zoo of numdiff's self-test (``scripts/make_zoo.py``, oracle venv).

Small models of many architectures, chosen for variety rather than size: CNNs with batch norm,
depthwise, squeeze-excite and residuals; vision-transformer and pre-/post-LN encoder blocks;
Llama-style decoders (RMSNorm, RoPE, grouped-query attention, a KV cache passed in and out);
GRU/LSTM/RNN; conv1d audio; U-Net-like decoders; MLP-mixer; embeddings and pooling; graph inputs
read by several ops. Each is an ``Arch``: a constructor, an input maker, and the model attributes
a twin may perturb besides weights and biases (``constants``: plain float attributes used in
``forward``; ``bounds``: clamp/hardtanh limits).

Stack traces recorded in the zoo's ETRecords point into this file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Arch:
    name: str
    family: str
    make: Callable[[], nn.Module]
    inputs: Callable[[torch.Generator], Inputs]
    constants: tuple[str, ...] = ()  # float attributes of the root module used in forward
    bounds: tuple[str, ...] = ()  # float attributes used as clamp/hardtanh limits
    quantize: bool = True  # PT2E int8 makes sense for it


def randn(*shape: int) -> Callable[[torch.Generator], Inputs]:
    return lambda g: (torch.randn(*shape, generator=g),)


def tokens(vocab: int, *shape: int) -> Callable[[torch.Generator], Inputs]:
    return lambda g: (torch.randint(0, vocab, shape, generator=g),)


def _init_bn(model: nn.Module) -> nn.Module:
    """Batch/group norms with non-trivial statistics and affine parameters (eval mode)."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm, nn.InstanceNorm2d)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                    m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.5) * 0.4)
    return model.eval()


# --- CNNs ------------------------------------------------------------------------------------


class ConvBnNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, stride=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return self.fc(y.mean(dim=(2, 3)))


class DepthwiseSeparable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.bn = nn.BatchNorm2d(8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.head = nn.Linear(16, 4)
        self.hi = 6.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardtanh(self.stem(x), 0.0, self.hi)
        y = F.hardtanh(self.bn(self.dw(y)), 0.0, self.hi)
        y = F.relu(self.pw(y))
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


class SqueezeExcite(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 12, 3, padding=1)
        self.se_reduce = nn.Linear(12, 4)
        self.se_expand = nn.Linear(4, 12)
        self.proj = nn.Conv2d(12, 8, 1)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(x))
        s = y.mean(dim=(2, 3))
        s = torch.sigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        y = y * s[:, :, None, None]
        y = F.relu(self.proj(y))
        return self.head(y.mean(dim=(2, 3)))


class BasicBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class ResNetTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.block1 = BasicBlock(8)
        self.block2 = BasicBlock(8)
        self.fc = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block2(self.block1(F.relu(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


class InvertedResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.expand = nn.Conv2d(8, 24, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(24)
        self.dw = nn.Conv2d(24, 24, 3, padding=1, groups=24, bias=False)
        self.bn2 = nn.BatchNorm2d(24)
        self.project = nn.Conv2d(24, 8, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(8)
        self.hi = 6.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardtanh(self.bn1(self.expand(x)), 0.0, self.hi)
        y = F.hardtanh(self.bn2(self.dw(y)), 0.0, self.hi)
        return x + self.bn3(self.project(y))


class MobileV3ish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.classifier = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.stem(x))
        y = F.hardswish(self.dw(y))
        y = self.pw(y) * F.hardsigmoid(y.mean(dim=(2, 3), keepdim=True))
        return self.classifier(F.adaptive_avg_pool2d(y, 1).flatten(1))


class ConvPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3)
        self.conv2 = nn.Conv2d(6, 12, 3)
        self.fc1 = nn.Linear(12 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.conv1(x)), 2)
        y = F.max_pool2d(F.relu(self.conv2(y)), 2)
        return self.fc2(F.relu(self.fc1(y.flatten(1))))


class GroupedDilated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 8, 3, padding=2, dilation=2)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.gn = nn.GroupNorm(2, 8)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.conv1(x))
        y = F.silu(self.gn(self.grouped(y)))
        return self.out(y)


class UNetTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Conv2d(2, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(16, 16, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec = nn.Conv2d(16, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = F.relu(self.enc1(x))
        m = F.relu(self.mid(F.relu(self.down(e))))
        u = self.up(m)
        d = F.relu(self.dec(torch.cat([u, e], dim=1)))
        return torch.sigmoid(self.out(d))


class UpsampleDecoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.skip = nn.Conv2d(3, 8, 1)
        self.out = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.mid(F.relu(self.enc(x))))
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")
        return self.out(F.relu(y + self.skip(x)))


class PixelShuffleSR(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.feat = nn.Conv2d(1, 8, 3, padding=1)
        self.expand = nn.Conv2d(8, 4, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.lo = -1.0
        self.hi = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.shuffle(self.expand(F.relu(self.feat(x))))
        return torch.clamp(y, self.lo, self.hi)


class InstanceNormNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.norm = nn.GroupNorm(6, 6)  # instance norm with affine parameters
        self.conv2 = nn.Conv2d(6, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv2(F.leaky_relu(self.norm(self.conv1(x)), 0.1)))


# --- 1-D / audio ---------------------------------------------------------------------------


class AudioConv1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, 8, 5, stride=2, padding=2)
        self.bn1 = nn.BatchNorm1d(8)
        self.conv2 = nn.Conv1d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv1d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.bn1(self.conv1(x)))
        y = y + F.gelu(self.conv2(y))
        y = F.gelu(self.conv3(y))
        return self.fc(y.amax(dim=2))


class TCN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Conv1d(4, 8, 1)
        self.dil1 = nn.Conv1d(8, 8, 3, padding=2, dilation=2)
        self.dil2 = nn.Conv1d(8, 8, 3, padding=4, dilation=4)
        self.out = nn.Conv1d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.inp(x))
        y = y + F.relu(self.dil1(y))
        y = y + F.relu(self.dil2(y))
        return self.out(y)


# --- recurrent -----------------------------------------------------------------------------


class GRUNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(6, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.fc(out[:, -1])


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out.mean(dim=1))


class ManualRNN(nn.Module):
    """An unrolled Elman RNN: the same two linears applied at every step."""

    def __init__(self) -> None:
        super().__init__()
        self.ih = nn.Linear(4, 8)
        self.hh = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], 8)
        for t in range(x.shape[1]):
            h = torch.tanh(self.ih(x[:, t]) + self.hh(h))
        return self.out(h)


# --- transformers --------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool = False) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        if self.causal:
            mask = torch.ones(t, t).tril() == 0
            att = att.masked_fill(mask, float("-inf"))
        y = att.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class PreLNBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class PostLNEncoder(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.attn = Attention(dim, 4)
        self.ln1 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 32)
        self.fc2 = nn.Linear(32, dim)
        self.ln2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.fc2(F.relu(self.fc1(x))))


class ViTTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 4, stride=4)
        self.pos = nn.Parameter(torch.randn(1, 4, 16) * 0.1)
        self.block = PreLNBlock(16, 2)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        y = self.norm(self.block(y))
        return self.head(y.mean(dim=1))


class TorchEncoderLayer(nn.Module):
    """nn.MultiheadAttention through the eager path, pre-LN."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        self.ff = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln(x)
        a, _ = self.mha(h, h, h, need_weights=False)
        x = x + a
        return x + self.ff(F.silu(x))


class SDPABlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.o = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 2, 8).transpose(1, 2)
        k = self.k(x).view(b, t, 2, 8).transpose(1, 2)
        v = self.v(x).view(b, t, 2, 8).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, 16))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class LlamaBlock(nn.Module):
    """RMSNorm, RoPE, grouped-query attention (4 query heads, 2 KV heads), SwiGLU."""

    def __init__(self, dim: int = 16, heads: int = 4, kv_heads: int = 2, seq: int = 6) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, 32, bias=False)
        self.w3 = nn.Linear(dim, 32, bias=False)
        self.w2 = nn.Linear(32, dim, bias=False)
        pos = torch.arange(seq, dtype=torch.float32)[:, None]
        freqs = pos / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        self.register_buffer("cos", torch.cat([freqs.cos(), freqs.cos()], dim=-1))
        self.register_buffer("sin", torch.cat([freqs.sin(), freqs.sin()], dim=-1))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.wq(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rope(q, self.cos[:t], self.sin[:t]), _rope(k, self.cos[:t], self.sin[:t])
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        att = att + torch.full((t, t), float("-inf")).triu(1)
        y = att.softmax(dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attn_norm(x))
        n = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class LlamaTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.layer = LlamaBlock()
        self.norm = RMSNorm(16)
        self.lm_head = nn.Linear(16, 32, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(self.layer(self.embed(ids))))


class KVCacheDecoder(nn.Module):
    """One decode step with the KV cache passed in and returned (past keys/values concatenated)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(24, 16)
        self.norm = RMSNorm(16)
        self.wq = nn.Linear(16, 16, bias=False)
        self.wk = nn.Linear(16, 8, bias=False)
        self.wv = nn.Linear(16, 8, bias=False)
        self.wo = nn.Linear(16, 16, bias=False)
        self.lm_head = nn.Linear(16, 24, bias=False)
        self.temperature = 1.0

    def forward(self, ids: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.embed(ids)  # (1, 1, 16)
        h = self.norm(x)
        q = self.wq(h).view(1, 1, 4, 4).transpose(1, 2)
        k = self.wk(h).view(1, 1, 2, 4).transpose(1, 2)
        v = self.wv(h).view(1, 1, 2, 4).transpose(1, 2)
        keys = torch.cat([past_k, k], dim=2)
        values = torch.cat([past_v, v], dim=2)
        kr = keys.repeat_interleave(2, dim=1)
        vr = values.repeat_interleave(2, dim=1)
        att = (q @ kr.transpose(-2, -1) / 2.0).softmax(dim=-1)
        y = (att @ vr).transpose(1, 2).reshape(1, 1, 16)
        out = x + self.wo(y)
        return self.lm_head(out) / self.temperature, keys, values


def kv_inputs(g: torch.Generator) -> Inputs:
    return (torch.randint(0, 24, (1, 1), generator=g), torch.randn(1, 2, 5, 4, generator=g),
            torch.randn(1, 2, 5, 4, generator=g))


class MixerBlock(nn.Module):
    def __init__(self, tokens_: int = 8, dim: int = 12) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.token_fc1 = nn.Linear(tokens_, 16)
        self.token_fc2 = nn.Linear(16, tokens_)
        self.ln2 = nn.LayerNorm(dim)
        self.channel_fc1 = nn.Linear(dim, 24)
        self.channel_fc2 = nn.Linear(24, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x).transpose(1, 2)
        x = x + self.token_fc2(F.gelu(self.token_fc1(y))).transpose(1, 2)
        return x + self.channel_fc2(F.gelu(self.channel_fc1(self.ln2(x))))


class MLPMixer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 12)
        self.mixer = MixerBlock()
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mixer(self.stem(x)).mean(dim=1))


# --- embeddings, pooling, MLPs -------------------------------------------------------------


class EmbedMeanPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 12)
        self.fc = nn.Linear(12, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc(self.embed(ids).mean(dim=1))))


class EmbedMaxPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 10)
        self.conv = nn.Conv1d(10, 12, 3, padding=1)
        self.fc = nn.Linear(12, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(self.embed(ids).transpose(1, 2)))
        return self.fc(y.amax(dim=2))


class DeepMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(12, 12) for _ in range(8))
        self.out = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.out(x)


class ActivationZoo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 16)
        self.fc4 = nn.Linear(16, 4)
        self.slope = 0.2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.fc1(x))
        y = F.elu(self.fc2(y))
        y = F.leaky_relu(self.fc3(y), self.slope)
        return F.softplus(self.fc4(y))


class GLUNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(10, 24)
        self.out = nn.Linear(12, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.glu(self.fc(x), dim=-1))


class AutoEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Linear(16, 8)
        self.enc2 = nn.Linear(8, 3)
        self.dec1 = nn.Linear(3, 8)
        self.dec2 = nn.Linear(8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.enc2(torch.tanh(self.enc1(x)))
        return torch.sigmoid(self.dec2(torch.tanh(self.dec1(z))))


class TemperatureSoftmax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.cls = nn.Linear(16, 6)
        self.temperature = 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.cls(F.relu(self.fc(x))) / self.temperature, dim=-1)


class ClampNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 6, 3, padding=1)
        self.fc = nn.Linear(6, 3)
        self.lo = -0.4
        self.hi = 0.6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.clamp(self.conv(x), self.lo, self.hi)
        return self.fc(y.mean(dim=(2, 3)))


# --- graph inputs read by several ops, several inputs -----------------------------------------


class InputFanout(nn.Module):
    """The graph input feeds a layer_norm, a residual add, a gate product and a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(12)
        self.fc1 = nn.Linear(12, 12)
        self.gate = nn.Linear(12, 12)
        self.fc2 = nn.Linear(12, 4)
        self.alpha = 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(self.ln(x))) + x
        g = torch.sigmoid(self.gate(x)) * x * self.alpha
        return self.fc2(h + g)


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(4, 8)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ax, by = torch.tanh(self.a(x)), F.relu(self.b(y))
        return self.head(torch.cat([ax * by, ax + by], dim=-1))


class CrossAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.kv = nn.Linear(6, 16)
        self.o = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        q = self.q(x)
        k, v = self.kv(ctx).chunk(2, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
        return x + self.o(att @ v)


class ScaledResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(10, 10)
        self.fc2 = nn.Linear(10, 10)
        self.out = nn.Linear(10, 2)
        self.res_scale = 0.7

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.res_scale * self.fc2(F.gelu(self.fc1(x)))
        return self.out(y)


def _bn(cls: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    return lambda: _init_bn(cls())


ARCHS: list[Arch] = [
    Arch("conv_bn", "cnn", _bn(ConvBnNet), randn(1, 3, 8, 8)),
    Arch("depthwise_separable", "cnn", _bn(DepthwiseSeparable), randn(1, 3, 8, 8), bounds=("hi",)),
    Arch("squeeze_excite", "cnn", SqueezeExcite, randn(1, 3, 8, 8)),
    Arch("resnet_tiny", "cnn", _bn(ResNetTiny), randn(1, 3, 8, 8)),
    Arch("inverted_residual", "cnn", _bn(InvertedResidual), randn(1, 8, 6, 6), bounds=("hi",)),
    Arch("mobilenet_v3ish", "cnn", MobileV3ish, randn(1, 3, 12, 12)),
    Arch("conv_maxpool", "cnn", ConvPool, randn(1, 1, 14, 14)),
    Arch("grouped_dilated", "cnn", _bn(GroupedDilated), randn(1, 4, 8, 8)),
    Arch("unet_tiny", "unet", UNetTiny, randn(1, 2, 8, 8)),
    Arch("upsample_decoder", "unet", UpsampleDecoder, randn(1, 3, 8, 8)),
    Arch("pixel_shuffle", "unet", PixelShuffleSR, randn(1, 1, 6, 6), bounds=("lo", "hi")),
    Arch("instance_norm", "cnn", _bn(InstanceNormNet), randn(1, 3, 6, 6)),
    Arch("audio_conv1d", "audio", _bn(AudioConv1d), randn(1, 1, 64)),
    Arch("tcn", "audio", TCN, randn(1, 4, 20)),
    Arch("gru", "rnn", GRUNet, randn(1, 5, 6), quantize=False),
    Arch("lstm", "rnn", LSTMNet, randn(1, 5, 6), quantize=False),
    Arch("manual_rnn", "rnn", ManualRNN, randn(2, 4, 4)),
    Arch("attention_prenorm", "transformer", _bn(PreLNBlock), randn(1, 6, 16)),
    Arch("post_ln_encoder", "transformer", _bn(PostLNEncoder), randn(1, 6, 16)),
    Arch("vit_tiny", "transformer", _bn(ViTTiny), randn(1, 3, 8, 8)),
    Arch("torch_mha", "transformer", _bn(TorchEncoderLayer), randn(1, 5, 16)),
    Arch("sdpa_causal", "transformer", SDPABlock, randn(1, 6, 16)),
    Arch("llama_gqa_rope", "decoder", LlamaTiny, tokens(32, 1, 6)),
    Arch("kv_cache_step", "decoder", KVCacheDecoder, kv_inputs, constants=("temperature",)),
    Arch("mlp_mixer", "mixer", _bn(MLPMixer), randn(1, 8, 6)),
    Arch("embed_mean_pool", "embedding", EmbedMeanPool, tokens(50, 2, 7)),
    Arch("embed_conv_maxpool", "embedding", EmbedMaxPool, tokens(40, 1, 9)),
    Arch("deep_mlp", "mlp", DeepMLP, randn(4, 12)),
    Arch("activation_zoo", "mlp", ActivationZoo, randn(3, 8), constants=("slope",)),
    Arch("glu", "mlp", GLUNet, randn(2, 10)),
    Arch("autoencoder", "mlp", AutoEncoder, randn(3, 16)),
    Arch("temperature_softmax", "mlp", TemperatureSoftmax, randn(2, 8), constants=("temperature",)),
    Arch("clamp_conv", "cnn", ClampNet, randn(1, 2, 6, 6), bounds=("lo", "hi")),
    Arch("input_fanout", "inputs", _bn(InputFanout), randn(2, 3, 12), constants=("alpha",)),
    Arch("two_inputs", "inputs", TwoInputs, lambda g: (torch.randn(2, 6, generator=g), torch.randn(2, 4, generator=g))),
    Arch("cross_attention", "inputs", CrossAttention,
         lambda g: (torch.randn(1, 4, 8, generator=g), torch.randn(1, 5, 6, generator=g))),
    Arch("scaled_residual", "mlp", ScaledResidual, randn(3, 10), constants=("res_scale",)),
]


# --- real-size architectures (family "realsize": not in the default zoo) -------------------------
#
# The zoo above is tiny (8x8 images, 16-dim features). These have the sizes users' models have:
# reduction dimensions in the thousands, dozens of layers, activations of hundreds of kB. They are
# generated only when asked (``make_zoo.py --realsize`` or ``--only NAME``) and listed by
# ``make_zoo.py --list --realsize``. Written here (no torchvision in the oracle venv).


def _calibrate_bn(model: nn.Module, inputs: Callable[[torch.Generator], Inputs], batches: int = 2) -> nn.Module:
    """Batch norms whose running statistics are those of the activations they see (as after training)
    and random affine parameters: activations keep a realistic scale through dozens of layers."""
    g = torch.Generator().manual_seed(11)
    bns = [m for m in model.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))]
    with torch.no_grad():
        for m in bns:
            m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
            m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.5) * 0.4)
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(batches):
            model(*inputs(g))
    return model.eval()


def _layer_norms(model: nn.Module) -> nn.Module:
    """LayerNorms with non-trivial affine parameters (as after training)."""
    g = torch.Generator().manual_seed(13)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm) and m.weight is not None:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.5) * 0.2)
    return model.eval()


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout))


class MBv2Block(nn.Module):
    """MobileNetV2's inverted residual: 1x1 expand, 3x3 depthwise, 1x1 linear projection, ReLU6."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.expand = _conv_bn(cin, hidden, 1) if expand != 1 else None
        self.dw = _conv_bn(hidden, hidden, 3, stride, groups=hidden)
        self.project = _conv_bn(hidden, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(self.expand(x)) if self.expand is not None else x
        y = self.project(F.relu6(self.dw(y)))
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """MobileNetV2, width 1.0 (17 inverted residuals, 1280-channel head, 1000 classes)."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))

    def __init__(self) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 32, 3, 2)
        blocks, cin = [], 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                blocks.append(MBv2Block(cin, c, s if i == 0 else 1, t))
                cin = c
        self.blocks = nn.Sequential(*blocks)
        self.head = _conv_bn(cin, 1280, 1)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(F.relu6(self.stem(x)))
        y = F.relu6(self.head(y))
        return self.classifier(F.adaptive_avg_pool2d(y, 1).flatten(1))


class MBConv(nn.Module):
    """EfficientNet's MBConv: expand, depthwise kxk, squeeze-excite (SiLU, sigmoid gate), project."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        squeezed = max(1, cin // 4)
        self.expand = _conv_bn(cin, hidden, 1) if expand != 1 else None
        self.dw = _conv_bn(hidden, hidden, k, stride, groups=hidden)
        self.se_reduce = nn.Conv2d(hidden, squeezed, 1)
        self.se_expand = nn.Conv2d(squeezed, hidden, 1)
        self.project = _conv_bn(hidden, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.expand(x)) if self.expand is not None else x
        y = F.silu(self.dw(y))
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(y.mean(dim=(2, 3), keepdim=True)))))
        y = self.project(y * s)
        return x + y if self.residual else y


class EfficientNetB0ish(nn.Module):
    """EfficientNet-B0's stem and first four stages (seven MBConv blocks), a 1x1 head and a classifier."""

    SETTINGS = ((1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 2, 2))

    def __init__(self) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 32, 3, 2)
        blocks, cin = [], 32
        for t, k, c, n, s in self.SETTINGS:
            for i in range(n):
                blocks.append(MBConv(cin, c, k, s if i == 0 else 1, t))
                cin = c
        self.blocks = nn.Sequential(*blocks)
        self.head = _conv_bn(cin, 640, 1)
        self.classifier = nn.Linear(640, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(F.silu(self.stem(x)))
        y = F.silu(self.head(y))
        return self.classifier(F.adaptive_avg_pool2d(y, 1).flatten(1))


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = _conv_bn(cin, cout, 3, stride)
        self.conv2 = _conv_bn(cout, cout, 3)
        self.down = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.down(x) if self.down is not None else x
        return F.relu(skip + self.conv2(F.relu(self.conv1(x))))


class ResNet18(nn.Module):
    """ResNet-18: 7x7 stem, max pool, four stages of two basic blocks (64..512 channels), 1000 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64))
        layers, cin = [], 64
        for c, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [ResBlock(cin, c, s), ResBlock(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        y = self.layers(y)
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7, channels-last LayerNorm, 4x MLP with GELU, layer scale, residual."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(0.1 + 0.4 * torch.rand(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXtStage(nn.Module):
    """ConvNeXt-T's stem (4x4 patchify, LayerNorm) and first stage: three blocks at 56x56, 96 channels."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 96, 4, stride=4)
        self.stem_norm = nn.LayerNorm(96, eps=1e-6)
        self.blocks = nn.Sequential(*(ConvNeXtBlock(96) for _ in range(3)))
        self.norm = nn.LayerNorm(96, eps=1e-6)
        self.head = nn.Linear(96, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = self.blocks(y)
        return self.head(self.norm(y.mean(dim=(2, 3))))


class BertLayer(nn.Module):
    """A BERT-base encoder layer: post-LN, 12 heads, additive attention mask, GELU feed-forward of 3072."""

    def __init__(self, dim: int = 768, heads: int = 12, ff: int = 3072) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.attn_out = nn.Linear(dim, dim)
        self.attn_norm = nn.LayerNorm(dim, eps=1e-12)
        self.intermediate = nn.Linear(dim, ff)
        self.output = nn.Linear(ff, dim)
        self.out_norm = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.query(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.key(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        v = self.value(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + mask
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = self.attn_norm(x + self.attn_out(y))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    """BERT-base-like: word, position and type embeddings with LayerNorm, two encoder layers, a pooler."""

    def __init__(self, vocab: int = 2048, seq: int = 128, dim: int = 768) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(seq, dim)
        self.emb_norm = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(dim) for _ in range(2))
        self.pooler = nn.Linear(dim, dim)
        with torch.no_grad():
            self.word.weight.mul_(0.02)
            self.position.weight.mul_(0.02)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1])
        x = self.emb_norm(self.word(ids) + self.position(pos)[None])
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return torch.tanh(self.pooler(x[:, 0]))


def bert_inputs(g: torch.Generator) -> Inputs:
    ids = torch.randint(0, 2048, (1, 128), generator=g)
    valid = 96 + int(torch.randint(0, 24, (1,), generator=g))
    mask = (torch.arange(128) < valid).to(torch.int64)[None]
    return ids, mask


class LlamaLayer(nn.Module):
    """A Llama decoder layer: RMSNorm, RoPE, grouped-query attention, SwiGLU."""

    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int, seq: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        pos = torch.arange(seq, dtype=torch.float32)[:, None]
        freqs = pos / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        self.register_buffer("cos", torch.cat([freqs.cos(), freqs.cos()], dim=-1))
        self.register_buffer("sin", torch.cat([freqs.sin(), freqs.sin()], dim=-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.wk(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rope(q, self.cos[:t], self.sin[:t]), _rope(k, self.cos[:t], self.sin[:t])
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + torch.full((t, t), float("-inf")).triu(1)
        x = x + self.wo((att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d))
        n = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(n)) * self.w3(n))


class LlamaDecoder(nn.Module):
    """Four Llama layers (dim 512, 8 query heads, 2 KV heads, SwiGLU 1408), tied embedding of 4096 tokens."""

    def __init__(self, vocab: int = 4096, dim: int = 512, seq: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        with torch.no_grad():
            self.embed.weight.mul_(0.02)
        self.layers = nn.ModuleList(LlamaLayer(dim, 8, 2, 1408, seq) for _ in range(4))
        self.norm = RMSNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return F.linear(self.norm(x), self.embed.weight)  # the output projection is the embedding


def _bn_calibrated(cls: Callable[[], nn.Module], inputs: Callable[[torch.Generator], Inputs]) -> Callable[[], nn.Module]:
    return lambda: _calibrate_bn(cls(), inputs)


REALSIZE: list[Arch] = [
    Arch("mobilenet_v2_96", "realsize", _bn_calibrated(MobileNetV2, randn(2, 3, 96, 96)), randn(1, 3, 96, 96)),
    Arch("efficientnet_b0ish_112", "realsize", _bn_calibrated(EfficientNetB0ish, randn(2, 3, 112, 112)),
         randn(1, 3, 112, 112)),
    Arch("resnet18_112", "realsize", _bn_calibrated(ResNet18, randn(2, 3, 112, 112)), randn(1, 3, 112, 112)),
    Arch("convnext_stage_224", "realsize", lambda: _layer_norms(ConvNeXtStage()), randn(1, 3, 224, 224)),
    Arch("bert_base_2layer", "realsize", lambda: _layer_norms(BertEncoder()), bert_inputs),
    Arch("llama_4layer_512", "realsize", LlamaDecoder, tokens(4096, 1, 64)),
]


# --- held-out architectures (family "heldout": not in the default zoo, never tuned on) -----------
#
# numdiff's culprit finder was tuned on the zoo above and the real-size models. These are kinds of
# model it never saw while tuned (channel shuffles, dense concatenations, pooled Inception
# branches, windowed attention with a relative position bias table, Conformer and T5 blocks,
# PointNet, a bilinear FPN with two outputs, a transposed-convolution decoder, LayerScale): numdiff
# is measured on them honestly and never tuned on them. Generated only when asked
# (``make_zoo.py --heldout`` or ``--only NAME``), listed by ``make_zoo.py --list --heldout``.


def _channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.shape
    return x.reshape(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet v1 unit: grouped 1x1, channel shuffle, depthwise 3x3, grouped 1x1; stride 2 concatenates
    an average-pooled shortcut, stride 1 adds the input."""

    def __init__(self, c: int, stride: int, groups: int = 3) -> None:
        super().__init__()
        self.stride, self.groups = stride, groups
        self.gconv1 = nn.Conv2d(c, c, 1, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.dw = nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.gconv2 = nn.Conv2d(c, c, 1, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _channel_shuffle(F.relu(self.bn1(self.gconv1(x))), self.groups)
        y = self.bn3(self.gconv2(self.bn2(self.dw(y))))
        if self.stride == 2:
            return F.relu(torch.cat([F.avg_pool2d(x, 3, 2, 1), y], dim=1))
        return F.relu(x + y)


class ShuffleNetTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 3, padding=1)
        self.down = ShuffleUnit(12, 2)
        self.unit = ShuffleUnit(24, 1)
        self.fc = nn.Linear(24, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.unit(self.down(F.relu(self.stem(x))))
        return self.fc(y.mean(dim=(2, 3)))


class DenseLayer(nn.Module):
    """DenseNet's pre-activation bottleneck: BN-ReLU-1x1, BN-ReLU-3x3, its output concatenated to its input."""

    def __init__(self, c: int, growth: int = 4) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c)
        self.conv1 = nn.Conv2d(c, 4 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(F.relu(self.bn2(self.conv1(F.relu(self.bn1(x))))))
        return torch.cat([x, y], dim=1)


class DenseBlockNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.layers = nn.Sequential(DenseLayer(8), DenseLayer(12), DenseLayer(16))
        self.trans_bn = nn.BatchNorm2d(20)
        self.trans = nn.Conv2d(20, 10, 1, bias=False)
        self.norm = nn.BatchNorm2d(10)
        self.fc = nn.Linear(10, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layers(self.stem(x))
        y = F.avg_pool2d(self.trans(F.relu(self.trans_bn(y))), 2)
        return self.fc(F.relu(self.norm(y)).mean(dim=(2, 3)))


class InceptionBlock(nn.Module):
    """Four branches: 1x1; 1x1-3x3; 1x1-3x3-3x3; 3x3 average pool (padding not counted)-1x1; concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 3, padding=1)
        self.b1 = nn.Conv2d(12, 6, 1)
        self.b2_reduce = nn.Conv2d(12, 4, 1)
        self.b2 = nn.Conv2d(4, 6, 3, padding=1)
        self.b3_reduce = nn.Conv2d(12, 4, 1)
        self.b3a = nn.Conv2d(4, 6, 3, padding=1)
        self.b3b = nn.Conv2d(6, 6, 3, padding=1)
        self.b4 = nn.Conv2d(12, 4, 1)
        self.fc = nn.Linear(22, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        y1 = F.relu(self.b1(x))
        y2 = F.relu(self.b2(F.relu(self.b2_reduce(x))))
        y3 = F.relu(self.b3b(F.relu(self.b3a(F.relu(self.b3_reduce(x))))))
        y4 = F.relu(self.b4(F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)))
        y = F.max_pool2d(torch.cat([y1, y2, y3, y4], dim=1), 3, 2, 1)
        return self.fc(y.flatten(2).mean(dim=2))


class SwinBlock(nn.Module):
    """Shifted-window attention: cyclic shift (roll), window partition by reshape/permute, a relative
    position bias table gathered by index, an additive mask between shifted regions, window merge."""

    def __init__(self, dim: int = 16, heads: int = 2, size: int = 8, window: int = 4, shift: int = 2) -> None:
        super().__init__()
        self.dim, self.heads, self.size, self.window, self.shift = dim, heads, size, window, shift
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.bias_table = nn.Parameter(0.5 * torch.randn((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("bias_index", rel[..., 0] * (2 * window - 1) + rel[..., 1])
        region = torch.zeros(size, size)
        cuts = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
        for k, (hs, ws) in enumerate((h, w) for h in cuts for w in cuts):
            region[hs, ws] = k
        windows = self._partition(region[None, :, :, None]).squeeze(-1)
        self.register_buffer("mask", (windows[:, None, :] != windows[:, :, None]).float() * -100.0)

    def _partition(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        n = self.window
        x = x.reshape(b, h // n, n, w // n, n, c).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, n * n, c)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        bw, t, d = x.shape
        hd = d // self.heads
        qkv = self.qkv(x).reshape(bw, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q * hd**-0.5) @ k.transpose(-2, -1)
        bias = self.bias_table[self.bias_index.reshape(-1)].reshape(t, t, self.heads).permute(2, 0, 1)
        att = att + bias[None] + self.mask[:, None]
        return self.proj((att.softmax(dim=-1) @ v).transpose(1, 2).reshape(bw, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, d = x.shape
        s, n = self.size, self.window
        h = torch.roll(self.norm1(x).reshape(b, s, s, d), (-self.shift, -self.shift), dims=(1, 2))
        y = self.attention(self._partition(h))
        y = y.reshape(b, s // n, s // n, n, n, d).permute(0, 1, 3, 2, 4, 5).reshape(b, s, s, d)
        x = x + torch.roll(y, (self.shift, self.shift), dims=(1, 2)).reshape(b, s * s, d)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ConformerConv(nn.Module):
    """A Conformer block's half-step feed-forward and convolution module: LayerNorm, pointwise conv1d,
    GLU over channels, depthwise conv1d, BatchNorm1d, SiLU, pointwise conv1d, residuals."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.ff_norm = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 2 * dim)
        self.ff2 = nn.Linear(2 * dim, dim)
        self.conv_norm = nn.LayerNorm(dim)
        self.pw1 = nn.Conv1d(dim, 2 * dim, 1)
        self.dw = nn.Conv1d(dim, dim, 7, padding=3, groups=dim)
        self.bn = nn.BatchNorm1d(dim)
        self.pw2 = nn.Conv1d(dim, dim, 1)
        self.ff_scale = 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ff_scale * self.ff2(F.silu(self.ff1(self.ff_norm(x))))
        y = F.glu(self.pw1(self.conv_norm(x).transpose(1, 2)), dim=1)
        y = self.pw2(F.silu(self.bn(self.dw(y))))
        return x + y.transpose(1, 2)


class T5RMSNorm(nn.Module):
    """T5's layer norm: scale only, no mean subtracted, the variance in float32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(0.5 + torch.rand(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class T5Block(nn.Module):
    """A T5 v1.1 encoder block: RMSNorm, attention without 1/sqrt(d) and with a bucketed relative
    position bias (an embedding indexed by a bucket buffer), gated-GELU (tanh) feed-forward."""

    def __init__(self, dim: int = 16, heads: int = 2, seq: int = 8, buckets: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = T5RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.rel_bias = nn.Embedding(buckets, heads)
        rel = torch.arange(seq)[None, :] - torch.arange(seq)[:, None]
        half = buckets // 2
        bucket = (rel > 0).long() * half + torch.clamp(rel.abs(), max=half - 1)
        self.register_buffer("buckets", bucket)
        self.norm2 = T5RMSNorm(dim)
        self.wi_0 = nn.Linear(dim, 32, bias=False)
        self.wi_1 = nn.Linear(dim, 32, bias=False)
        self.wo = nn.Linear(32, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = self.k(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = self.v(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = q @ k.transpose(-2, -1) + self.rel_bias(self.buckets).permute(2, 0, 1)[None]
        x = x + self.o((att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d))
        n = self.norm2(x)
        return x + self.wo(F.gelu(self.wi_0(n), approximate="tanh") * self.wi_1(n))


class PointNet(nn.Module):
    """PointNet classifier: shared per-point MLP (1x1 conv1d, BatchNorm1d), max over the points, an MLP
    head, log-softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(3, 16, 1)
        self.bn1 = nn.BatchNorm1d(16)
        self.conv2 = nn.Conv1d(16, 32, 1)
        self.bn2 = nn.BatchNorm1d(32)
        self.conv3 = nn.Conv1d(32, 64, 1)
        self.bn3 = nn.BatchNorm1d(64)
        self.fc1 = nn.Linear(64, 32)
        self.bn4 = nn.BatchNorm1d(32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = torch.max(self.bn3(self.conv3(y)), 2)[0]
        return F.log_softmax(self.fc2(F.relu(self.bn4(self.fc1(y)))), dim=-1)


class FPNBilinear(nn.Module):
    """A three-level feature pyramid: strided backbone, lateral 1x1 convs, top-down bilinear upsampling
    (by size and by scale factor), 3x3 smoothing; two outputs (the two finest levels)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, 2, 1)
        self.c2 = nn.Conv2d(8, 16, 3, 2, 1)
        self.c3 = nn.Conv2d(16, 24, 3, 2, 1)
        self.l1 = nn.Conv2d(8, 8, 1)
        self.l2 = nn.Conv2d(16, 8, 1)
        self.l3 = nn.Conv2d(24, 8, 1)
        self.s1 = nn.Conv2d(8, 4, 3, padding=1)
        self.s2 = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f1 = F.relu(self.c1(x))
        f2 = F.relu(self.c2(f1))
        f3 = F.relu(self.c3(f2))
        p3 = self.l3(f3)
        p2 = self.l2(f2) + F.interpolate(p3, size=f2.shape[-2:], mode="bilinear", align_corners=False)
        p1 = self.l1(f1) + F.interpolate(p2, scale_factor=2.0, mode="bilinear", align_corners=True)
        return self.s1(p1), self.s2(p2)


class DeconvDecoder(nn.Module):
    """A generator-style decoder: linear to a 2x2 map, strided ConvTranspose2d (with output padding),
    BatchNorm, Mish and ELU, tanh output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16 * 2 * 2)
        self.up1 = nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.up2 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.out = nn.Conv2d(4, 3, 3, padding=1)
        self.alpha = 0.5

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        y = F.softplus(self.fc(z), beta=2.0).view(-1, 16, 2, 2)
        y = F.mish(self.bn1(self.up1(y)))
        y = F.elu(self.up2(y), alpha=self.alpha)
        return torch.tanh(self.out(y))


class Affine(nn.Module):
    """ResMLP's normalisation: a per-channel scale and shift (two parameters, no statistics)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(0.5 + torch.rand(dim))
        self.beta = nn.Parameter(0.2 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.alpha * x + self.beta


class ResMLPLayerScale(nn.Module):
    """ResMLP: affine pre-norms, a token-mixing linear across patches, a channel MLP, each residual
    branch multiplied by a LayerScale parameter."""

    def __init__(self, tokens_: int = 8, dim: int = 12) -> None:
        super().__init__()
        self.stem = nn.Linear(6, dim)
        self.aff1 = Affine(dim)
        self.token_mix = nn.Linear(tokens_, tokens_)
        self.ls1 = nn.Parameter(0.1 + 0.2 * torch.rand(dim))
        self.aff2 = Affine(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.ls2 = nn.Parameter(0.1 + 0.2 * torch.rand(dim))
        self.head = nn.Linear(dim, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = x + self.ls1 * self.token_mix(self.aff1(x).transpose(1, 2)).transpose(1, 2)
        x = x + self.ls2 * self.fc2(F.gelu(self.fc1(self.aff2(x))))
        return self.head(x.mean(dim=1))


HELDOUT: list[Arch] = [
    Arch("shufflenet_unit", "heldout", _bn(ShuffleNetTiny), randn(1, 3, 12, 12)),
    Arch("dense_block", "heldout", _bn(DenseBlockNet), randn(1, 3, 8, 8)),
    Arch("inception_avgpool", "heldout", InceptionBlock, randn(1, 3, 10, 10)),
    Arch("swin_window_attention", "heldout", _bn(SwinBlock), randn(1, 64, 16)),
    Arch("conformer_conv", "heldout", _bn(ConformerConv), randn(1, 20, 16), constants=("ff_scale",)),
    Arch("t5_gated_gelu", "heldout", T5Block, randn(1, 8, 16)),
    Arch("pointnet", "heldout", _bn(PointNet), randn(1, 3, 64)),
    Arch("fpn_bilinear_two_outputs", "heldout", FPNBilinear, randn(1, 3, 16, 16)),
    Arch("deconv_decoder_mish", "heldout", _bn(DeconvDecoder), randn(1, 8), constants=("alpha",)),
    Arch("resmlp_layerscale", "heldout", ResMLPLayerScale, randn(1, 8, 6)),
]



# --- second held-out set (family "heldout2": not in the default zoo, never tuned on) -------------
#
# Written after numdiff was measured (and fixed) on HELDOUT, to measure it again on kinds of model
# neither the zoo nor HELDOUT hold: GroupNorm feature encoders, a diffusion ResBlock with a
# timestep embedding, a Whisper-style stem with sinusoidal positions, Gemma's decoder details
# (RMSNorm with 1+w, GeGLU, tanh logit soft-capping, a tied embedding), reflect/replicate padding,
# pixel_unshuffle with nearest upsampling, MobileViT's unfold/fold, a CLIP head, DETR's learned
# queries, index-valued ops (topk, gather, cumsum, argmax) inside a float model, hardswish and
# hardsigmoid, a LayerNorm over two dimensions. Generated only when asked (``make_zoo.py
# --heldout2`` or ``--only NAME``), listed by ``make_zoo.py --list --heldout2``.


def _sinusoid(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Transformer sinusoidal features of ``positions`` (any float tensor): sin and cos halves."""
    freqs = torch.exp(-math.log(10000.0) * torch.arange(dim // 2, dtype=torch.float32) / (dim // 2))
    angles = positions.to(torch.float32)[..., None] * freqs
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


class Wav2Vec2Features(nn.Module):
    """wav2vec2's feature encoder: strided conv1d stack without bias, GroupNorm with one group per
    channel on the first layer, GELU; then a LayerNorm over (time, channels) and a projection."""

    def __init__(self) -> None:
        super().__init__()
        self.conv0 = nn.Conv1d(1, 16, 10, stride=5, bias=False)
        self.norm0 = nn.GroupNorm(16, 16)
        self.conv1 = nn.Conv1d(16, 16, 3, stride=2, bias=False)
        self.conv2 = nn.Conv1d(16, 16, 2, stride=2, bias=False)
        self.norm = nn.LayerNorm([9, 16])
        self.proj = nn.Linear(16, 12)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.norm0(self.conv0(wave)))
        y = F.gelu(self.conv2(F.gelu(self.conv1(y))))
        return self.proj(self.norm(y.transpose(1, 2)))


class DiffusionResBlock(nn.Module):
    """A DDPM/Stable-Diffusion U-Net ResBlock: GroupNorm, SiLU, 3x3 conv, a sinusoidal timestep
    embedding through an MLP added per channel, GroupNorm, SiLU, 3x3 conv, a 1x1 skip projection."""

    def __init__(self, cin: int = 8, cout: int = 16, tdim: int = 16) -> None:
        super().__init__()
        self.tdim = tdim
        self.time1 = nn.Linear(tdim, 32)
        self.time2 = nn.Linear(32, cout)
        self.norm1 = nn.GroupNorm(4, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        emb = self.time2(F.silu(self.time1(_sinusoid(t, self.tdim))))
        h = self.conv1(F.silu(self.norm1(x))) + emb[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


def diffusion_inputs(g: torch.Generator) -> Inputs:
    return torch.randn(1, 8, 8, 8, generator=g), torch.randint(1, 1000, (1,), generator=g).float()


class WhisperEncoder(nn.Module):
    """Whisper's audio encoder, small: conv1d + GELU, strided conv1d + GELU over mel frames, fixed
    sinusoidal positions added, a pre-LN attention block with a GELU MLP, a final LayerNorm."""

    def __init__(self, mels: int = 8, dim: int = 16, frames: int = 20, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.conv1 = nn.Conv1d(mels, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("positions", _sinusoid(torch.arange(frames // 2), dim))
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.ln_post = nn.LayerNorm(dim)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).permute(0, 2, 1) + self.positions
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.out(att.transpose(1, 2).reshape(b, t, d))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.ln_post(x)


class GemmaRMSNorm(nn.Module):
    """Gemma's RMSNorm: the weight is stored as an offset from one (x * (1 + w))."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(0.3 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


class GemmaTiny(nn.Module):
    """Gemma-style decoder layer: embedding scaled by sqrt(d), RMSNorm (1+w) before and after the
    attention and the MLP, causal multi-query attention, GeGLU (tanh GELU) MLP, a final norm, logits
    by the tied embedding, soft-capped with cap * tanh(logits / cap)."""

    def __init__(self, vocab: int = 48, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.in_norm = GemmaRMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * self.hd, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.post_att_norm = GemmaRMSNorm(dim)
        self.pre_mlp_norm = GemmaRMSNorm(dim)
        self.gate = nn.Linear(dim, 32, bias=False)
        self.up = nn.Linear(dim, 32, bias=False)
        self.down = nn.Linear(32, dim, bias=False)
        self.post_mlp_norm = GemmaRMSNorm(dim)
        self.final_norm = GemmaRMSNorm(dim)
        self.softcap = 8.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        x = self.embed(ids) * math.sqrt(self.embed.embedding_dim)
        h = self.in_norm(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 1, 2 * self.hd).transpose(1, 2).chunk(2, dim=-1)
        att = F.scaled_dot_product_attention(q, k.expand(b, self.heads, t, self.hd),
                                             v.expand(b, self.heads, t, self.hd), is_causal=True)
        x = x + self.post_att_norm(self.o(att.transpose(1, 2).reshape(b, t, -1)))
        h = self.pre_mlp_norm(x)
        x = x + self.post_mlp_norm(self.down(F.gelu(self.gate(h), approximate="tanh") * self.up(h)))
        logits = F.linear(self.final_norm(x), self.embed.weight)
        return self.softcap * torch.tanh(logits / self.softcap)


class PaddedConvs(nn.Module):
    """Convolutions with non-zero padding: reflection (as a module and as padding_mode), replication
    and circular; a hardsigmoid channel gate and hardswish activations."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = nn.ReflectionPad2d(2)
        self.conv1 = nn.Conv2d(3, 8, 5)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1, padding_mode="circular")
        self.gate = nn.Linear(8, 8)
        self.conv4 = nn.Conv2d(8, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.conv1(self.pad(x)))
        y = F.hardswish(self.conv3(self.conv2(y)))
        y = y * F.hardsigmoid(self.gate(y.mean(dim=(2, 3))))[:, :, None, None]
        return self.conv4(F.pad(y, (1, 1, 1, 1), mode="replicate"))


class UnshuffleNearest(nn.Module):
    """Space-to-depth by pixel_unshuffle, a conv at quarter resolution, nearest upsampling (by scale and
    by size) back to full size added to a full-resolution branch."""

    def __init__(self) -> None:
        super().__init__()
        self.full = nn.Conv2d(2, 6, 3, padding=1)
        self.low = nn.Conv2d(8, 12, 3, padding=1)
        self.lower = nn.Conv2d(12, 6, 1)
        self.out = nn.Conv2d(6, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = F.relu(self.low(F.pixel_unshuffle(x, 2)))
        lower = self.lower(F.max_pool2d(low, 2))
        up = F.interpolate(low[:, :6], scale_factor=2.0, mode="nearest")
        up = up + F.interpolate(lower, size=x.shape[-2:], mode="nearest")
        return self.out(F.relu(self.full(x) + up))


class MobileViTBlock(nn.Module):
    """MobileViT block: local 3x3 and 1x1 convs, unfold into 2x2 patches by reshape/permute, a
    transformer over the patches of each pixel position (LN, attention, SiLU MLP), fold back, a 1x1
    projection, concatenation with the input, a 3x3 fusion conv."""

    def __init__(self, c: int = 8, dim: int = 16, patch: int = 2, heads: int = 2) -> None:
        super().__init__()
        self.patch, self.heads = patch, heads
        self.local = nn.Conv2d(c, c, 3, padding=1)
        self.to_dim = nn.Conv2d(c, dim, 1, bias=False)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.back = nn.Conv2d(dim, c, 1)
        self.fuse = nn.Conv2d(2 * c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.to_dim(F.silu(self.local(x)))
        b, d, h, w = y.shape
        p = self.patch
        # (b, d, h/p, p, w/p, p) -> (b*p*p, patches, d)
        t = y.reshape(b, d, h // p, p, w // p, p).permute(0, 3, 5, 2, 4, 1).reshape(b * p * p, -1, d)
        n = t.shape[1]
        qkv = self.qkv(self.ln1(t)).reshape(b * p * p, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = ((qkv[0] @ qkv[1].transpose(-2, -1)) * (d // self.heads) ** -0.5).softmax(dim=-1) @ qkv[2]
        t = t + self.proj(att.transpose(1, 2).reshape(b * p * p, n, d))
        t = t + self.fc2(F.silu(self.fc1(self.ln2(t))))
        y = t.reshape(b, p, p, h // p, w // p, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
        return self.fuse(torch.cat([x, F.silu(self.back(y))], dim=1))


class CLIPHead(nn.Module):
    """CLIP's contrastive head: image and text features projected, L2-normalised (F.normalize), cosine
    similarities scaled by exp(logit_scale); logits per image and per text (two outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.image_proj = nn.Linear(12, 8, bias=False)
        self.text_proj = nn.Linear(10, 8, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, image: torch.Tensor, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i = F.normalize(self.image_proj(image), dim=-1)
        t = F.normalize(self.text_proj(text), dim=-1)
        logits = self.logit_scale.exp() * i @ t.t()
        return logits, logits.t()


class DETRDecoder(nn.Module):
    """DETR's head: a conv backbone flattened into memory plus learned positions, learned object
    queries through self-attention, cross-attention to the memory, an FFN (post-LN), a class head
    (softmax) and a box head (MLP, sigmoid): two outputs."""

    def __init__(self, dim: int = 16, queries: int = 5, heads: int = 2) -> None:
        super().__init__()
        self.backbone = nn.Conv2d(3, dim, 3, 2, 1)
        self.pos = nn.Parameter(0.1 * torch.randn(16, dim))
        self.query = nn.Parameter(torch.randn(queries, dim))
        self.self_att = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(dim)
        self.cross_att = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.norm3 = nn.LayerNorm(dim)
        self.cls = nn.Linear(dim, 4)
        self.box1 = nn.Linear(dim, dim)
        self.box2 = nn.Linear(dim, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mem = F.relu(self.backbone(x)).flatten(2).transpose(1, 2)
        q = self.query[None].expand(x.shape[0], -1, -1)
        q = self.norm1(q + self.self_att(q, q, q, need_weights=False)[0])
        q = self.norm2(q + self.cross_att(q, mem + self.pos, mem, need_weights=False)[0])
        q = self.norm3(q + self.fc2(F.relu(self.fc1(q))))
        return self.cls(q).softmax(dim=-1), torch.sigmoid(self.box2(F.relu(self.box1(q))))


class TopKRouter(nn.Module):
    """Index-valued ops inside a float model: a scorer picks the top-k tokens (topk), their features
    are gathered by index, accumulated along the sequence (cumsum), mixed by an MLP; the argmax of the
    pooled logits is a second (integer) output."""

    def __init__(self, dim: int = 12, k: int = 4) -> None:
        super().__init__()
        self.k = k
        self.embed = nn.Linear(6, dim)
        self.score = nn.Linear(dim, 1)
        self.mlp1 = nn.Linear(dim, 2 * dim)
        self.mlp2 = nn.Linear(2 * dim, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.embed(x))
        s = self.score(h).squeeze(-1)
        weights, idx = torch.topk(s, self.k, dim=1)
        picked = torch.gather(h, 1, idx[:, :, None].expand(-1, -1, h.shape[-1])) * torch.sigmoid(weights)[..., None]
        y = self.mlp2(F.relu(self.mlp1(torch.cumsum(picked, dim=1))))
        return y, torch.argmax(y.mean(dim=1), dim=-1)


HELDOUT2: list[Arch] = [
    Arch("wav2vec2_features", "heldout2", _bn(Wav2Vec2Features), randn(1, 1, 200)),
    Arch("diffusion_resblock", "heldout2", _bn(DiffusionResBlock), diffusion_inputs),
    Arch("whisper_encoder", "heldout2", lambda: _layer_norms(WhisperEncoder()), randn(1, 8, 20)),
    Arch("gemma_softcap_tied", "heldout2", GemmaTiny, tokens(48, 1, 7), constants=("softcap",)),
    Arch("padded_convs_hardswish", "heldout2", PaddedConvs, randn(1, 3, 10, 10)),
    Arch("unshuffle_nearest", "heldout2", UnshuffleNearest, randn(1, 2, 8, 8)),
    Arch("mobilevit_block", "heldout2", lambda: _layer_norms(MobileViTBlock()), randn(1, 8, 8, 8)),
    Arch("clip_head", "heldout2", CLIPHead,
         lambda g: (torch.randn(3, 12, generator=g), torch.randn(4, 10, generator=g))),
    Arch("detr_queries", "heldout2", lambda: _layer_norms(DETRDecoder()), randn(1, 3, 8, 8)),
    Arch("topk_gather_cumsum", "heldout2", TopKRouter, randn(2, 8, 6)),
]

#: The families generated only when asked (``make_zoo.py --realsize``/``--heldout``/``--heldout2``), by name.
EXTRA_FAMILIES: dict[str, list[Arch]] = {"realsize": REALSIZE, "heldout": HELDOUT, "heldout2": HELDOUT2}


def arch(name: str) -> Arch:
    """The architecture called ``name``, in the default zoo or in one of :data:`EXTRA_FAMILIES`."""
    return next(a for a in ARCHS + [a for f in EXTRA_FAMILIES.values() for a in f] if a.name == name)
