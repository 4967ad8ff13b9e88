"""The rounding check: an honest kernel puts a quantized value on another step only near a tie.

A row whose replay ends in exactly one rounding onto the quantization grid (a quantize op, then
perhaps its dequantize) of values computed in floating point from the runtime's own inputs knows
where each element lay before it was rounded. A kernel that computes the same real value (another
accumulation order, fused multiply-add, another rounding mode at exact ties) can land on another
step only where that value lay within its floating-point error of a *tie*, half-way between two
steps. An element one step or more away from the replay whose replayed value was farther from a
tie than that was not rounded differently: the op computed another value. A 1% change of a scale
or a weight moves many elements by one step (1-3 noise units, inside the quantized allowance of
``sqrt(12)``); honest rounding moves none of them this way.

The check holds only where the kernel computes in floating point before rounding, as the replay
does: ExecuTorch's portable and optimized kernels (undelegated rows). A delegate may requantize in
fixed point or through look-up tables and so move a value by a step anywhere; its rows keep the
noise-unit allowance alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import torch

__all__ = ["MIN_OFF_TIE", "OFF_TIE_SHARE", "TieMargin", "carried", "dynamic_rounding", "judged_off", "off_tie",
           "own_way_nsr", "requantize_flips", "tie_distance", "tie_margin",
           "tie_tolerance"]

T = TypeVar("T", float, torch.Tensor)

#: A row is judged by the rounding check when at least this many elements ...
MIN_OFF_TIE = 3
#: ... and this share of its elements are off the replay's step away from a tie.
OFF_TIE_SHARE = 1e-3
#: Smallest tolerance, in steps: far above float32's own representation error of a value on an
#: 8-bit grid (2**-17 steps at 127).
_FLOOR = 1e-3


@dataclass(frozen=True, slots=True)
class TieMargin:
    """Where the elements of one rounding lay before it.

    Attributes:
        margin: Per element, the distance in steps from the pre-rounding value to the nearest tie
            (0.5 on a grid point, 0 half-way between two).
        sigma: The floating-point noise of the computation that fed the rounding, in steps
            (``eps * sqrt(K) * max|value / scale|``, the floating-point noise unit).
    """

    margin: torch.Tensor
    sigma: float

    def tolerance(self, allowance: float) -> float:
        """How far from a tie an honest kernel's value may have been, in steps, for a floating-point
        ``allowance`` in noise units (the ``expected`` limit)."""
        return tie_tolerance(self.sigma, allowance)


def tie_tolerance(sigma: T, allowance: float, floor: float = _FLOOR) -> T:
    """How far from a tie, in steps, a value with floating-point noise ``sigma`` (in steps; a float
    or a tensor of them) may have been for an ``allowance`` in noise units: never below ``floor`` (by
    default far above float32's representation error on an 8-bit grid: see :data:`_FLOOR`)."""
    if isinstance(sigma, torch.Tensor):
        return torch.clamp(sigma * allowance, min=floor)
    return max(floor, allowance * float(sigma))


def tie_distance(steps: torch.Tensor) -> torch.Tensor:
    """Per element, how far a value ``steps`` (in steps of its grid, before rounding) lies from the nearest
    rounding tie: 0.5 on a grid point, 0 half-way between two. A kernel whose value may lie ``reach``
    steps from the replay's rounds it onto another step only where this is at most ``reach``."""
    return 0.5 - (steps - torch.round(steps)).abs()


def requantize_flips(value: torch.Tensor, scale: float, sigma: float, allowance: float,
                     bound: torch.Tensor | None = None) -> tuple[int, torch.Tensor | None]:
    """``(elements that may land on another step than the replay's, per element how many steps each may
    move)`` when a static per-tensor quantize of ``scale`` rounds ``value``; ``(0, None)`` when none may.

    ``sigma`` is the floating-point error of ``value`` in its own units: 0 where the device computes it as
    the replay does and rounds exactly (a convolution's or linear's requantization on XNNPACK), else what a
    kernel that computes it its own way may differ by (an int8 add or mean in fixed point; ``allowance`` such
    errors, see :func:`tie_tolerance`). ``bound`` (per element, the value's units) is how far earlier flips
    may have moved it (see :func:`numdiff.culprits._qd8.propagate`). The quantize's bound is in its integer
    steps (a dequantize multiplies it by its scale), as :func:`numdiff.culprits._qd8.flips` bounds a dynamic one.
    """
    if (sigma <= 0 and bound is None) or not value.is_floating_point() or not scale > 0 or value.numel() == 0:
        return 0, None
    steps = value.detach().double() / scale
    # No floor: the value's own float error bounds where it may lie, and every element this excuses widens the
    # bound of everything computed from it (the generous floor suits the rounding check, which accuses).
    reach = torch.full_like(steps, tie_tolerance(sigma / scale, allowance, floor=0.0) if sigma > 0 else 0.0)
    if bound is not None and bound.shape == steps.shape:
        reach = reach + bound.double() / scale
    margin = tie_distance(steps)
    near = (margin <= reach) & (reach > 0)  # with no reach, the device rounds the replay's own value
    count = int(near.sum())
    if not count:
        return 0, None
    # On a grid fixed in the graph, two values ``reach`` steps apart round apart by the ties between them.
    return count, torch.where(near, torch.floor(reach - margin) + 1, 0.0)


def tie_margin(value: object, scale: object, reduction: int) -> TieMargin | None:
    """The :class:`TieMargin` of ``quantize_per_tensor(value, scale, ...)``; None when not a per-tensor float.

    ``reduction`` is the reduction length of the computation that produced ``value`` (see
    :func:`~numdiff.culprits._noise.reduction_length`).
    """
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() == 0:
        return None
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1:
            return None
        scale = float(scale)
    if not isinstance(scale, (int, float)) or not scale > 0 or not math.isfinite(scale):
        return None
    # float32 holds a value on an 8-bit grid to 2**-17 steps, far inside the tolerance's floor
    steps = value.detach().float() / float(scale)
    steps = torch.nan_to_num(steps, nan=0.0, posinf=0.0, neginf=0.0)
    margin = tie_distance(steps)
    peak = float(steps.abs().max())
    eps = torch.finfo(value.dtype).eps
    return TieMargin(margin, eps * math.sqrt(max(1, reduction)) * peak)


def off_tie(replay: torch.Tensor, runtime: torch.Tensor, step: float | torch.Tensor | None, axis: int | None,
            tie: TieMargin, tolerance: float) -> tuple[int, int, float] | None:
    """``(elements off the replay's step away from a tie, elements, their smallest margin)``; None if not comparable.

    ``step`` is the grid's step in the values' units (a dequantize's scale; None for the integer
    output of a quantize op: 1); an element is off when the two values are half a step apart or more.
    """
    if replay.shape != runtime.shape or tie.margin.shape != replay.shape:
        return None
    diff = runtime.detach().double() - replay.detach().double()
    if isinstance(step, torch.Tensor):
        if step.numel() == 1:
            step = float(step)
        elif axis is not None and replay.dim() > 0 and step.numel() == replay.shape[axis % replay.dim()]:
            shape = [1] * replay.dim()
            shape[axis % replay.dim()] = -1
            diff = diff / step.double().reshape(shape)
            step = None
        else:
            return None
    if isinstance(step, float):
        if not step > 0:
            return None
        diff = diff / step
    off = (diff.abs() >= 0.5) & torch.isfinite(diff)
    # One step next to a tie is honest; more than one step is never a rounding difference.
    unexplained = off & ((tie.margin > tolerance) | (diff.abs() >= 1.5))
    count = int(unexplained.sum())
    closest = float(tie.margin[unexplained].min()) if count else math.nan
    return count, replay.numel(), closest


def judged_off(count: int, elements: int) -> bool:
    """Whether ``count`` off-tie elements of ``elements`` are enough to call the op wrong."""
    return count >= max(MIN_OFF_TIE, OFF_TIE_SHARE * elements)


# --- rounding noise carried through a row: dynamic quantization -----------------------------------------
#
# A dynamically quantized op rounds its input onto a grid computed at run time (``choose_qparams``).
# A delegate computes that grid its own way (XNNPACK: per row, asymmetric), so the device's rounding
# and the replay's differ at every element, by up to a step of either grid: about ``step / sqrt(6)``
# rms (two independent roundings). That difference flows through the rest of the row; to first order
# a linear or convolution scales it by the largest L2 norm of its weight's rows, an addition adds the
# two in quadrature, a product by the other factor's largest magnitude, and other ops (activations,
# layout, pooling) pass it on unchanged. Static quantization uses the same grid on both sides and
# carries nothing.

_WEIGHTED = frozenset({"linear", "conv1d", "conv2d", "conv3d", "convolution"})
_MATMULS = frozenset({"mm", "bmm", "matmul"})


def _max_norm(weight: object, dims: tuple[int, ...]) -> float:
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.dim() <= max(dims, default=0):
        return 0.0
    return float(weight.detach().double().pow(2).sum(dim=dims).sqrt().max()) if weight.numel() else 0.0


def _peak(value: object) -> float:
    if isinstance(value, torch.Tensor) and value.numel():
        return float(value.detach().abs().max())
    return abs(float(value)) if isinstance(value, (int, float)) else 0.0


def carried(kind: str, args: tuple[object, ...], sigmas: tuple[float, ...]) -> float:
    """The rounding noise (rms, in the output's units) an op's output carries, from its positional
    ``args`` and the noise each carries (``sigmas``, 0 for constants and exact runtime values)."""
    if not any(sigmas):
        return 0.0
    first = sigmas[0] if sigmas else 0.0
    second = sigmas[1] if len(sigmas) > 1 else 0.0
    if kind in _WEIGHTED and len(args) > 1 and isinstance(args[1], torch.Tensor):
        rows = tuple(range(1, args[1].dim()))
        return first * _max_norm(args[1], rows) + second * _max_norm(args[0], (args[0].dim() - 1,)
                                                                      if isinstance(args[0], torch.Tensor) else ())
    if kind in _MATMULS and len(args) > 1 and isinstance(args[0], torch.Tensor) and isinstance(args[1], torch.Tensor) \
            and args[0].dim() >= 2 and args[1].dim() >= 2:
        return first * _max_norm(args[1], (args[1].dim() - 2,)) + second * _max_norm(args[0], (args[0].dim() - 1,))
    if kind in ("add", "sub", "rsub"):
        return math.sqrt(first**2 + second**2)
    if kind == "mul" and len(args) > 1:
        return first * _peak(args[1]) + second * _peak(args[0])
    return max(sigmas)


def own_way_nsr(scale: object, value: object) -> float:
    """The noise-to-signal power ratio one rounding onto ``scale``'s grid may add to ``value`` (the
    dequantized result) when a delegate rounds it its own way: ``(step**2 / 12) / mean(value**2)``
    (0 for a value of no power)."""
    step = _peak(scale)
    if not isinstance(value, torch.Tensor) or not value.numel() or not value.is_floating_point():
        return 0.0
    power = float(value.detach().double().pow(2).mean())
    return step**2 / 12 / power if power > 0 else 0.0


def dynamic_rounding(carried_in: float, scale: object) -> float:
    """The noise after a dequantize of a dynamically quantized value: what it carried, and the two
    grids' rounding (``max step / sqrt(6)``)."""
    step = _peak(scale)
    return math.sqrt(carried_in**2 + step**2 / 6)
