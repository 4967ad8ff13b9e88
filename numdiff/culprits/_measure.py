"""Numbers behind a row: runtime values in the AOT layout, noise units, relative error, NaN/Inf."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from numdiff.culprits._noise import Noise

__all__ = ["any_nonfinite", "as_runtime_layout", "noise_units", "relative_error"]

Sums = tuple[float, float, float, int]


def as_runtime_layout(runtime: object, like: object, noise: Noise | None = None) -> tuple[torch.Tensor | None, str]:
    """The runtime value in the AOT value's shape and dtype, and the transform; (None, reason) if impossible.

    Transforms: a cast between floating dtypes; an integer runtime value where the AOT node is a
    per-tensor dequantize is dequantized with the graph's scale and zero point; a reshape of the
    same elements, or NHWC → NCHW when the shapes say so.
    """
    if not isinstance(runtime, torch.Tensor) or not isinstance(like, torch.Tensor):
        return None, f"not tensors (runtime {type(runtime).__name__}, AOT {type(like).__name__})"
    value, steps = runtime, []
    if value.dtype != like.dtype:
        if like.dtype.is_floating_point and not value.dtype.is_floating_point and noise is not None \
                and isinstance(noise.quant_step, float) and noise.zero_point is not None:
            value = ((value.double() - noise.zero_point) * noise.quant_step).to(like.dtype)
            steps = [f"dequantize(scale {noise.quant_step:.4g}, zero point {noise.zero_point:g})"]
        elif not (value.dtype.is_floating_point and like.dtype.is_floating_point):
            return None, f"runtime dtype {value.dtype} vs AOT {like.dtype}: not substituted"
        else:
            value, steps = value.to(like.dtype), [f"cast {runtime.dtype}->{like.dtype}"]
    if tuple(value.shape) != tuple(like.shape):
        if value.numel() != like.numel():
            return None, f"runtime shape {tuple(value.shape)} vs AOT {tuple(like.shape)}: not substituted"
        nhwc = value.dim() == 4 and tuple(value.permute(0, 3, 1, 2).shape) == tuple(like.shape)
        if nhwc and value.shape[1] != like.shape[1]:
            value, step = value.permute(0, 3, 1, 2), "NHWC->NCHW"
        else:
            value, step = value.reshape(like.shape), f"reshape {tuple(runtime.shape)}->{tuple(like.shape)}"
        steps.append(step)
    return value, ", ".join(steps) or "identity"



def any_nonfinite(args: tuple[object, ...], kwargs: Mapping[str, object]) -> bool:
    values = list(args) + list(kwargs.values())
    flat = [v for item in values for v in (item if isinstance(item, (list, tuple)) else [item])]
    return any(isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())
               for v in flat)



def noise_units(replay: object, runtime: torch.Tensor, noise: Noise,
                 sums: Sums | None = None) -> tuple[float, int, int, str | None]:
    """``(noise units, runtime NaN/Inf count, replay NaN/Inf count, why-not)``."""
    if not isinstance(replay, torch.Tensor):
        return math.nan, 0, 0, "noise units not computed: the output is not a tensor"
    per_channel = isinstance(noise.quant_step, torch.Tensor) and noise.quant_step.numel() > 1
    if sums is not None and not per_channel and noise.bound is None:  # all finite: from the float64 sums, no float64 copies
        _, squared, _, count = sums
        if replay.is_floating_point():  # max |x| from one pass that makes no |x| tensor (the values are finite)
            low, high = torch.aminmax(replay.detach())
            peak = max(0.0, -float(low), float(high))  # 0.0 first: all zeros give +0.0, as abs() does
        else:
            peak = float(replay.detach().to(torch.int64).abs().max())  # bool has no abs()
        scale = float(noise.sigma(torch.tensor([peak], dtype=torch.float64), runtime.dtype))
        return math.sqrt(squared / count) / scale, 0, 0, None
    ref, got = replay.detach().double(), runtime.detach().double()
    if ref.numel() == 0:
        return 0.0, 0, 0, None
    ref_ok, got_ok = torch.isfinite(ref), torch.isfinite(got)
    nonfinite, replay_nonfinite = int((~got_ok).sum()), int((~ref_ok).sum())
    both = ref_ok & got_ok
    same_special = (~ref_ok) & (~got_ok) & ((ref == got) | (torch.isnan(ref) & torch.isnan(got)))
    why = None
    if nonfinite or replay_nonfinite:
        why = f"{nonfinite} NaN/Inf in the runtime output, {replay_nonfinite} in the replay"
        if not bool(both.any()):
            return (0.0 if bool(same_special.all()) else math.inf), nonfinite, replay_nonfinite, why + \
                "; no finite element to measure"
        if not bool((both | same_special).all()):
            return math.inf, nonfinite, replay_nonfinite, why + "; at different positions"
    sigma = noise.sigma(torch.where(both, ref, 0), runtime.dtype)
    scaled = torch.where(both, (ref - got) / sigma, 0)
    count = int(both.sum())
    return float(torch.sqrt((scaled**2).sum() / count)), nonfinite, replay_nonfinite, why



def relative_error(aot: object, runtime: torch.Tensor, fast: Sums | None = None) -> float:
    if not isinstance(aot, torch.Tensor) or aot.numel() != runtime.numel():
        return math.nan
    if fast is not None:
        signal_sq, noise_sq, _, _ = fast
        if signal_sq == 0:
            return 0.0 if noise_sq == 0 else math.inf
        return math.sqrt(noise_sq / signal_sq)
    a, b = aot.detach().double().reshape(-1), runtime.detach().double().reshape(-1)
    ok = torch.isfinite(a) & torch.isfinite(b)
    if not bool(ok.any()):
        return math.nan
    signal = float(torch.sqrt((a[ok] ** 2).mean()))
    noise = float(torch.sqrt(((a[ok] - b[ok]) ** 2).mean()))
    if signal == 0:
        return 0.0 if noise == 0 else math.inf
    return noise / signal
