"""XNNPACK adds a statically quantized layer's bias on its int32 accumulator's grid (numdiff.culprits._xnnpack.integer_bias).

MobileNetV2 on int8 XNNPACK (the real-size zoo, scripts/make_zoo.py --realsize): its one delegate
disagreed with the float-bias replay by 12 steps rms at the last block (10.6 dB, a clean run named a
culprit at 7.9 noise units); replayed with the bias rounded onto ``input scale * weight scale``, the
first 14 inverted residuals match the runtime bit for bit and the whole delegate is 34.6 dB (0.51 units).
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest
import torch

from numdiff.culprits._noise import Noise
from numdiff.culprits._replay import ReplayInterpreter
from numdiff.culprits._xnnpack import integer_bias
from tests.culprits.helpers import inspector

importlib.import_module("torch.ao.quantization.fx._decomposed")
_QD = torch.ops.quantized_decomposed
_X = torch.tensor([[[[0.5, -1.0], [1.5, 2.0]]]])  # on the input grid (scale 0.5)
_W = torch.tensor([[[[2]]], [[[-4]]]], dtype=torch.int8)  # two output channels, 1x1
_BIAS = torch.tensor([0.3, 0.2])


def _conv_graph(per_channel: bool = False, keyword_bias: bool = True, dynamic: bool = False) -> torch.fx.GraphModule:
    """``x → quantize → dequantize → conv2d(·, dequantized int8 weight, bias)``: input scale 0.5,
    weight scale 0.25 (per tensor) or [0.25, 0.5] (per channel), a float bias."""
    graph = torch.fx.Graph()
    x, w, b = graph.placeholder("x"), graph.placeholder("w"), graph.placeholder("b")
    if dynamic:
        grid = graph.call_function(_QD.choose_qparams.tensor, (x, -128, 127, 2**-12, torch.int8))
        scale = graph.call_function(getattr(__import__("operator"), "getitem"), (grid, 0))
        zero = graph.call_function(getattr(__import__("operator"), "getitem"), (grid, 1))
        q = graph.call_function(_QD.quantize_per_tensor.tensor, (x, scale, zero, -128, 127, torch.int8))
        dq = graph.call_function(_QD.dequantize_per_tensor.tensor, (q, scale, zero, -128, 127, torch.int8))
    else:
        q = graph.call_function(_QD.quantize_per_tensor.default, (x, 0.5, 0, -128, 127, torch.int8))
        dq = graph.call_function(_QD.dequantize_per_tensor.default, (q, 0.5, 0, -128, 127, torch.int8))
    if per_channel:
        scales, zeros = graph.placeholder("scales"), graph.placeholder("zeros")
        wdq = graph.call_function(_QD.dequantize_per_channel.default, (w, scales, zeros, 0, -127, 127, torch.int8))
    else:
        wdq = graph.call_function(_QD.dequantize_per_tensor.default, (w, 0.25, 0, -127, 127, torch.int8))
    if keyword_bias:
        graph.output(graph.call_function(torch.ops.aten.conv2d.default, (dq, wdq), {"bias": b}))
    else:
        graph.output(graph.call_function(torch.ops.aten.conv2d.default, (dq, wdq, b)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _replay(gm: torch.fx.GraphModule, *inputs: torch.Tensor, xnnpack: bool) -> Any:
    last = next(n.name for n in gm.graph.nodes if n.op == "call_function" and "conv2d" in str(n.target))
    seen: dict[str, Any] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = replay
        return replay

    nodes = frozenset(n.name for n in gm.graph.nodes) if xnnpack else frozenset()
    ReplayInterpreter(gm, {last}, on_paired, xnnpack_nodes=nodes).run(*inputs)
    return seen[last]


def _conv(bias: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.conv2d(_X, _W.float() * weight_scale.view(-1, 1, 1, 1), bias)


def test_inside_an_xnnpack_delegate_a_static_layer_adds_its_bias_on_the_accumulator_grid() -> None:
    # grid 0.5 * 0.25 = 0.125: 0.3 -> 2.4 -> 2 steps = 0.25, 0.2 -> 1.6 -> 2 steps = 0.25
    for keyword in (True, False):
        gm = _conv_graph(keyword_bias=keyword)
        got = _replay(gm, _X, _W, _BIAS, xnnpack=True)
        assert torch.equal(got, _conv(torch.tensor([0.25, 0.25]), torch.tensor([0.25, 0.25])))
        # elsewhere (portable kernels), the float bias the graph adds
        assert torch.equal(_replay(gm, _X, _W, _BIAS, xnnpack=False), _conv(_BIAS, torch.tensor([0.25, 0.25])))


def test_per_channel_weights_give_each_output_channel_its_own_bias_grid() -> None:
    scales = torch.tensor([0.25, 0.5])  # grids 0.125 and 0.25: 0.3 -> 2 steps = 0.25, 0.2 -> 1 step = 0.25
    gm = _conv_graph(per_channel=True)
    got = _replay(gm, _X, _W, _BIAS, scales, torch.zeros(2, dtype=torch.int64), xnnpack=True)
    assert torch.equal(got, _conv(torch.tensor([0.25, 0.25]), scales))


def test_a_dynamically_quantized_input_keeps_the_float_bias() -> None:
    gm = _conv_graph(dynamic=True)
    conv = next(n for n in gm.graph.nodes if n.op == "call_function" and "conv2d" in str(n.target))
    assert integer_bias(conv, (_X, _W.float()), {"bias": _BIAS}) is None  # its input scale is computed at run time
    # and a bias the quantizer already quantized is taken as it is
    static = _conv_graph()
    conv = next(n for n in static.graph.nodes if n.op == "call_function" and "conv2d" in str(n.target))
    assert integer_bias(conv, (_X, _W.float()), {"bias": None}) is None


def test_a_clean_int8_mobilenet_delegate_matches_its_replay_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """culprit_clean_int8_depthwise (scripts/make_culprit_fixtures.py): a small MobileNetV2 (depthwise
    convolutions, relu6, residual adds) in one int8 XNNPACK delegate. Replayed with the float bias it
    is 52 dB from the runtime (three blocks; the real-size zoo's seventeen made it 10.6 dB, a culprit)."""
    (row,) = inspector("culprit_clean_int8_depthwise").find_culprits("SNR").rows
    assert row.local_gap == math.inf and row.verdict.value == "ok" and not row.is_culprit
    monkeypatch.setattr("numdiff.culprits._replay.integer_bias", lambda *args, **kwargs: None)
    (row,) = inspector("culprit_clean_int8_depthwise").find_culprits("SNR").rows
    assert 40 < row.local_gap < 60  # the graph's float bias: a few elements a step away


def test_the_worst_row_fed_by_no_row_does_not_say_its_error_is_inherited() -> None:
    """Its reference run adds the float bias and rounds twice around each relu6 (39.5 dB from the runtime),
    its replay computes as XNNPACK does (bit for bit): the difference is not inherited from any row."""
    rep = inspector("culprit_clean_int8_depthwise").find_culprits("SNR")
    (line,) = [x for x in str(rep).splitlines() if x.startswith("worst accumulated row")]
    assert rep.rows[0].producers == () and 30 < rep.rows[0].accumulated_gap < 50
    assert line.endswith("verdict ok: no row feeds it: its replay on the run's inputs agrees with the runtime, the "
                         "reference run differs from that replay (other inputs, or ops the replay computes as the "
                         "backend does)")
