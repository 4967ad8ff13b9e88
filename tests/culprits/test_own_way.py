"""Requantizations XNNPACK computes its own way (numdiff.culprits._replay, _rounding.own_way_nsr).

A whole ResNet-18 or EfficientNet in one int8 XNNPACK delegate (the real-size zoo, scripts/make_zoo.py
--realsize) disagreed with its replay by 1-2 steps rms at its output: XNNPACK's int8 adds and means
round in fixed point, a flip moves the next layer's values, and flips compound over the layers. The
clean runs were named culprits at 4.5 and 6.9 noise units against XNNPACK's one-rounding limit of 1.
"""

from __future__ import annotations

import math

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

from numdiff.culprits._xnnpack import computed_own_way as _computed_own_way
from numdiff.culprits._rounding import own_way_nsr


def _quantize_after(*ops: object) -> torch.fx.Node:
    graph = torch.fx.Graph()
    value: torch.fx.Node = graph.placeholder("x")
    for op in ops:
        value = graph.call_function(op, (value, value) if op is torch.ops.aten.add.Tensor else (value,))
    return graph.call_function(torch.ops.quantized_decomposed.quantize_per_tensor.default,
                               (value, 0.1, 0, -128, 127, torch.int8))


def test_a_requantization_after_an_add_is_computed_its_own_way_through_a_relu() -> None:
    assert _computed_own_way(_quantize_after(torch.ops.aten.add.Tensor, torch.ops.aten.relu.default))
    assert _computed_own_way(_quantize_after(torch.ops.aten.sigmoid.default))


def test_a_requantization_after_a_convolution_or_linear_is_exact() -> None:
    assert not _computed_own_way(_quantize_after(torch.ops.aten.linear.default, torch.ops.aten.relu.default))
    assert not _computed_own_way(_quantize_after(torch.ops.aten.convolution.default))
    assert not _computed_own_way(_quantize_after())  # a graph input: nothing computed


def test_one_rounding_adds_a_twelfth_of_a_step_squared_against_the_values_power() -> None:
    value = torch.full((4, 4), 2.0)
    assert math.isclose(own_way_nsr(0.5, value), 0.25 / 12 / 4.0)
    assert own_way_nsr(torch.tensor([0.1, 0.5]), value) == 0.25 / 12 / 4.0  # the largest step
    assert own_way_nsr(0.5, torch.zeros(3)) == 0.0 and own_way_nsr(0.5, torch.zeros(3, dtype=torch.int8)) == 0.0


def _conv_requantized_then(clamp: object, requantized: bool = True) -> torch.fx.Node:
    """``conv → q → dq → clamp (→ q)``; returns the dequantize."""
    qd = torch.ops.quantized_decomposed
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    conv = graph.call_function(torch.ops.aten.convolution.default, (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1))
    q = graph.call_function(qd.quantize_per_tensor.default, (conv, 0.1, 0, -128, 127, torch.int8))
    dq = graph.call_function(qd.dequantize_per_tensor.default, (q, 0.1, 0, -128, 127, torch.int8))
    clamped = graph.call_function(clamp, (dq,))
    if requantized:
        graph.call_function(qd.quantize_per_tensor.default, (clamped, 0.05, 0, -128, 127, torch.int8))
    return dq


def test_a_clamp_left_unfused_between_two_requantizations_is_fused_by_xnnpack() -> None:
    """MobileNetV2's relu6 on int8 XNNPACK (real-size zoo): the quantizer rounds the conv's output and the
    relu6's, XNNPACK fuses the clamp and rounds once (5.9 dB from the double-rounding replay, 10.6 once)."""
    from numdiff.culprits._xnnpack import fused_clamp

    assert fused_clamp(_conv_requantized_then(torch.ops.aten.hardtanh.default))
    assert fused_clamp(_conv_requantized_then(torch.ops.aten.relu.default))
    assert not fused_clamp(_conv_requantized_then(torch.ops.aten.sigmoid.default))  # not a clamp
    assert not fused_clamp(_conv_requantized_then(torch.ops.aten.relu.default, requantized=False))  # float after
