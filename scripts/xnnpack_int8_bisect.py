"""What int8 XNNPACK computes otherwise than its PT2E graph, layer by layer (oracle virtualenv, dev only).

    /root/.cache/numdiff-oracle/bin/python scripts/xnnpack_int8_bisect.py mobilenet_v2_96 1 8 17 18
    /root/.cache/numdiff-oracle/bin/python scripts/xnnpack_int8_bisect.py resnet18_112 2 8 9

Exports the first K blocks of a real-size zoo architecture (scripts/_zoo_models.py; K past the last
block adds the head), quantizes it as the zoo does (scripts/make_zoo.py: per-tensor static int8),
lowers it to one XNNPACK delegate, runs it, and compares the runtime's output with the converted
PT2E graph run in eager PyTorch, rewritten step by step into what XNNPACK computes:

1. ``graph``: as written (float bias; a clamp left between two requantizations rounds twice);
2. ``fused clamp``: conv → q → dq → relu6 → q rounds once (numdiff: ``_xnnpack.fused_clamp``);
3. ``int32 bias``: the bias rounded onto input scale × weight scale (``_xnnpack.integer_bias``);
4. ``fp64 convs``: the convolutions and linears accumulated in float64 (what is left is float32
   ties of the graph's own arithmetic);
5. ``exact conv + add``: XNNPACK's int32 accumulation with its float32 requantization scale
   (``in * w / out``, product in float32, round half to even) and its scalar int8 add (20-bit
   fixed-point multipliers, ``>> shift`` rounding half up). Not in numdiff (see README).

Prints per step how many output elements are off by how many output steps. Findings (x86, ExecuTorch
1.5.1), elements off / max steps:

    MobileNetV2 K=1    16590/36864 / 4, fused clamp 531 / 1, int32 bias 0
    MobileNetV2 K=17   2811/2880 / 84, fused clamp 2767 / 73, int32 bias 659 / 2, fp64 convs 0
    MobileNetV2 K=18   980/1000 / 54, ..., int32 bias 366 / 2, exact conv + add 266 / 1 (the mean)
    ResNet-18 K=2      7254/50176 / 4, int32 bias 614 / 3, fp64 convs 673 / 3, exact conv + add 0
    ResNet-18 K=8      4484/8192 / 23, int32 bias 3923 / 13, exact conv + add 0
    ResNet-18 K=9      671/1000 / 4, int32 bias 603 / 3, exact conv + add 119 / 1 (the mean)

MobileNetV2's ten adds agree with the graph; ResNet-18's add + relu do not (fixed point, a step
off near a tie, compounding); the global average pool (not emulated here) is what is left.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _zoo_models as zm  # noqa: E402
import make_zoo as mz  # noqa: E402

_Q = "quantized_decomposed.quantize_per_tensor"
_DQ = "quantized_decomposed.dequantize_per_tensor"


def _is(node: Any, name: str) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and name in str(node.target)


class Prefix(nn.Module):
    def __init__(self, model: nn.Module, k: int) -> None:
        super().__init__()
        self.m, self.k = model, k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m: Any = self.m
        if hasattr(m, "blocks"):  # MobileNetV2
            y = m.blocks[: self.k](F.relu6(m.stem(x)))
            if self.k > len(m.blocks):
                y = F.adaptive_avg_pool2d(F.relu6(m.head(y)), 1).flatten(1)
                return m.classifier(y)
            return y
        y = m.layers[: self.k](F.max_pool2d(F.relu(m.stem(x)), 3, 2, 1))  # ResNet-18
        return m.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)) if self.k > len(m.layers) else y


def fuse_clamps(g: torch.fx.Graph) -> None:
    for n in list(g.nodes):
        if _is(n, "relu6") and _is(n.args[0], _DQ) and _is(n.args[0].args[0], _Q):
            n.replace_input_with(n.args[0], n.args[0].args[0].args[0])


def _bias(n: torch.fx.Node) -> Any:
    return n.args[2] if len(n.args) > 2 else n.kwargs.get("bias")


def int32_bias(g: torch.fx.Graph) -> None:
    for n in list(g.nodes):
        if (_is(n, "conv2d") or _is(n, "linear")) and _bias(n) is not None:
            grid = float(n.args[1].args[1]) * float(n.args[0].args[1])
            with g.inserting_before(n):
                r = g.call_function(torch.round, (g.call_function(torch.mul, (_bias(n), 1.0 / grid)),))
                n.replace_input_with(_bias(n), g.call_function(torch.mul, (r, grid)))


def _conv64(x: torch.Tensor, w: torch.Tensor, b: Any = None, *a: Any, **k: Any) -> torch.Tensor:
    return F.conv2d(x.double(), w.double(), None if b is None else b.double(), *a, **k).float()


def _linear64(x: torch.Tensor, w: torch.Tensor, b: Any = None) -> torch.Tensor:
    return F.linear(x.double(), w.double(), None if b is None else b.double()).float()


def float64(g: torch.fx.Graph) -> None:
    for n in g.nodes:
        if _is(n, "conv2d"):
            n.target = _conv64
        elif _is(n, "linear"):
            n.target = _linear64


def _f32(v: float) -> Any:
    return np.float32(v)


def _xnn_conv(x: torch.Tensor, w: torch.Tensor, b: Any, conv: dict[str, Any], s_in: float, s_w: float,
              s_out: float, zp_out: int, lo: int, hi: int) -> torch.Tensor:
    acc = F.conv2d(torch.round(x.double() / s_in), torch.round(w.double() / s_w), None, **conv)
    if b is not None:
        acc = acc + torch.round(b.float() * (1.0 / (s_w * s_in))).double().view(1, -1, 1, 1)
    scale = _f32(_f32(_f32(s_in) * _f32(s_w)) / _f32(s_out))
    y = torch.from_numpy(acc.numpy().astype(np.float32) * scale)
    return (torch.round(y) + zp_out).clamp(lo, hi).to(torch.int8)


def _xnn_add(a: torch.Tensor, b: torch.Tensor, sa: float, sb: float, s_out: float, zp_out: int,
             lo: int, hi: int) -> torch.Tensor:
    ra, rb = _f32(_f32(sa) / _f32(s_out)), _f32(_f32(sb) / _f32(s_out))
    shift = 20 - (int(np.array(max(ra, rb), dtype=np.float32).view(np.uint32) >> 23) - 127)
    am, bm = (int(np.rint(r * _f32(2.0**shift))) for r in (ra, rb))
    acc = torch.round(a.double() / sa).long() * am + torch.round(b.double() / sb).long() * bm + (1 << (shift - 1))
    return ((acc >> shift) + zp_out).clamp(lo, hi).to(torch.int8)


def exact_conv_add(g: torch.fx.Graph) -> None:
    """Replace each ``conv|add [→ relu|relu6] → quantize`` by what XNNPACK computes (int8 out)."""
    for q in list(g.nodes):
        if not _is(q, _Q) or _is(q, "dequantize"):
            continue
        src, s_out, zp_out, lo, hi = q.args[0], q.args[1], q.args[2], q.args[3], q.args[4]
        if _is(src, "relu"):
            lo = max(lo, zp_out)
            if _is(src, "relu6"):
                hi = min(hi, int(np.rint(_f32(6.0) / _f32(s_out))) + zp_out)
            src = src.args[0]
        with g.inserting_before(q):
            if _is(src, "conv2d"):
                a = list(src.args) + [None] * 7
                conv = {"stride": a[3] or src.kwargs.get("stride", 1), "padding": a[4] or src.kwargs.get("padding", 0),
                        "dilation": a[5] or src.kwargs.get("dilation", 1), "groups": a[6] or src.kwargs.get("groups", 1)}
                new = g.call_function(_xnn_conv, (src.args[0], src.args[1], _bias(src), conv, src.args[0].args[1],
                                                  src.args[1].args[1], s_out, zp_out, lo, hi))
            elif _is(src, "aten.add"):
                new = g.call_function(_xnn_add, (src.args[0], src.args[1], src.args[0].args[1], src.args[1].args[1],
                                                 s_out, zp_out, lo, hi))
            else:
                continue
        q.replace_all_uses_with(new)


def main(argv: list[str]) -> int:
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    arch = zm.arch(argv[0])
    torch.manual_seed(mz._seed(arch.name))
    model = arch.make().eval()
    gen = torch.Generator().manual_seed(mz._seed(arch.name, "inputs"))
    example = arch.inputs(gen)
    calibration = [example] + [arch.inputs(gen) for _ in range(8)]
    for k in (int(a) for a in argv[1:]):
        ref = mz._converted(Prefix(model, k).eval(), example, calibration, "int8_xnnpack")
        lowered = mz._lower_graph(ref, example, "int8_xnnpack")  # the program must outlive the module reading it
        got = _load_for_executorch_from_buffer(lowered.buffer).run_method("forward", example)[0]
        step = [n.args[1] for n in ref.graph.nodes if _is(n, _DQ)][-1]
        for name, rewrite in (("graph", None), ("fused clamp", fuse_clamps), ("int32 bias", int32_bias),
                              ("fp64 convs", float64)):
            if rewrite is not None:
                rewrite(ref.graph)
                ref.graph.eliminate_dead_code()
                ref.recompile()
            off = ((ref(*example) - got).double() / step).round().abs()
            print(f"K={k} {name}: {int((off > 0).sum())}/{off.numel()} elements off, max {int(off.max())} steps",
                  flush=True)
        ref = mz._converted(Prefix(model, k).eval(), example, calibration, "int8_xnnpack")
        fuse_clamps(ref.graph)
        exact_conv_add(ref.graph)
        ref.graph.eliminate_dead_code()
        ref.recompile()
        off = ((ref(*example) - got).double() / step).round().abs()
        print(f"K={k} exact conv + add: {int((off > 0).sum())}/{off.numel()} elements off, max {int(off.max())} steps",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
