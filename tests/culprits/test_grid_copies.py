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


def _row_noise(*tail: tuple[object, tuple[object, ...]], scales: tuple[float, ...] = (0.1,), zero_point: int = 0,
               shape: tuple[int, ...] = (4, 6), seen: list[tuple[Noise, torch.Tensor]] | None = None) -> Noise:
    """Replay ``x → (q → dq per scale) → tail`` with the last node paired; the Noise it is judged with."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    dequantized = []
    for scale in scales:
        q = graph.call_function(_QD.quantize_per_tensor.default, (x, scale, zero_point, -128, 127, torch.int8))
        dequantized.append(graph.call_function(_QD.dequantize_per_tensor.default,
                                               (q, scale, zero_point, -128, 127, torch.int8)))
    value: object = dequantized[0] if len(dequantized) == 1 else dequantized
    for op, extra in tail:
        value = graph.call_function(op, (value, *extra))
    assert isinstance(value, torch.fx.Node)
    graph.output(value)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    judged: list[tuple[Noise, torch.Tensor]] = [] if seen is None else seen

    def on_paired(node: torch.fx.Node, result: object, args: object, kwargs: object, noise: Noise) -> object:
        assert isinstance(result, torch.Tensor)
        judged.append((noise, result))
        return result

    ReplayInterpreter(module, {value.name}, on_paired).run(torch.randn(shape))
    assert len(judged) == 1
    return judged[0][0]


def test_a_transposed_repeated_dequantized_value_keeps_the_grids_step() -> None:
    aten = torch.ops.aten
    noise = _row_noise((aten.repeat_interleave.self_int, (2, 0)), (aten.transpose.int, (0, 1)))
    assert noise.quant_step == 0.1 and noise.zero_point is None  # the row's value is the dequantized one
    assert noise.quantized(torch.float32)


def test_a_one_step_flip_in_a_copy_is_within_noise_on_the_grid_and_far_beyond_it_in_float() -> None:
    """What the Llama row showed: one element a step off. On the grid it is a fraction of a noise unit."""
    from dataclasses import replace

    from numdiff.culprits._measure import noise_units

    aten = torch.ops.aten
    seen: list[tuple[Noise, torch.Tensor]] = []
    noise = _row_noise((aten.transpose.int, (0, 1)), shape=(64, 64), seen=seen)
    replay = seen[0][1].contiguous()
    runtime = replay.contiguous().clone()
    runtime.view(-1)[7] += 0.1  # one rounding the other way
    on_grid = noise_units(replay, runtime, noise)[0]
    in_float = noise_units(replay, runtime, replace(noise, quant_step=None))[0]
    assert on_grid < 0.1 < 1000 < in_float


def test_ops_that_compute_new_values_leave_the_grid() -> None:
    aten = torch.ops.aten
    assert _row_noise((aten.mean.dim, ([1],))).quant_step is None
    assert _row_noise((aten.mul.Tensor, (3.0,))).quant_step is None
    assert _row_noise((aten.transpose.int, (0, 1)), (aten.sigmoid.default, ())).quant_step is None


def test_selections_keep_the_grid_but_a_max_pools_indices_do_not() -> None:
    aten = torch.ops.aten
    import operator

    assert _row_noise((aten.split.Tensor, (2, 1)), (operator.getitem, (1,))).quant_step == 0.1
    assert _row_noise((aten.relu.default, ()), zero_point=7).quant_step == 0.1  # 0 is the zero point's value
    pooled = ((aten.max_pool2d_with_indices.default, ([2, 2],)),)
    assert _row_noise(*pooled, (operator.getitem, (0,)), shape=(1, 4, 6)).quant_step == 0.1
    assert _row_noise(*pooled, (operator.getitem, (1,)), shape=(1, 4, 6)).quant_step is None


def test_a_dynamic_grid_is_not_carried() -> None:
    """A dequantize whose scale is computed at run time (a graph node) may be the device's own grid, per row."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    qparams = graph.call_function(torch.ops.quantized_decomposed.choose_qparams.tensor, (x, -128, 127, 1e-5, torch.int8))
    scale = graph.call_function(__import__("operator").getitem, (qparams, 0))
    zero = graph.call_function(__import__("operator").getitem, (qparams, 1))
    q = graph.call_function(_QD.quantize_per_tensor.tensor, (x, scale, zero, -128, 127, torch.int8))
    dq = graph.call_function(_QD.dequantize_per_tensor.tensor, (q, scale, zero, -128, 127, torch.int8))
    moved = graph.call_function(torch.ops.aten.transpose.int, (dq, 0, 1))
    graph.output(moved)
    seen: list[Noise] = []
    ReplayInterpreter(torch.fx.GraphModule(torch.nn.Module(), graph), {moved.name},
                      lambda node, result, args, kwargs, noise: seen.append(noise) or result).run(torch.randn(4, 6))
    assert seen and seen[0].quant_step is None


def test_a_cat_keeps_a_grid_only_when_every_part_lies_on_it() -> None:
    aten = torch.ops.aten
    assert _row_noise((aten.cat.default, (0,)), scales=(0.1, 0.1)).quant_step == 0.1
    assert _row_noise((aten.cat.default, (0,)), scales=(0.1, 0.2)).quant_step is None
