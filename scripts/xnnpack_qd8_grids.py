"""Which elements XNNPACK quantizes with one grid for a dynamically quantized convolution (oracle venv, dev only).

    /root/.cache/numdiff-oracle/bin/python scripts/xnnpack_qd8_grids.py

Exports one convolution per configuration (and the zoo's ShuffleNet body), quantizes it as the zoo's
``int8dyn_xnnpack`` does (scripts/make_zoo.py: dynamic int8 activations, per-channel int8 weights),
lowers it to XNNPACK, runs it, and compares the runtime's output with the PT2E graph run in eager
PyTorch with each ``choose_qparams → quantize → dequantize`` replaced by XNNPACK's own quantization
(numdiff/culprits/_qd8.py's rule: range including 0, ``255 / span`` in float32, the zero point from
the end with less error, half to even) on one grid per image or per pixel (channels of one pixel).

Findings (x86 with AVX512-VNNI, ExecuTorch 1.5.1; largest |emulated - runtime|):

    1x1, stride 1, unpadded, ungrouped     per image 0.01    per pixel 2e-07  (run as a fully connected layer)
    1x1 grouped (3 groups)                 per image 2e-07   per pixel 0.02
    1x1 stride 2                           per image 1e-07   per pixel 0.01
    1x1 padded                             per image 2e-07   per pixel 0.02
    3x3                                    per image 4e-07   per pixel 0.02
    3x3 grouped (3 groups)                 per image 4e-07   per pixel 0.01
    3x3, two images (ranges 1 and 5)       per image 3e-06   per tensor 0.06
    ShuffleNet body (2 units, 1 delegate)  per image 1e-07   per pixel 0.005

(A Conv1d is not quantized dynamically: every grid gives the same output.)

XNNPACK's profile names the grouped and 3x3 ones ``Convolution (NHWC, QDU8, F32, QC8W) IGEMM``: the
input converted to uint8 (``Convert (NC, F32, QDU8)``: the int8 parameters, zero point + 128; the
same real values), one set of parameters per image (ExecuTorch declares the input with three
non-batch dimensions), int32 sums, ``float(acc) * input scale`` then a fused multiply-add with the
weight's channel scale and the float bias. The quantizer leaves depthwise convolutions (and the ones
followed by a relu in the ShuffleNet unit) in float32 (``Convolution (NHWC, F32) DWConv``).

numdiff picked the grid right but read the convolution's stride, padding and groups positionally
only; a deserialized ETRecord's graph passes them by name, so it took every grouped 1x1 convolution
for a pointwise one (per pixel: 50 dB from the runtime; culprit_clean_int8dyn_grouped, test_qd8.py).
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _zoo_models as zm  # noqa: E402
import make_zoo as mz  # noqa: E402

PER_IMAGE, PER_PIXEL, PER_TENSOR = (1, 2, 3), (1,), (0, 1, 2, 3)


def _xnnpack_qd8(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """XNNPACK's dynamic quantization of ``x`` (one grid over ``dims``), dequantized."""
    x = x.float()
    low = torch.clamp(x.amin(dim=dims, keepdim=True), max=0.0)
    high = torch.clamp(x.amax(dim=dims, keepdim=True), min=0.0)
    span = high - low
    inv = torch.where(span == 0, torch.ones_like(span), 255.0 / span)
    below, above = low * inv, high * inv
    zero = torch.round(torch.where((below - 128) + (above + 127) > 0, -128 - below, 127 - above).clamp(-128, 127))
    q = (torch.round(x * inv) + zero).clamp(-128, 127)
    return (q - zero) * torch.reciprocal(inv)


def _emulated(graph_module: torch.fx.GraphModule, dims: tuple[int, ...]) -> torch.fx.GraphModule:
    """``graph_module`` with each dynamic quantize → dequantize replaced by XNNPACK's (linears: per row)."""
    graph = graph_module.graph
    for n in list(graph.nodes):
        if n.op != "call_function" or "quantize_per_tensor.tensor" not in str(n.target) or "dequantize" in str(n.target):
            continue
        for dq in list(n.users):
            linear = any("linear" in str(c.target) for c in dq.users)
            with graph.inserting_before(dq):
                new = graph.call_function(_xnnpack_qd8, (n.args[0], (-1,) if linear else dims))
            dq.replace_all_uses_with(new)
    graph.eliminate_dead_code()
    graph_module.recompile()
    return graph_module


class _Conv(nn.Module):
    def __init__(self, kernel: int, stride: int = 1, padding: int = 0, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(12, 12, kernel, stride, padding, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class _ShuffleBody(nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.m = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m.unit(self.m.down(F.relu(self.m.stem(x))))


def _compare(name: str, model: nn.Module, x: torch.Tensor, calibration: list[torch.Tensor],
             grids: tuple[tuple[str, tuple[int, ...]], ...] = (("per image", PER_IMAGE), ("per pixel", PER_PIXEL))) -> None:
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    def converted() -> torch.fx.GraphModule:
        return mz._converted(model.eval(), (x,), [(x,)] + [(c,) for c in calibration], "int8dyn_xnnpack")

    lowered = mz._lower_graph(converted(), (x,), "int8dyn_xnnpack")  # the program outlives the module reading it
    got = _load_for_executorch_from_buffer(lowered.buffer).run_method("forward", (x,))[0]
    parts = []
    for grid, dims in grids:
        off = (_emulated(converted(), dims)(x) - got).abs().max()
        parts.append(f"{grid} {float(off):<8.1g}")
    print(f"{name:38s} " + "  ".join(parts), flush=True)


def main() -> int:
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(1, 12, 6, 6)
    calibration = [torch.randn(1, 12, 6, 6) for _ in range(3)]
    for name, model in (("1x1, stride 1, unpadded, ungrouped", _Conv(1)), ("1x1 grouped (3 groups)", _Conv(1, groups=3)),
                        ("1x1 stride 2", _Conv(1, stride=2)), ("1x1 padded", _Conv(1, padding=1)),
                        ("3x3", _Conv(3, padding=1)), ("3x3 grouped (3 groups)", _Conv(3, padding=1, groups=3))):
        _compare(name, model, x, calibration)
    two = torch.randn(2, 12, 6, 6) * torch.tensor([1.0, 5.0]).view(2, 1, 1, 1)  # two images of different ranges
    _compare("3x3, two images (ranges 1 and 5)", _Conv(3, padding=1), two, [torch.randn(2, 12, 6, 6)],
             (("per image", PER_IMAGE), ("per tensor", PER_TENSOR)))
    arch = zm.arch("shufflenet_unit")
    torch.manual_seed(mz._seed(arch.name))
    model = arch.make().eval()
    gen = torch.Generator().manual_seed(mz._seed(arch.name, "inputs"))
    (example,) = arch.inputs(gen)
    _compare("ShuffleNet body (2 units, 1 delegate)", _ShuffleBody(model), example,
             [arch.inputs(gen)[0] for _ in range(8)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
