"""What XNNPACK computes the way the reference does, and what its own way.

* Its dynamic quantization (:func:`dynamic_chain`, :func:`dynamic_rows`): which elements share one
  run-time scale and zero point, so that :mod:`numdiff.culprits._qd8` can replay them.
* Its static requantizations (:func:`computed_own_way`): exact after a convolution or a fully
  connected layer, its own fixed-point arithmetic after an int8 add, mean or activation, whose
  one-step flips compound over :data:`COMPOUNDING_DEPTH` weighted layers; which of them its own int8
  kernels round near a tie (:func:`fixed_point_rounding`).
* The bias of a statically quantized convolution or fully connected layer (:func:`integer_bias`):
  XNNPACK adds it as an int32 on the accumulator's grid, where the graph adds it in float.
* A clamp left between two requantizations (:func:`fused_clamp`): XNNPACK fuses it into the layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import SupportsInt, cast

import torch

from numdiff.culprits._noise import op_type

__all__ = ["COMPOUNDING_DEPTH", "INT8_KERNELS", "WEIGHTED_OPS", "computed_own_way", "dynamic_chain", "dynamic_rows",
           "fixed_point_rounding", "fused_clamp", "integer_bias"]

_ANY_QUANTIZE = frozenset({"quantize_per_tensor", "quantize_per_channel", "quantize_per_token"})
_ANY_DEQUANTIZE = frozenset({"dequantize_per_tensor", "dequantize_per_channel", "dequantize_per_token"})

#: Ops a delegate runs on dynamically quantized inputs with its own kernels (XNNPACK: fully connected
#: and convolution).
_CONVS = frozenset({"conv1d", "conv2d", "conv3d", "convolution"})
_TRANSPOSED = frozenset({"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})
_DYNAMIC_CONSUMERS = _CONVS | _TRANSPOSED | {"linear"}
#: Ops XNNPACK runs on statically quantized values as the reference computes them, rounding exactly
#: once at the requantization (convolutions and fully connected: integer accumulation, exact float
#: requantization), or that move and clamp values without arithmetic. A requantization after any
#: other op (an int8 add, multiply, mean or activation) XNNPACK computes its own way (fixed point),
#: so it may round an element near a tie the other way; the layers after it carry such steps on.
WEIGHTED_OPS = _CONVS | _TRANSPOSED | frozenset({"linear", "addmm", "mm", "bmm", "matmul"})
_MOVES = frozenset({
    "relu", "relu6", "hardtanh", "clamp", "max_pool1d", "max_pool2d", "max_pool2d_with_indices", "max_pool3d",
    "permute", "transpose", "t", "view", "reshape", "_unsafe_view", "cat", "slice", "select", "squeeze", "unsqueeze",
    "expand", "clone", "contiguous", "alias", "detach", "flatten", "constant_pad_nd", "pad", "upsample_nearest2d",
    "pixel_shuffle", "pixel_unshuffle", "getitem", "_to_copy", "split", "split_with_sizes", "chunk",
})
#: Weighted layers after a requantization XNNPACK computes its own way before its one-step flips are
#: carried as noise: a flip moves the next layer's values by a fraction of a step, which rounds
#: another few elements the other way, and so on; it takes several layers to compound (a whole
#: ResNet-18 in one delegate disagrees by 1 step rms at its output, its int8 add + relu rounding in
#: fixed point, while the zoo's rows of one to three layers match their replay bit for bit; the
#: real-size EfficientNet's 1-2 steps were the int32 bias, see :func:`integer_bias`: bit for bit now).
COMPOUNDING_DEPTH = 4


def _ints(value: object, count: int, default: int) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(int(cast(SupportsInt, v)) for v in value) or (default,) * count
    return (int(cast(SupportsInt, value)),) * count if isinstance(value, int) else (default,) * count


def _argument(node: torch.fx.Node, index: int, name: str) -> object:
    """``node``'s argument at position ``index`` of its op's schema, passed positionally or by ``name``
    (None when neither)."""
    return node.args[index] if len(node.args) > index else node.kwargs.get(name)


def dynamic_rows(consumer: torch.fx.Node, weight: object = None) -> int | None:
    """Which elements XNNPACK quantizes with one scale and zero point for ``consumer`` (a linear or a
    convolution reading a dynamically quantized input): ``-1`` every row of the last dimension (a
    fully connected layer: per token or batch row), ``1`` every pixel's channels (a pointwise
    convolution, which XNNPACK runs as a fully connected layer on its channels-last input), None
    every image (the first dimension: other convolutions and transposed convolutions). ``weight`` is
    the convolution's weight (its value, else the graph's record of it is used)."""
    kind = op_type(consumer.target)
    if kind in _TRANSPOSED:
        return None
    if kind not in _CONVS:
        return -1
    if not isinstance(weight, torch.Tensor):
        node = _argument(consumer, 1, "weight")
        weight = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    shape = weight if isinstance(weight, torch.Tensor) else None
    if shape is None or shape.dim() < 3:
        return None
    spatial = shape.dim() - 2
    # convolution: (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
    # conv1d/2d/3d: (input, weight, bias, stride, padding, dilation, groups). Each positional or by name
    # (a deserialized ETRecord's graph passes what follows the weight by name).
    stride, padding = _argument(consumer, 3, "stride"), _argument(consumer, 4, "padding")
    if kind == "convolution":
        transposed, groups = bool(_argument(consumer, 6, "transposed")), _argument(consumer, 8, "groups")
    else:
        transposed, groups = False, _argument(consumer, 6, "groups")
    groups = 1 if groups is None else int(cast(SupportsInt, groups))
    pointwise = all(k == 1 for k in shape.shape[2:]) and not transposed and groups == 1 \
        and all(v == 1 for v in _ints(stride, spatial, 1)) and not isinstance(padding, str) \
        and all(v == 0 for v in _ints(padding, spatial, 0)) and shape.shape[0] + shape.shape[1] > 2
    return 1 if pointwise else None


def dynamic_chain(n: torch.fx.Node, value_of: Callable[[torch.fx.Node], object] = lambda node: None) -> int | None | bool:
    """For ``quantize_per_tensor`` of a run value onto the grid of a ``choose_qparams`` op
    (``choose_qparams → quantize → dequantize``) whose dequantized value feeds only linears or
    convolutions as their input (the pattern XNNPACK runs as its own dynamic quantization): its
    grouping (see :func:`dynamic_rows`; ``value_of`` gives a node's computed value, None if unknown);
    False for any other node, or when consumers disagree."""
    if op_type(n.target) != "quantize_per_tensor" or len(n.args) < 2 or not isinstance(n.args[1], torch.fx.Node):
        return False
    grid = n.args[1]
    if "getitem" not in str(getattr(grid.target, "__name__", grid.target)) or not grid.args \
            or not isinstance(grid.args[0], torch.fx.Node) or not op_type(grid.args[0].target).startswith("choose_qparams"):
        return False
    users = list(n.users)
    if not users or any(op_type(u.target) != "dequantize_per_tensor" or not u.users for u in users):
        return False
    consumers = [c for u in users for c in u.users]
    if not all(_argument(c, 0, "input") in users and op_type(c.target) in _DYNAMIC_CONSUMERS for c in consumers):
        return False
    weights = [_argument(c, 1, "weight") for c in consumers]
    rows = {dynamic_rows(c, value_of(w) if isinstance(w, torch.fx.Node) else None) for c, w in zip(consumers, weights)}
    return rows.pop() if len(rows) == 1 else False


def computed_own_way(quantize: torch.fx.Node) -> torch.fx.Node | None:
    """The op that last computed the value a quantize rounds when XNNPACK computes it its own way
    (looking back through clamps and data movement: an add before a relu), else None."""
    source = quantize.args[0] if quantize.args else None
    for _ in range(64):
        if not isinstance(source, torch.fx.Node) or source.op != "call_function":
            return None
        kind = op_type(source.target)
        if kind not in _MOVES:
            own = kind not in WEIGHTED_OPS and kind not in _ANY_QUANTIZE and kind not in _ANY_DEQUANTIZE
            return source if own else None
        source = source.args[0] if source.args else None
    return None


#: Ops ExecuTorch's XNNPACK partitioner runs on int8 values with XNNPACK's own int8 kernels (its static
#: quantization configs, ExecuTorch 1.5.1), other than weighted layers and data movement: they compute and
#: requantize in fixed point, and round a value at or within their arithmetic's error of a tie their own way
#: (the held-out ResMLP's int8 mean of 8 tokens lands exactly on half-steps; XNNPACK rounded both such
#: elements up, the replay's float32 mean rounded one down and the other to even). Every other op computed
#: its own way (a GELU, a sigmoid, a bilinear upsample) runs in float32 between XNNPACK's conversions, which
#: round ``x * (1 / scale)`` half to even and add the zero point, as the graph's quantize does.
INT8_KERNELS = frozenset({"add", "sub", "mul", "mean", "elu"})


def fixed_point_rounding(quantize: torch.fx.Node) -> torch.fx.Node | None:
    """The op whose value ``quantize`` rounds when XNNPACK computes and requantizes it with one of its own
    int8 kernels (:data:`INT8_KERNELS`, looking back through clamps and data movement), else None."""
    op = computed_own_way(quantize)
    return op if op is not None and op_type(op.target) in INT8_KERNELS else None


#: Clamps XNNPACK fuses into the convolution or fully connected layer before them (its output bounds).
_CLAMPS = frozenset({"relu", "relu6", "hardtanh", "clamp"})


def fused_clamp(dequantize: torch.fx.Node) -> bool:
    """Whether ``dequantize`` reads a static requantization of a convolution's or a linear's output and
    feeds only a clamp whose value is requantized again (``conv → q → dq → relu6 → q``, the quantizer
    leaving the clamp unfused): XNNPACK fuses the clamp into the layer and rounds once, onto the
    second grid, where the graph rounds twice (MobileNetV2's relu6 on int8 XNNPACK, real-size zoo:
    5.9 dB from the double-rounding reference, 10.6 dB replayed with one rounding)."""
    if op_type(dequantize.target) != "dequantize_per_tensor" or len(dequantize.users) != 1:
        return False
    quantize = dequantize.args[0] if dequantize.args else None
    if not isinstance(quantize, torch.fx.Node) or op_type(quantize.target) != "quantize_per_tensor" \
            or len(quantize.users) != 1 or (len(quantize.args) > 1 and isinstance(quantize.args[1], torch.fx.Node)):
        return False
    layer = quantize.args[0] if quantize.args else None
    if not isinstance(layer, torch.fx.Node) or op_type(layer.target) not in WEIGHTED_OPS:
        return False
    (clamp,) = dequantize.users
    if op_type(clamp.target) not in _CLAMPS or len(clamp.users) != 1:
        return False
    (after,) = clamp.users
    return op_type(after.target) == "quantize_per_tensor"


def _static_scale(dequantize: object, kinds: frozenset[str]) -> float | None:
    """The scale of ``dequantize`` when it is a dequantize op of ``kinds`` with a scale fixed in the graph."""
    if not isinstance(dequantize, torch.fx.Node) or dequantize.op != "call_function" \
            or op_type(dequantize.target) not in kinds or len(dequantize.args) < 2:
        return None
    scale = dequantize.args[1]
    return float(scale) if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0 else None


def integer_bias(layer: torch.fx.Node, args: tuple[object, ...], kwargs: Mapping[str, object],
                 channel_scales: Callable[[torch.fx.Node], object] = lambda node: None,
                 ) -> tuple[tuple[object, ...], dict[str, object]] | None:
    """``layer``'s arguments ``(args, kwargs)`` with its float bias (positional or keyword) replaced by
    the bias XNNPACK adds, or None when XNNPACK adds the graph's (``channel_scales`` gives the scales a
    ``dequantize_per_channel`` node used, None if unknown).

    A convolution or fully connected layer reading a statically quantized input (a per-tensor
    dequantize with a scale fixed in the graph) and quantized weights (per tensor or per output
    channel) accumulates in int32, and ExecuTorch's XNNPACK backend gives it the float bias quantized
    onto that accumulator's grid: ``round(bias * (1 / (input scale * weight scale)))`` (per output
    channel for per-channel weights; PyTorch's ``quantize_per_tensor`` / ``quantize_per_channel``,
    rounding half to even). The graph adds the float bias. The difference is up to half a step of that
    grid, ``input scale * weight scale / output scale / 2`` of an output step: small for a layer
    reducing over many inputs, but a 3x3 depthwise convolution's few inputs make it a few thousandths
    of a step, enough to round a few elements in a thousand the other way, and MobileNetV2's linear
    bottlenecks carry such flips on (real-size zoo, int8 XNNPACK: 17 inverted residuals in one
    delegate disagreed with the float-bias replay by 12 steps rms; with the int32 bias, the first
    fourteen match it bit for bit). A dynamically quantized input's bias stays float (as here: its input
    scale is computed at run time)."""
    if op_type(layer.target) not in _DYNAMIC_CONSUMERS or len(layer.args) < 2 or len(args) < 2:
        return None
    positional = len(args) > 2
    bias = args[2] if positional else kwargs.get("bias")
    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point() or bias.dim() != 1:
        return None
    bias_node = layer.args[2] if len(layer.args) > 2 else layer.kwargs.get("bias")
    if isinstance(bias_node, torch.fx.Node) and op_type(bias_node.target) in _ANY_DEQUANTIZE:
        return None  # already quantized by the quantizer: XNNPACK takes it as it is
    input_scale = _static_scale(layer.args[0], frozenset({"dequantize_per_tensor"}))
    if input_scale is None:
        return None
    weight = layer.args[1]
    weight_scale = _static_scale(weight, frozenset({"dequantize_per_tensor"}))
    if weight_scale is not None:
        grid = weight_scale * input_scale
        steps = torch.round(bias.float() * (1.0 / grid)).clamp(-(2**31), 2**31 - 1)
        rounded = (steps.double() * grid).to(bias.dtype)
    else:
        if not isinstance(weight, torch.fx.Node) or op_type(weight.target) != "dequantize_per_channel" \
                or len(weight.args) < 2:
            return None
        scales = channel_scales(weight)
        if not isinstance(scales, torch.Tensor) or scales.shape != bias.shape or not scales.is_floating_point():
            return None
        grids = scales * input_scale
        steps = torch.round(bias.float() * (1.0 / grids)).clamp(-(2**31), 2**31 - 1)
        rounded = (steps.double() * grids.double()).to(bias.dtype)
    if positional:
        return (*args[:2], rounded, *args[3:]), dict(kwargs)
    return tuple(args), {**kwargs, "bias": rounded}
