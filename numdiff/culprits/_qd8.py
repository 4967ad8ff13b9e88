"""XNNPACK's dynamic quantization of activations (``qd8``), computed the way XNNPACK computes it.

A PT2E dynamically quantized linear reads ``choose_qparams → quantize_per_tensor →
dequantize_per_tensor`` of its input: one grid for the whole tensor, chosen by PyTorch's rule.
Delegated to XNNPACK, the graph's grid is not what runs: XNNPACK quantizes the input at run time
with its own parameters, one scale and zero point per *row* of a fully connected layer's input
(every index but the last dimension's: a token, a batch row), per pixel of a pointwise (1x1, stride
1, unpadded, ungrouped) convolution, which it runs as a fully connected layer on the channels, and
per image of any other convolution or transposed convolution; it accumulates in int32 and writes
``acc * input scale * weight channel scale + bias`` in float32. Its parameters (x86 and every other
CPU: the same scalar function) are, per row of float32 values:

* the range includes 0: ``rmin = min(0, min(row))``, ``rmax = max(0, max(row))``;
* ``inv_scale = 255 / (rmax - rmin)`` in float32 (1 when the range is empty), the dequantization
  scale its float32 reciprocal ``1 / inv_scale``;
* the zero point from whichever end leaves the smaller error: ``-128 - rmin * inv_scale`` when
  ``(-128 + rmin * inv_scale) + (127 + rmax * inv_scale) > 0``, else ``127 - rmax * inv_scale``
  (each step in float32), clamped to [-128, 127] and rounded half to even;
* each element ``q = clamp(round_half_even(x * inv_scale) + zero_point, -128, 127)``, the product in
  float32.

The replay computes exactly this on the values it has. What remains between the replay and the
device is floating-point: the accumulation order of the float ops (the replay's dequantized values
times the dequantized weights, in float32; XNNPACK's exact integer sum and two float32 products),
and, where the quantized value was computed inside the delegate (not read from a logged tensor), an
element that lies within that float error of a rounding tie may land one step away. :func:`flips`
finds such elements and bounds, per element, how far each may move; :func:`propagate` carries that
bound through the rest of the delegate to the row's output (``Noise.bound``).

Checked on the zoo's clean dynamically quantized XNNPACK runs (x86, ExecuTorch 1.5.1): every
delegate matches this replay to 137-155 dB (the graph's per-tensor grid left 40-60 dB); per image
and per tensor cannot be told apart there (every convolution input has one image). Which grid each
kind of convolution gets was checked one convolution at a time (scripts/xnnpack_qd8_grids.py: the
chosen grid within 4e-7 of the runtime, the other 0.005-0.02 away): strided, padded and grouped 1x1
convolutions are quantized per image (XNNPACK's QDU8 IGEMM), not per pixel; two images, one grid each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from numdiff.culprits._noise import COPYING_OPS
from numdiff.culprits._rounding import tie_distance, tie_tolerance

__all__ = ["NO_BOUND", "QMAX", "QMIN", "Qd8", "flips", "propagate", "qd8_params", "qd8_quantize"]

QMIN, QMAX = -128, 127


def qd8_params(low: torch.Tensor, high: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(inv_scale, zero point before rounding, zero point)`` per row, from each row's min and max.

    All in float32 (``zero point`` holds integers), the shapes of ``low`` and ``high``.
    """
    low, high = low.float(), high.float()
    rmin = torch.clamp(low, max=0.0)
    rmax = torch.clamp(high, min=0.0)
    span = rmax - rmin
    inv = torch.where(span == 0, torch.ones_like(span), torch.full_like(span, float(QMAX - QMIN)) / span)
    descaled_min = rmin * inv
    descaled_max = rmax * inv
    error_min = descaled_min + float(QMIN)
    error_max = descaled_max + float(QMAX)
    raw = torch.where(error_min + error_max > 0, float(QMIN) - descaled_min, float(QMAX) - descaled_max)
    raw = raw.clamp(QMIN, QMAX)
    return inv, raw, torch.round(raw)  # torch.round: half to even, as lrintf in the default mode


@dataclass(frozen=True, slots=True)
class Qd8:
    """One dynamically quantized tensor, as XNNPACK quantizes it.

    Attributes:
        q: The int8 values (the input's shape).
        inv_scale: Per row (the input's shape with the quantized dimensions kept as 1), the float32
            factor onto the grid.
        scale: Per row, the float32 dequantization scale (``1 / inv_scale``).
        zero_point: Per row, the zero point (float32 holding integers).
        steps: Per element, ``x * inv_scale`` before rounding (float32): where it lay on the grid.
        zero_raw: Per row, the zero point before rounding.
    """

    q: torch.Tensor
    inv_scale: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor
    steps: torch.Tensor
    zero_raw: torch.Tensor

    def dequantize(self) -> torch.Tensor:
        """``(q - zero point) * scale`` in float32: the real value each int8 element stands for."""
        return (self.q.float() - self.zero_point) * self.scale


def qd8_quantize(x: torch.Tensor, channels: int | None = -1) -> Qd8:
    """Quantize ``x`` (a floating-point tensor, at least 1-D) as XNNPACK does.

    ``channels`` is the dimension one scale and zero point cover: -1 (a fully connected layer's
    input: one grid per row), 1 (a pointwise convolution's NCHW input: one grid per pixel), or None
    (a convolution: one grid per image, all but the first dimension).
    """
    if x.dim() == 0:
        x = x.reshape(1)
    values = x.detach().float()
    dims: tuple[int, ...] = tuple(range(1, values.dim())) if channels is None else (channels,)
    if values.numel() == 0 or not dims:
        dims = (values.dim() - 1,)
    if values.numel() == 0:
        empty = values.sum(dim=dims, keepdim=True)
        return Qd8(values.to(torch.int8), empty + 1, empty + 1, empty, values, empty)
    low = values.amin(dim=dims, keepdim=True)
    high = values.amax(dim=dims, keepdim=True)
    inv, raw, zero = qd8_params(low, high)
    steps = values * inv
    q = (torch.round(steps) + zero).clamp(QMIN, QMAX)
    return Qd8(q.to(torch.int8), inv, torch.reciprocal(inv), zero, steps, raw)


def flips(quantized: Qd8, sigma: float, allowance: float,
          bound: torch.Tensor | None = None) -> tuple[int, torch.Tensor | None]:
    """``(elements that may land on another step than the replay's, the bound of each dequantized
    element's deviation)``; ``(0, None)`` when none may.

    ``sigma`` is the floating-point error of the values before rounding, in their own units (0 for
    values read exactly from the runtime), ``allowance`` how many such errors a kernel may make (the
    ``expected`` limit in noise units; see :func:`~numdiff.culprits._rounding.tie_tolerance`), and
    ``bound`` (per element) how far earlier flips may have moved them. An element whose value lay
    within that reach of a tie may round the other way, by ``reach + 1`` steps at most; one farther
    from a tie rounds as the replay does (the values' deviation is absorbed). A bound on a row's
    smallest or largest value also moves its grid (``2 * max bound / range``, relatively); an element
    at the top or bottom of the grid may move when the zero point lay within reach of a tie (only
    the clamp at either end then differs).
    """
    if (sigma <= 0 and bound is None) or quantized.q.numel() == 0:
        return 0, None
    inv = quantized.inv_scale.double()
    steps = quantized.steps.double()
    reach = torch.broadcast_to(tie_tolerance(inv * sigma, allowance) if sigma > 0 else torch.zeros_like(inv),
                               steps.shape)
    zero_reach = reach.amax(dim=_row_dims(quantized), keepdim=True) if sigma > 0 else torch.zeros_like(inv)
    if bound is not None:
        moved = bound.double().reshape(steps.shape)
        relative = 2 * moved.amax(dim=_row_dims(quantized), keepdim=True) * inv / float(QMAX - QMIN)
        reach = reach + moved * inv + steps.abs() * relative
        zero_reach = zero_reach + float(-QMIN) * relative
    near = tie_distance(steps) <= reach
    raw = quantized.zero_raw.double()
    zero_near = 0.5 - (raw - torch.round(raw)).abs() <= zero_reach
    at_end = (quantized.q == QMIN) | (quantized.q == QMAX)
    near = near | (at_end & zero_near)
    count = int(near.sum())
    if not count:
        return 0, None
    step = torch.broadcast_to(quantized.scale.double(), steps.shape)
    return count, torch.where(near, step * (reach + 1), 0.0)


def _row_dims(quantized: Qd8) -> tuple[int, ...]:
    """The dimensions one grid covers (where the per-row parameters have size 1)."""
    return tuple(d for d in range(quantized.q.dim()) if quantized.inv_scale.shape[d] == 1 and quantized.q.shape[d] != 1) \
        or (quantized.q.dim() - 1,)


# --- where a flip can show: a per-element bound, carried through the rest of the delegate --------------
#
# A flipped element moves the dequantized value by one step; what follows spreads that to a few
# outputs only (a linear: that row's outputs; a convolution: the pixels whose window holds it).
# Carrying, per element, the largest possible deviation keeps every other element judged on
# floating-point noise alone. Ops are linearised: a linear or convolution by its weights' magnitudes,
# element-wise functions by their largest slope, sums and products by the usual rules, and layout,
# selection, pooling and resampling ops (whose outputs are convex combinations or copies of their
# inputs) by running them on the bound itself. Any other op ends the per-element bound: the row then
# carries its largest value as rounding noise on every element (the first-order model).

#: Largest slope of element-wise functions (``|f(a) - f(b)| <= L |a - b|``).
_LIPSCHITZ = {"relu": 1.0, "relu_": 1.0, "hardtanh": 1.0, "hardtanh_": 1.0, "clamp": 1.0, "clip": 1.0, "tanh": 1.0,
              "neg": 1.0, "abs": 1.0, "gelu": 1.13, "silu": 1.1, "sigmoid": 0.25, "hardsigmoid": 1 / 6,
              "hardswish": 1.5, "relu6": 1.0, "_to_copy": 1.0, "to": 1.0, "alias": 1.0, "clone": 1.0,
              "contiguous": 1.0, "dropout": 1.0}
#: Ops whose output is a copy, selection or convex combination of their inputs' elements: run on the bound
#: (the copies are numdiff.culprits._noise.COPYING_OPS; relu has its slope above).
_ON_BOUND = (COPYING_OPS - {"relu"}) | frozenset({
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "mean",
    "upsample_bilinear2d", "_upsample_bilinear2d_aa"})
_LINEAR_WEIGHTED = frozenset({"linear", "conv1d", "conv2d", "conv3d", "convolution"})


def _zero_like(value: object, bounds: dict[int, torch.Tensor]) -> object:
    """The bound standing for one argument: its own, zeros for another tensor, the value itself otherwise."""
    if isinstance(value, torch.Tensor):
        return bounds.get(id(value), torch.zeros_like(value) if value.is_floating_point() else value)
    if isinstance(value, (list, tuple)):
        return type(value)(_zero_like(v, bounds) for v in value)
    return value


def propagate(kind: str, target: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object],
              bounds: Sequence[object], result: object) -> object:
    """The per-element bound of ``target(*args, **kwargs)`` (``result``) from its positional
    arguments' bounds; :data:`NO_BOUND` when ``kind`` has no rule (the caller falls back to the
    first-order scalar model).

    ``bounds[i]`` is ``args[i]``'s: None (none), a tensor shaped like it, or for a list argument (or
    an op's several outputs) a list of those. The answer is None when no argument carries one, else
    a float64 tensor shaped like ``result`` (a tuple of them for several outputs).
    """
    if not any(_carries(b) for b in bounds):
        return None
    first = bounds[0] if bounds else None
    second = bounds[1] if len(bounds) > 1 else None
    others = [b for b in bounds[1:] if _carries(b)]
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    if kind == "getitem":
        if isinstance(first, (list, tuple)) and isinstance(b, int) and -len(first) <= b < len(first):
            return first[b]
        return NO_BOUND
    if kind in _LINEAR_WEIGHTED:
        if not isinstance(first, torch.Tensor) or others or not isinstance(b, torch.Tensor):
            return NO_BOUND
        rest = list(args)
        rest[0], rest[1] = first.to(b.dtype), b.abs()
        if len(rest) > 2:
            rest[2] = None
        return _shaped(target(*rest, **{k: v for k, v in kwargs.items() if k != "bias"}), result)
    if kind in ("mm", "bmm", "matmul"):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or not isinstance(result, torch.Tensor):
            return NO_BOUND
        out = torch.zeros(result.shape, dtype=torch.float64)
        if isinstance(first, torch.Tensor):
            out = out + torch.matmul(first.double(), b.double().abs())
        if isinstance(second, torch.Tensor):
            out = out + torch.matmul(a.double().abs(), second.double())
        if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor):
            out = out + torch.matmul(first.double(), second.double())
        return _shaped(out, result)
    if kind in ("add", "sub", "mul", "div") and (_carries(first) and not isinstance(first, torch.Tensor)
                                                 or _carries(second) and not isinstance(second, torch.Tensor)):
        return NO_BOUND
    one = first if isinstance(first, torch.Tensor) else None
    two = second if isinstance(second, torch.Tensor) else None
    if kind in ("add", "sub"):
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        factor = abs(float(alpha)) if isinstance(alpha, (int, float)) else 1.0
        return _shaped(_or_zero(one, result) + factor * _or_zero(two, result), result)
    if kind == "mul":
        size_b, size_a = _magnitude(b), _magnitude(a)
        if (one is not None and size_b is None) or (two is not None and size_a is None):
            return NO_BOUND
        out = _or_zero(None, result)
        if one is not None and size_b is not None:
            out = out + one.double() * size_b
        if two is not None and size_a is not None:
            out = out + two.double() * size_a
        if one is not None and two is not None:
            out = out + one.double() * two.double()
        return _shaped(out, result)
    if kind == "div":
        if one is not None and two is None and isinstance(b, (int, float)) and b != 0:
            return _shaped(one.double() / abs(float(b)), result)
        return NO_BOUND
    if kind in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
        # x_i moved by at most d_i, every x_j of its row by at most D: y_i's ratio to the replay's lies within
        # exp(+-(d_i + D)), so softmax moves by y_i (exp(d_i + D) - 1), log_softmax by d_i + D.
        dim = b if isinstance(b, int) else kwargs.get("dim", -1)
        if one is None or others or not isinstance(dim, int) or not isinstance(result, torch.Tensor):
            return NO_BOUND
        reach = one.double() + one.double().amax(dim=dim, keepdim=True)
        return _shaped(reach if "log" in kind else result.double().abs() * torch.expm1(reach), result)
    if kind in _LIPSCHITZ or kind == "leaky_relu":
        if one is None or others:
            return NO_BOUND
        slope = max(1.0, abs(float(b))) if kind == "leaky_relu" and isinstance(b, (int, float)) else \
            _LIPSCHITZ.get(kind, 1.0)
        return _shaped(one.double() * slope, result)
    if kind in _ON_BOUND:
        held: dict[int, torch.Tensor] = {}
        for value, bound in zip(args, bounds):
            if isinstance(value, torch.Tensor) and isinstance(bound, torch.Tensor):
                held[id(value)] = bound.to(value.dtype) if value.is_floating_point() else bound
            elif isinstance(value, (list, tuple)) and isinstance(bound, (list, tuple)):
                held.update({id(x): y.to(x.dtype) for x, y in zip(value, bound)
                             if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point()})
        moved = target(*(_zero_like(v, held) for v in args), **kwargs)
        if isinstance(moved, (list, tuple)) and isinstance(result, (list, tuple)) and len(moved) == len(result):
            return [_shaped(o, r) if isinstance(o, torch.Tensor) and o.is_floating_point() else None
                    for o, r in zip(moved, result)]
        return _shaped(moved, result)
    return NO_BOUND


def _carries(bound: object) -> bool:
    if isinstance(bound, (list, tuple)):
        return any(_carries(b) for b in bound)
    return isinstance(bound, torch.Tensor)


#: What :func:`propagate` answers for an op it has no rule for.
NO_BOUND = object()


def _or_zero(bound: torch.Tensor | None, result: object) -> torch.Tensor:
    like = result if isinstance(result, torch.Tensor) else torch.zeros(())
    return torch.zeros_like(like, dtype=torch.float64) if bound is None else bound.double()


def _magnitude(value: object) -> torch.Tensor | float | None:
    if isinstance(value, torch.Tensor):
        return value.detach().double().abs()
    return abs(float(value)) if isinstance(value, (int, float)) else None


def _shaped(value: object, result: object) -> object:
    """``value`` as a float64 bound shaped like ``result``; :data:`NO_BOUND` when it cannot be."""
    if not isinstance(value, torch.Tensor) or not isinstance(result, torch.Tensor):
        return NO_BOUND
    try:
        return torch.broadcast_to(value.detach().double().abs(), result.shape).clone()
    except RuntimeError:
        return NO_BOUND
