"""XNNPACK's dynamic quantization of activations (``qd8``), computed the way XNNPACK computes it.

A PT2E dynamically quantized linear reads ``choose_qparams → quantize_per_tensor →
dequantize_per_tensor`` of its input: one grid for the whole tensor, chosen by PyTorch's rule.
Delegated to XNNPACK, the graph's grid is not what runs: XNNPACK quantizes the input at run time
with its own parameters, one scale and zero point per *row* of a fully connected layer's input
(every index but the last dimension's: a token, a batch row), per pixel of a pointwise (1x1, stride
1, unpadded, ungrouped) convolution, which it runs as a fully connected layer on the channels, and
per image of any other convolution; it accumulates in int32 and writes
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
counts such elements; the noise they can carry is their steps' rms (see :class:`Qd8`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from numdiff.culprits._rounding import tie_tolerance

__all__ = ["QMAX", "QMIN", "Qd8", "flips", "qd8_params", "qd8_quantize"]

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


def flips(quantized: Qd8, sigma: float, allowance: float) -> tuple[int, float]:
    """``(elements that may land a step away, the rms of those steps over all elements)``.

    ``sigma`` is the floating-point error of the values before rounding, in their own units (0 for
    values read exactly from the runtime: then nothing flips), ``allowance`` how many such errors a
    kernel may make (the ``expected`` limit in noise units; see
    :func:`~numdiff.culprits._rounding.tie_tolerance`). An element whose value lay within that of a
    tie may round the other way; an element at the top or bottom of the grid may move when the zero
    point itself lay that close to a tie (only the clamp at either end then differs).
    """
    if sigma <= 0 or quantized.q.numel() == 0:
        return 0, 0.0
    tolerance = tie_tolerance(quantized.inv_scale.double() * sigma, allowance)
    steps = quantized.steps.double()
    margin = 0.5 - (steps - torch.round(steps)).abs()
    near = margin <= tolerance
    raw = quantized.zero_raw.double()
    zero_near = 0.5 - (raw - torch.round(raw)).abs() <= tolerance
    at_end = (quantized.q == QMIN) | (quantized.q == QMAX)
    near = near | (at_end & zero_near)
    count = int(near.sum())
    if not count:
        return 0, 0.0
    step = torch.broadcast_to(quantized.scale.double(), near.shape)
    return count, math.sqrt(float(step[near].pow(2).sum()) / near.numel())
