"""XNNPACK's dynamic quantization replayed as XNNPACK computes it (numdiff/culprits/_qd8.py), and the
replay's use of it. Agreement with real XNNPACK runs (clean delegates within float32 rounding of their
replay) is checked on the zoo sample: tests/culprits/test_zoo_sample.py."""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest
import torch

from numdiff.culprits._noise import Noise
from numdiff.culprits._qd8 import NO_BOUND, flips, propagate, qd8_params, qd8_quantize
from numdiff.culprits._replay import ReplayInterpreter
from numdiff.culprits._xnnpack import dynamic_chain, dynamic_rows
from numdiff.schema.etrecord import parse_etrecord
from tests.culprits.helpers import folder, inspector


def test_the_range_includes_zero_and_the_zero_point_comes_from_the_end_with_less_error() -> None:
    # [0.5, 2]: the range is [0, 2]: 255 / 2 steps per unit, zero at the bottom of the grid
    inv, raw, zero = qd8_params(torch.tensor([0.5]), torch.tensor([2.0]))
    assert inv.item() == 127.5 and raw.item() == -128 and zero.item() == -128
    # [-1, 1]: from the max, 127 - 127.5 = -0.5, rounded half to even: 0 (half away from zero gives -1)
    inv, raw, zero = qd8_params(torch.tensor([-1.0]), torch.tensor([1.0]))
    assert raw.item() == -0.5 and zero.item() == 0
    # all zeros: scale 1, zero point from the max (127): every zero point holds 0 exactly
    inv, raw, zero = qd8_params(torch.tensor([0.0]), torch.tensor([0.0]))
    assert inv.item() == 1.0 and zero.item() == 127
    # every step in float32: 255 / 3 is not 85 exactly in float32 arithmetic of the span
    inv, _, _ = qd8_params(torch.tensor([-1.0]), torch.tensor([2.0]))
    assert inv.dtype == torch.float32 and inv.item() == torch.tensor(255.0, dtype=torch.float32).div(3.0).item()


def test_values_round_half_to_even_and_dequantize_with_the_reciprocal_scale() -> None:
    # range [0, 127.5]: inv_scale 2 exactly, zero point -128; 0.25 -> 0.5 steps -> 0, 0.75 -> 1.5 -> 2, 1.25 -> 2.5 -> 2
    quantized = qd8_quantize(torch.tensor([[0.0, 0.25, 0.75, 1.25, 127.5]]))
    assert quantized.q.dtype == torch.int8
    assert quantized.q.tolist() == [[-128, -128, -126, -126, 127]]
    assert quantized.scale.item() == 0.5 and quantized.zero_point.item() == -128
    assert quantized.dequantize().tolist() == [[0.0, 0.0, 1.0, 1.0, 127.5]]


def test_random_rows_stay_on_the_int8_grid_within_half_a_step() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 33) * torch.rand(64, 1) * 10 + torch.randn(64, 1)
    quantized = qd8_quantize(x)
    assert int(quantized.q.min()) >= -128 and int(quantized.q.max()) <= 127
    error = (quantized.dequantize() - x).abs() / quantized.scale
    inside = (quantized.q > -128) & (quantized.q < 127)
    assert float(error[inside].max()) <= 0.5 + 1e-4 and float(error.max()) <= 1 + 1e-4


def test_which_elements_share_a_grid() -> None:
    x = torch.tensor([[[0.0, 1.0], [0.0, 100.0]]])  # (1, 2, 2)
    per_row = qd8_quantize(x)  # a fully connected layer's input: each row of the last dimension
    assert per_row.scale.shape == (1, 2, 1) and per_row.scale[0, 0, 0].item() == pytest.approx(1 / 255)
    assert per_row.scale[0, 1, 0].item() == pytest.approx(100 / 255)
    images = torch.stack([torch.full((2, 3, 3), 1.0), torch.full((2, 3, 3), 51.0)])  # (2, 2, 3, 3)
    per_image = qd8_quantize(images, None)  # a convolution's input: each image
    assert per_image.scale.shape == (2, 1, 1, 1) and per_image.scale.flatten().tolist() == pytest.approx([1 / 255, 51 / 255])
    pixels = torch.zeros(1, 2, 2, 2)
    pixels[0, :, 0, 0] = torch.tensor([1.0, 2.0])
    pixels[0, :, 1, 1] = torch.tensor([-3.0, 3.0])
    per_pixel = qd8_quantize(pixels, 1)  # a pointwise convolution's input: each pixel's channels
    assert per_pixel.scale.shape == (1, 1, 2, 2)
    assert per_pixel.scale[0, 0, 0, 0].item() == pytest.approx(2 / 255) and per_pixel.scale[0, 0, 1, 1].item() == pytest.approx(6 / 255)
    # 3 is 127.5 steps above the zero point: 128 clamps to 127 (a step, not half, at the grid's ends)
    assert per_pixel.q[0, :, 1, 1].tolist() == [-128, 127]
    assert per_pixel.dequantize()[0, :, 1, 1].tolist() == pytest.approx([-3.0 - 3 / 255, 3.0 - 3 / 255])


def _conv(weight: torch.Tensor, target: Any = torch.ops.aten.conv2d.default, **kwargs: Any) -> torch.fx.Node:
    """A convolution reading ``x`` with ``weight``: ``args`` after the bias positionally, ``named`` by name."""
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    w.meta["val"] = weight
    return graph.call_function(target, (x, w, None, *kwargs.get("args", ())), kwargs.get("named", {}))


def test_pointwise_convolutions_quantize_per_pixel_other_convolutions_per_image() -> None:
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1))) == 1  # runs as a fully connected layer: per pixel
    assert dynamic_rows(_conv(torch.zeros(8, 3, 3, 3))) is None  # per image
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1), args=([2, 2],))) is None  # strided
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1), args=([1, 1], [1, 1]))) is None  # padded
    assert dynamic_rows(_conv(torch.zeros(8, 1, 1, 1), args=([1, 1], [0, 0], [1, 1], 3))) is None  # grouped
    assert dynamic_rows(_conv(torch.zeros(1, 1, 1, 1))) is None  # one channel in and out: not the FC path
    # the weight's value when the graph holds no record of it
    assert dynamic_rows(_conv(torch.zeros(8, 3, 3, 3)), torch.zeros(8, 3, 1, 1)) == 1


def test_convolution_arguments_passed_by_name_count_as_positional_ones() -> None:
    """A deserialized ETRecord's graph passes what follows the weight by name (conv2d(x, w, bias=b,
    stride=..., groups=3)): read positionally only, every grouped, strided or padded 1x1 convolution was
    taken for a pointwise one and replayed on a grid per pixel (ShuffleNet's grouped 1x1 convolutions on
    int8dyn XNNPACK: 50 dB from the runtime, a false culprit on a run near its inputs)."""
    weight = torch.zeros(12, 4, 1, 1)
    assert dynamic_rows(_conv(weight, named={"stride": [1, 1], "padding": [0, 0], "groups": 3})) is None
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1), named={"stride": [2, 2]})) is None
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1), named={"padding": [1, 1]})) is None
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1), named={"stride": [1, 1], "padding": [0, 0], "groups": 1})) == 1
    # aten.convolution: (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    convolution = torch.ops.aten.convolution.default
    assert dynamic_rows(_conv(weight, convolution, args=([1, 1], [0, 0], [1, 1], False, [0, 0], 3))) is None
    assert dynamic_rows(_conv(weight, convolution, args=([1, 1], [0, 0], [1, 1], False, [0, 0]),
                              named={"groups": 3})) is None
    assert dynamic_rows(_conv(torch.zeros(8, 3, 1, 1), convolution,
                              args=([1, 1], [0, 0], [1, 1], False, [0, 0], 1))) == 1


def test_a_clean_grouped_pointwise_delegate_matches_its_replay_to_float_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """culprit_clean_int8dyn_grouped (scripts/make_culprit_fixtures.py): two ShuffleNet units on dynamic
    int8 XNNPACK, one delegate with two dynamic quantizations, each feeding a grouped 1x1 convolution
    (three groups) that XNNPACK runs as a QDU8 IGEMM on one grid per image. Its ETRecord's graph passes
    ``groups`` by name; on a grid per pixel the replay was 53 dB from the runtime."""
    program = parse_etrecord(folder("culprit_clean_int8dyn_grouped") / "etrecord.bin").exported_program
    assert program is not None
    grouped = [n for n in program.graph.nodes if n.op == "call_function" and "conv2d" in str(n.target)
               and n.kwargs.get("groups") == 3]
    assert len(grouped) == 4 and all(len(n.args) == 2 for n in grouped)
    row = inspector("culprit_clean_int8dyn_grouped").find_culprits("SNR").rows[-1]
    assert row.delegate is not None and row.verdict.value == "ok" and not row.is_culprit
    assert "2 dynamic quantization(s) replayed as XNNPACK computes them" in row.noise
    assert row.local_gap > 130  # float32 rounding: XNNPACK's int32 sums and fused multiply-add against float32 convs
    monkeypatch.setattr("numdiff.culprits._xnnpack.dynamic_rows", lambda consumer, weight=None: 1)
    row = inspector("culprit_clean_int8dyn_grouped").find_culprits("SNR").rows[-1]
    assert 40 < row.local_gap < 60  # one grid per pixel: most elements a step away somewhere


def test_a_flip_is_possible_only_near_a_tie_and_only_for_computed_values() -> None:
    quantized = qd8_quantize(torch.tensor([[0.0, 0.25, 0.3, 127.5]]))  # steps 0, 0.5 (a tie), 0.6, 255
    assert flips(quantized, 0.0, 8.0) == (0, None)  # the runtime's own values: quantized bit for bit
    count, bound = flips(quantized, 1e-6, 8.0)  # float error of 1e-6 (2e-6 steps: the tolerance floor)
    assert count == 1 and bound is not None
    assert bound.tolist()[0][0] == 0.0 and bound.tolist()[0][2] == 0.0 and bound.tolist()[0][3] == 0.0
    assert bound.tolist()[0][1] == pytest.approx(0.5 * (1 + 1e-3))  # one step (0.5) and the reach
    # an earlier flip's bound of 0.05 on the third value (0.1 steps from its tie) reaches it
    count, bound = flips(quantized, 1e-6, 8.0, torch.tensor([[0.0, 0.0, 0.06, 0.0]]))
    assert count == 2 and bound is not None and bound[0, 2].item() > 0.5


def test_bounds_follow_only_the_elements_a_flip_reaches() -> None:
    x = torch.zeros(3, 4)
    bound = torch.zeros(3, 4)
    bound[1, 2] = 0.5  # one element of row 1
    w = torch.tensor([[1.0, -2.0, 3.0, 0.0], [0.0, 0.0, -1.0, 4.0]])
    out = torch.nn.functional.linear(x, w)
    linear = propagate("linear", torch.ops.aten.linear.default, (x, w), {}, [bound, None], out)
    assert isinstance(linear, torch.Tensor) and linear.tolist() == [[0.0, 0.0], [1.5, 0.5], [0.0, 0.0]]
    relu = propagate("relu", torch.ops.aten.relu.default, (out,), {}, [linear], out)
    assert isinstance(relu, torch.Tensor) and torch.equal(relu, linear)
    added = propagate("add", torch.ops.aten.add.Tensor, (out, out), {}, [linear, linear], out)
    assert isinstance(added, torch.Tensor) and added[1, 0].item() == 3.0
    viewed = propagate("view", torch.ops.aten.view.default, (out, [6]), {}, [linear, None], out.view(6))
    assert isinstance(viewed, torch.Tensor) and viewed.tolist() == [0.0, 0.0, 1.5, 0.5, 0.0, 0.0]
    other = out.clone()
    cat = propagate("cat", torch.ops.aten.cat.default, ([out, other],), {}, [[linear, None]], torch.cat([out, other]))
    assert isinstance(cat, torch.Tensor) and cat.shape == (6, 2) and float(cat[3:].abs().sum()) == 0.0
    assert propagate("exp", torch.ops.aten.exp.default, (out,), {}, [linear], out) is NO_BOUND  # no rule: first order
    assert propagate("relu", torch.ops.aten.relu.default, (out,), {}, [None], out) is None


def _dynamic_linear_graph(consumer: str = "linear") -> torch.fx.GraphModule:
    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed
    w = torch.tensor([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])

    def model(x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x)
        scale, zero = qd.choose_qparams.tensor(h, -128, 127, 2**-12, torch.int8)
        q = qd.quantize_per_tensor.tensor(h, scale, zero, -128, 127, torch.int8)
        dq = qd.dequantize_per_tensor.tensor(q, scale, zero, -128, 127, torch.int8)
        return torch.nn.functional.linear(dq, w) if consumer == "linear" else dq + 1

    return torch.fx.symbolic_trace(model)


def test_the_graph_input_itself_is_quantized_exactly_as_the_device_does() -> None:
    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed

    def model(x: torch.Tensor) -> torch.Tensor:
        scale, zero = qd.choose_qparams.tensor(x, -128, 127, 2**-12, torch.int8)
        q = qd.quantize_per_tensor.tensor(x, scale, zero, -128, 127, torch.int8)
        return torch.nn.functional.linear(qd.dequantize_per_tensor.tensor(q, scale, zero, -128, 127, torch.int8),
                                          torch.ones(2, 3))

    _, noise = _replay(torch.fx.symbolic_trace(model), torch.tensor([[0.1, 0.2, 0.4]]), xnnpack=True)
    assert noise.bound is None and noise.carried == 0.0  # 0.2 is at a tie, but it is the device's own value


def _replay(gm: torch.fx.GraphModule, x: torch.Tensor, xnnpack: bool) -> tuple[Any, Noise]:
    """The last node's replay and noise, every node inside an XNNPACK delegate (``xnnpack``) or none."""
    last = [n.name for n in gm.graph.nodes if n.op == "call_function"][-1]
    seen: dict[str, tuple[Any, Noise]] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = (replay, noise)
        return replay

    nodes = frozenset(n.name for n in gm.graph.nodes) if xnnpack else frozenset()
    ReplayInterpreter(gm, {last}, on_paired, xnnpack_nodes=nodes).run(x)
    return seen[last]


def test_inside_an_xnnpack_delegate_the_replay_quantizes_per_row_and_says_so() -> None:
    x = torch.tensor([[0.1, 0.2, 0.4], [10.0, -5.0, 30.0]])  # rows of very different ranges
    gm = _dynamic_linear_graph()
    quantize = next(n for n in gm.graph.nodes if n.target == torch.ops.quantized_decomposed.quantize_per_tensor.tensor)
    assert dynamic_chain(quantize) == -1
    replay, noise = _replay(gm, x, xnnpack=True)
    w = torch.tensor([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    assert torch.equal(replay, torch.nn.functional.linear(qd8_quantize(torch.relu(x)).dequantize(), w))
    # relu(x) is computed in the delegate: 0.2 lies at a tie of row 0's grid (127.5 steps) and may round
    # either way there; the bound covers row 0's outputs only, row 1's are judged on float error alone
    assert noise.carried == 0.0 and not noise.graph_grid and noise.bound is not None
    assert noise.bound[0].min() > 0 and float(noise.bound[1].abs().max()) == 0.0
    assert noise.dynamic == ("1 dynamic quantization(s) replayed as XNNPACK computes them, 1 element(s) within float "
                             "error of a rounding tie")
    # the per-tensor grid of the graph would have rounded the first row to a few steps of the second's range
    per_tensor, fallback = _replay(gm, x, xnnpack=False)
    assert float((per_tensor - replay)[0].abs().max()) > 0.01
    assert fallback.graph_grid and fallback.carried > 0
    assert "on the graph's per-tensor grid (not inside an XNNPACK delegate)" in fallback.describe()


def test_a_chain_that_feeds_another_op_keeps_the_graph_grid_and_says_why() -> None:
    gm = _dynamic_linear_graph(consumer="add")
    quantize = next(n for n in gm.graph.nodes if n.target == torch.ops.quantized_decomposed.quantize_per_tensor.tensor)
    assert dynamic_chain(quantize) is False
    _, noise = _replay(gm, torch.tensor([[0.1, 0.2, 0.4]]), xnnpack=True)
    assert noise.graph_grid and "not a choose_qparams → quantize → dequantize chain feeding only linears or " \
        "convolutions" in noise.describe()


def test_a_bound_widens_sigma_only_where_a_flip_can_show() -> None:
    bound = torch.tensor([0.0, 0.5, 0.0])
    noise = Noise(reduction=4, bound=bound)
    sigma = noise.sigma(torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64), torch.float32)
    floating = 2.0**-23 * 2 * 1.0
    assert sigma.tolist() == pytest.approx([floating, math.hypot(floating, 0.5), floating])
    assert "a rounding flip may move 1 of 3 elements" in noise.describe()


def _deep_dynamic_graph(layers: int) -> torch.fx.GraphModule:
    """``layers`` dynamically quantized linears in a row (relu between), as a whole network in one delegate."""
    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed
    torch.manual_seed(0)
    weights = [torch.randn(6, 6) / 2.5 for _ in range(layers)]

    class Deep(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = x
            for w in weights:
                h = torch.relu(h) + 0.0  # computed in the delegate: its grid's ties may flip
                scale, zero = qd.choose_qparams.tensor(h, -128, 127, 2**-12, torch.int8)
                q = qd.quantize_per_tensor.tensor(h, scale, zero, -128, 127, torch.int8)
                h = torch.nn.functional.linear(qd.dequantize_per_tensor.tensor(q, scale, zero, -128, 127, torch.int8), w)
            return h

    return torch.fx.symbolic_trace(Deep())


def test_flips_compounded_over_many_layers_are_carried_as_a_power_ratio_not_bounded_per_element() -> None:
    """Over a whole ResNet-18 in one delegate (real-size zoo), the per-element bound of possible flips
    grew until a 30% weight change read as noise. Four or more weighted layers deep, the flips are
    carried as a noise-to-signal ratio (a step/sqrt(12) per quantization against the value's power)."""
    x = torch.linspace(-2.0, 2.0, 24).reshape(4, 6)
    x[0, 0] = 0.5 / 127.5 * 2.0  # a tie of row 0's grid somewhere
    _, shallow = _replay(_deep_dynamic_graph(2), x, xnnpack=True)
    assert not shallow.compounded and shallow.bound is not None and shallow.carried == 0.0  # bounded per element
    replay, deep = _replay(_deep_dynamic_graph(6), x, xnnpack=True)
    assert deep.compounded and deep.bound is None and deep.carried > 0 and "weighted layers deep" in deep.dynamic
    assert deep.carried < 0.5 * float(replay.pow(2).mean().sqrt())  # a ratio of the value, not a worst case


def test_a_softmax_bounds_only_the_rows_a_flip_reaches_by_the_ratio_it_may_change() -> None:
    """A flip's bound reaching a softmax (int8 attention logits) was carried as rounding noise on every element:
    a 1% scale change planted before a Llama-style attention's softmax read as noise (default zoo)."""
    x = torch.tensor([[0.0, 1.0, 2.0], [0.5, 0.5, 0.5]])
    y = torch.softmax(x, -1)
    bound = torch.tensor([[0.0, 0.1, 0.0], [0.0, 0.0, 0.0]])
    out = propagate("_softmax", torch.ops.aten._softmax.default, (x, -1, False), {}, [bound, None, None], y)
    assert isinstance(out, torch.Tensor) and float(out[1].abs().max()) == 0.0  # the other row: untouched
    # y_i's ratio to the replay's lies within exp(+-(d_i + D)), D the row's largest bound
    assert out[0].tolist() == pytest.approx([float(y[0, 0]) * math.expm1(0.1), float(y[0, 1]) * math.expm1(0.2),
                                             float(y[0, 2]) * math.expm1(0.1)])
    moved = torch.softmax(x + torch.tensor([[0.0, 0.1, 0.0], [0.0, 0.0, 0.0]]), -1)
    assert bool(((moved - y).abs() <= out + 1e-7).all())
    logs = propagate("log_softmax", torch.ops.aten.log_softmax.int, (x, -1), {}, [bound, None], torch.log_softmax(x, -1))
    assert isinstance(logs, torch.Tensor) and logs[0].tolist() == pytest.approx([0.1, 0.2, 0.1])
