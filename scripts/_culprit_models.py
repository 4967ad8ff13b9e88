"""Models with one (or two) planted culprits, for ``scripts/make_culprit_fixtures.py`` (oracle venv).

Each spec builds a correct model and a *twin* of the same architecture in which one op computes
something else (weights, bias, a quantization scale or an activation constant changed). The
ETRecord comes from the correct model, the program that runs on the runtime from the twin, so the
runtime genuinely computes a different value at exactly the planted op.

Stack traces recorded in the fixtures point into this file: keep edits deliberate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn


class MLP3(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        return self.fc3(h)


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        return self.fc(y.mean(dim=(2, 3)))


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.branch1 = nn.Linear(16, 16)
        self.branch2 = nn.Linear(16, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        b = self.branch2(torch.relu(self.branch1(h)))
        return self.out(torch.relu(h + b))


class TwoBranches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(8, 8)
        self.right = nn.Linear(8, 8)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.sigmoid(self.left(x))
        b = torch.tanh(self.right(x))
        return self.head(torch.cat([a, b], dim=-1))


class SharpSoftmax(nn.Module):
    """Large logits (bias ~20) into a softmax: a small relative error of the logits is a small
    absolute one for proj (high SNR there) but a large relative one after the softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.proj(x) * 3.0
        return self.head(torch.softmax(logits, dim=-1))


def sharp_softmax() -> SharpSoftmax:
    model = SharpSoftmax()
    with torch.no_grad():
        model.proj.bias.add_(20.0)
    return model.eval()


class Attention(nn.Module):
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


class ClampMLP(nn.Module):
    """An activation with a constant (clamp bounds) the twin changes: same graph structure."""

    def __init__(self, low: float = -0.5, high: float = 0.5) -> None:
        super().__init__()
        self.low, self.high = low, high
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.clamp(self.fc1(x), self.low, self.high))


class QuantMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.sigmoid(self.fc2(h))
        return self.fc3(h)


class _InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand + relu6, 3x3 depthwise + relu6, 1x1 projection (+ input)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int = 4) -> None:
        super().__init__()
        hidden = cin * expand
        self.expand = nn.Conv2d(cin, hidden, 1)
        self.dw = nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden)
        self.project = nn.Conv2d(hidden, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(torch.nn.functional.relu6(self.dw(torch.nn.functional.relu6(self.expand(x)))))
        return x + y if self.residual else y


class MobileBlocks(nn.Module):
    """A small MobileNetV2: 3x3 stride-2 stem + relu6, three inverted residuals (depthwise 3x3)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.blocks = nn.Sequential(_InvertedResidual(8, 8, 1), _InvertedResidual(8, 12, 2), _InvertedResidual(12, 12, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(torch.nn.functional.relu6(self.stem(x)))


class TokenMeanHead(nn.Module):
    """Linear stem, mean over the tokens, linear head (ResMLP's and ViT's pooling): XNNPACK's int8 mean of 8
    tokens keeps its input's grid, so an eighth of its values land exactly on half-steps, which it rounds
    its own way."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 12)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stem(x).mean(dim=1))


class QueryCrossAttention(nn.Module):
    """DETR's head, small: a strided conv backbone flattened into memory plus learned positions, learned
    queries attending to it (nn.MultiheadAttention), a class head. Dynamically quantized for XNNPACK, the
    key projection runs in a portable addmm after a portable choose_qparams on the backbone's ReLU'd
    output, whose zero point is the same for any input."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Conv2d(3, 16, 3, 2, 1)
        self.pos = nn.Parameter(0.1 * torch.randn(16, 16))
        self.query = nn.Parameter(torch.randn(5, 16))
        self.cross_att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.cls = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mem = torch.relu(self.backbone(x)).flatten(2).transpose(1, 2)
        q = self.query[None].expand(x.shape[0], -1, -1)
        return self.cls(q + self.cross_att(q, mem + self.pos, mem, need_weights=False)[0])


class SplitMLP(nn.Module):
    """Two XNNPACK partitions: cumsum is not delegated."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(torch.relu(self.fc1(x)))
        return self.fc3(torch.cumsum(h, dim=-1))


# --- plants: each changes the twin in place and names the planted module(s) ----------------------


def bump_weight(path: str, amount: float, rows: int | None = None) -> Callable[[nn.Module], None]:
    def plant(model: nn.Module) -> None:
        module = model.get_submodule(path)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(99)
            w = module.weight  # type: ignore[union-attr]
            noise = torch.randn(w.shape, generator=gen) * amount
            if rows is not None:
                noise[rows:] = 0
            w.add_(noise)

    return plant


def bump_bias(path: str, amount: float) -> Callable[[nn.Module], None]:
    def plant(model: nn.Module) -> None:
        module = model.get_submodule(path)
        with torch.no_grad():
            module.bias.add_(amount)  # type: ignore[union-attr]

    return plant


def jitter_bias(path: str, amount: float) -> Callable[[nn.Module], None]:
    def plant(model: nn.Module) -> None:
        module = model.get_submodule(path)
        with torch.no_grad():
            bias = module.bias  # type: ignore[union-attr]
            bias.add_(torch.randn(bias.shape, generator=torch.Generator().manual_seed(7)) * amount)

    return plant


def both(*plants: Callable[[nn.Module], None]) -> Callable[[nn.Module], None]:
    def plant(model: nn.Module) -> None:
        for p in plants:
            p(model)

    return plant


def set_attrs(**values: Any) -> Callable[[nn.Module], None]:
    def plant(model: nn.Module) -> None:
        for k, v in values.items():
            setattr(model, k, v)

    return plant


def nothing(model: nn.Module) -> None:
    """Clean model: the twin is the model."""


def conv_bn() -> ConvBN:
    model = ConvBN()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


class InputReaders(nn.Module):
    """Graph input ``x`` read by several ops the runtime logs: a layer_norm on the raw input (its
    portable kernel ``native_layer_norm.out`` logs ``[out, mean, rstd]``) and a residual add."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(self.ln(x)))
        return self.fc2(h + x)


def input_readers() -> InputReaders:
    model = InputReaders()
    with torch.no_grad():
        model.ln.weight.uniform_(0.5, 1.5)
        model.ln.bias.uniform_(-0.2, 0.2)
    return model.eval()


@dataclass(frozen=True)
class CulpritSpec:
    """One known-truth fixture.

    ``planted`` names the planted op(s): a module path (its call_function nodes in the ATen graph
    are the planted op) or ``"quant:<module path>"`` for the quantize node right after that module.
    """

    name: str
    description: str
    make_model: Callable[[], nn.Module]
    plant: Callable[[nn.Module], None]
    planted: tuple[str, ...]
    input_shape: tuple[int, ...]
    #: portable | xnnpack | quant_portable | quant_xnnpack | quantdyn_xnnpack (dynamic activations,
    #: per-channel weights)
    lowering: str = "portable"
    scale_factor: float | None = None  # quant: multiply the planted quantize node's scale
    #: The run's input is the representative one plus Gaussian noise of this relative RMS (0: the same):
    #: a device that decodes or resizes its input slightly differently. Saved as run_inputs.pt.
    run_noise: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class _ShuffleUnit(nn.Module):
    """ShuffleNet v1's unit: grouped 1x1 + relu, channel shuffle, depthwise 3x3, grouped 1x1; stride 2
    concatenates an average-pooled shortcut, stride 1 adds the input."""

    def __init__(self, c: int, stride: int, groups: int = 3) -> None:
        super().__init__()
        self.stride, self.groups = stride, groups
        self.gconv1 = nn.Conv2d(c, c, 1, groups=groups)
        self.dw = nn.Conv2d(c, c, 3, stride, 1, groups=c)
        self.gconv2 = nn.Conv2d(c, c, 1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.gconv1(x))
        n, c, h, w = y.shape
        y = y.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)
        y = self.gconv2(self.dw(y))
        if self.stride == 2:
            return torch.relu(torch.cat([torch.nn.functional.avg_pool2d(x, 3, 2, 1), y], dim=1))
        return torch.relu(x + y)


class ShuffleBlocks(nn.Module):
    """A small ShuffleNet: 3x3 stem + relu, a stride-2 and a stride-1 unit (three groups)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 3, padding=1)
        self.down = _ShuffleUnit(12, 2)
        self.unit = _ShuffleUnit(24, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.unit(self.down(torch.relu(self.stem(x))))


class GeluProjection(nn.Module):
    """GPT-2's MLP activation after a linear: ``gelu(fc(x))``, the tanh approximation or the exact GELU."""

    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.act = nn.GELU(approximate=approximate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


SPECS: list[CulpritSpec] = [
    CulpritSpec("culprit_mlp", "fp32 MLP fc1-relu-fc2-tanh-fc3, portable; twin: fc2 weights + N(0, 0.05)",
                MLP3, bump_weight("fc2", 0.05), ("fc2",), (2, 8)),
    CulpritSpec("culprit_cnn_bn", "fp32 conv-BN-relu-conv-BN-relu-mean-linear, portable; twin: bn2 bias + 0.3",
                conv_bn, bump_bias("bn2", 0.3), ("bn2",), (1, 3, 6, 6)),
    CulpritSpec("culprit_residual", "fp32 residual block h + branch2(relu(branch1(h))), portable; "
                "twin: branch2 (inside the branch) weights + N(0, 0.05)",
                Residual, bump_weight("branch2", 0.05), ("branch2",), (2, 8)),
    CulpritSpec("culprit_two", "fp32 two parallel branches (sigmoid(left), tanh(right)) -> cat -> head, portable; "
                "twin: left bias + 0.2 and right weights + N(0, 0.1)",
                TwoBranches, both(bump_bias("left", 0.2), bump_weight("right", 0.1)), ("left", "right"), (2, 8)),
    CulpritSpec("culprit_softmax", "fp32 proj (bias ~20) -> x3 -> softmax -> head, portable; twin: proj bias + "
                "N(0, 0.03) (high SNR at proj, amplified by the softmax)",
                sharp_softmax, jitter_bias("proj", 0.03), ("proj",), (2, 16)),
    CulpritSpec("culprit_attention", "fp32 2-head self-attention (qkv, chunk, bmm, softmax, proj), portable; "
                "twin: proj weights + N(0, 0.05)",
                Attention, bump_weight("proj", 0.05), ("proj",), (1, 4, 16)),
    CulpritSpec("culprit_activation", "fp32 fc1 -> clamp(-0.5, 0.5) -> fc2, portable; twin: clamp(-0.5, 0.3)",
                ClampMLP, set_attrs(high=0.3), ("clamp",), (2, 8)),
    CulpritSpec("culprit_int8_scale", "PT2E int8 (XNNPACKQuantizer per-tensor) QuantMLP on the portable + "
                "quantized kernels; twin: the quantize after fc2 uses 1.25x its scale",
                QuantMLP, nothing, ("quant:fc2",), (2, 8), lowering="quant_portable", scale_factor=1.25),
    CulpritSpec("culprit_xnnpack", "fp32 fc1-relu-fc2 | cumsum | fc3 with XnnpackPartitioner (two delegate "
                "partitions); twin: fc3 weights + N(0, 0.05)",
                SplitMLP, bump_weight("fc3", 0.05), ("fc3",), (2, 8), lowering="xnnpack"),
    CulpritSpec("culprit_clean_fp32", "clean fp32 MLP (twin = model), portable", MLP3, nothing, (), (2, 8)),
    CulpritSpec("culprit_clean_input_readers", "clean fp32 layer_norm(x) -> fc1 -> relu, + x (residual on the "
                "graph input) -> fc2, portable (twin = model)", input_readers, nothing, (), (2, 4, 16)),
    CulpritSpec("culprit_input_readers", "fp32 layer_norm(x) -> fc1 -> relu, + x -> fc2, portable; twin: ln "
                "bias + N(0, 0.05) (the planted op reads the graph input)",
                input_readers, jitter_bias("ln", 0.05), ("ln",), (2, 4, 16)),
    CulpritSpec("culprit_near_inputs", "clean fp32 layer_norm(x) -> fc1 -> relu, + x -> fc2, portable, run on "
                "the representative input plus 1% noise (two ops read the graph input; twin = model)",
                input_readers, nothing, (), (2, 4, 16), run_noise=0.01),
    CulpritSpec("culprit_near_inputs_one_reader", "clean fp32 MLP fc1-relu-fc2-tanh-fc3, portable, run on the "
                "representative input plus 1% noise (only fc1 reads the graph input; twin = model)",
                MLP3, nothing, (), (2, 8), run_noise=0.01),
    CulpritSpec("culprit_clean_int8", "clean PT2E int8 QuantMLP with XnnpackPartitioner (twin = model)",
                QuantMLP, nothing, (), (2, 8), lowering="quant_xnnpack"),
    CulpritSpec("culprit_clean_int8_portable", "clean PT2E int8 QuantMLP on the portable + quantized kernels",
                QuantMLP, nothing, (), (2, 8), lowering="quant_portable"),
    CulpritSpec("culprit_clean_int8_depthwise", "clean PT2E int8 MobileBlocks (depthwise convs, relu6, residual "
                "adds) with XnnpackPartitioner (twin = model): XNNPACK adds each bias as int32",
                MobileBlocks, nothing, (), (1, 3, 24, 24), lowering="quant_xnnpack"),
    CulpritSpec("culprit_clean_int8_mean_ties", "clean PT2E int8 TokenMeanHead (linear, mean over 8 tokens, linear) "
                "with XnnpackPartitioner (twin = model): XNNPACK's int8 mean rounds values on half-steps its own way",
                TokenMeanHead, nothing, (), (4, 8, 6), lowering="quant_xnnpack"),
    CulpritSpec("culprit_clean_int8dyn_grouped", "clean PT2E dynamic int8 ShuffleBlocks (grouped 1x1 convs after "
                "depthwise convs, channel shuffle) with XnnpackPartitioner (twin = model): XNNPACK quantizes a "
                "grouped 1x1 convolution's input per image", ShuffleBlocks, nothing, (), (1, 3, 12, 12),
                lowering="quantdyn_xnnpack"),
    CulpritSpec("culprit_other_input_int8dyn_queries", "clean PT2E dynamic int8 QueryCrossAttention with "
                "XnnpackPartitioner, run on another input (representative + 100% noise; twin = model): a portable "
                "choose_qparams of ReLU'd values keeps its zero point on any input", QueryCrossAttention, nothing,
                (), (1, 3, 8, 8), lowering="quantdyn_xnnpack", run_noise=1.0),
    CulpritSpec("culprit_xnnpack_gelu_tanh", "clean fp32 linear -> GELU(approximate='tanh') with XnnpackPartitioner "
                "(twin = model): XNNPACK computes the tanh approximation as the exact GELU, so the device deviates "
                "at the GELU (the 'planted' op is that device deviation)",
                lambda: GeluProjection("tanh"), nothing, ("act",), (2, 4, 16), lowering="xnnpack"),
    CulpritSpec("culprit_clean_xnnpack_gelu", "clean fp32 linear -> GELU (exact) with XnnpackPartitioner "
                "(twin = model)", lambda: GeluProjection("none"), nothing, (), (2, 4, 16), lowering="xnnpack"),
]
