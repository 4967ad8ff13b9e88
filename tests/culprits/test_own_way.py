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
