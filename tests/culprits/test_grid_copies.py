"""Rows that copy a dequantized value are judged on its grid (numdiff.culprits._replay, _noise.COPYING_OPS).

The real-size zoo's Llama on int8 XNNPACK, run on other inputs than its representative ones, logged a
delegate output that is ``dequantize → repeat_interleave → transpose`` of an int8 key. Its row was
judged with floating-point noise only, and a one-step rounding flip inside the delegate became a
``suspicious`` culprit at 167 noise units (47 dB local); the same value judged at the dequantize is 0.5
units. Copies of a grid's elements lie on that grid: the row takes the grid's step.
"""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

from numdiff.culprits._noise import Noise
from numdiff.culprits._replay import ReplayInterpreter

_QD = torch.ops.quantized_decomposed


def _row_noise(*tail: tuple[object, tuple[object, ...]], scales: tuple[float, ...] = (0.1,)) -> Noise:
    """Replay ``x → (q → dq per scale) → tail`` with the last node paired; the Noise it is judged with."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    dequantized = []
    for scale in scales:
        q = graph.call_function(_QD.quantize_per_tensor.default, (x, scale, 0, -128, 127, torch.int8))
        dequantized.append(graph.call_function(_QD.dequantize_per_tensor.default, (q, scale, 0, -128, 127, torch.int8)))
    value: object = dequantized[0] if len(dequantized) == 1 else dequantized
    for op, extra in tail:
        value = graph.call_function(op, (value, *extra))
    assert isinstance(value, torch.fx.Node)
    graph.output(value)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    seen: list[Noise] = []

    def on_paired(node: torch.fx.Node, result: object, args: object, kwargs: object, noise: Noise) -> object:
        seen.append(noise)
        return result

    ReplayInterpreter(module, {value.name}, on_paired).run(torch.randn(4, 6))
    assert len(seen) == 1
    return seen[0]


def test_a_transposed_repeated_dequantized_value_keeps_the_grids_step() -> None:
    aten = torch.ops.aten
    noise = _row_noise((aten.repeat_interleave.self_int, (2, 0)), (aten.transpose.int, (0, 1)))
    assert noise.quant_step == 0.1 and noise.zero_point == 0.0
    assert noise.quantized(torch.float32)


def test_ops_that_compute_new_values_leave_the_grid() -> None:
    aten = torch.ops.aten
    assert _row_noise((aten.mean.dim, ([1],))).quant_step is None
    assert _row_noise((aten.mul.Tensor, (3.0,))).quant_step is None
    assert _row_noise((aten.transpose.int, (0, 1)), (aten.sigmoid.default, ())).quant_step is None


def test_a_cat_keeps_a_grid_only_when_every_part_lies_on_it() -> None:
    aten = torch.ops.aten
    assert _row_noise((aten.cat.default, (0,)), scales=(0.1, 0.1)).quant_step == 0.1
    assert _row_noise((aten.cat.default, (0,)), scales=(0.1, 0.2)).quant_step is None
