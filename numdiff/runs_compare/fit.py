"""Systematic differences between two runs' values: a scale, an offset, a sign flip, a transposition.

:func:`fit_systematic` fits ``run ≈ scale · base + offset`` by least squares (float64, finite elements
only) and says in words what the fit explains: "0.50× the base's (half), R² 1.00", "offset by
+0.12", "sign flipped", "transposed". The fit *explains* the difference when the residual after it
holds at most a tenth of the difference's energy (``explained >= 0.9``); between 0.5 and 0.9 it is
described as partly systematic; below, no words are given (the numbers still are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["EXPLAINED", "PARTLY", "Fit", "fit_systematic"]

#: Fraction of the difference's energy a fit must remove to be said to explain it.
EXPLAINED = 0.9
#: Fraction above which a fit is called partly systematic.
PARTLY = 0.5
#: Simple factors named in words when the fitted scale is within 1% of one.
_FACTORS = {0.5: "half", 2.0: "twice", 0.25: "a quarter", 4.0: "four times", 0.125: "an eighth", 8.0: "eight times",
            -0.5: "minus half", -2.0: "minus twice"}
_CLOSE = 0.01


@dataclass(frozen=True, slots=True)
class Fit:
    """How a run's values relate to the base's.

    Attributes:
        scale: Least-squares slope of run against base (NaN when the base is constant).
        offset: Intercept.
        r2: Coefficient of determination of the fit (1 = the run is exactly affine in the base).
        explained: Fraction of ``sum((run - base)²)`` the fit removes (1 when there is no difference).
        kind: ``identical``, ``scale``, ``offset``, ``affine``, ``sign-flip``, ``transposed``,
            ``permuted``, ``partly`` or ``none``.
        words: The difference in words, or None when no pattern explains it.
        skipped: Non-finite elements left out of the fit.
    """

    scale: float
    offset: float
    r2: float
    explained: float
    kind: str
    words: str | None
    skipped: int = 0


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6 * float(b.abs().max().clamp(min=1e-30))))


def _factor_words(scale: float) -> str:
    for factor, words in _FACTORS.items():
        if abs(scale - factor) <= _CLOSE * abs(factor):
            return f" ({words})"
    return ""


def fit_systematic(base: torch.Tensor, run: torch.Tensor, what: str = "values") -> Fit:
    """Fit ``run ≈ scale · base + offset`` and name the pattern (see the module docstring).

    Args:
        base: The base run's tensor.
        run: The other run's tensor, the same number of elements.
        what: How to call the values in words ("outputs", "values").

    Example:
        >>> fit_systematic(torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, -1.0, 1.5]), "outputs").words
        "outputs are 0.50× the base's (half), R² 1.00"
    """
    x = base.detach().reshape(-1).to(torch.float64)
    y = run.detach().reshape(-1).to(torch.float64)
    if x.numel() != y.numel() or x.numel() == 0:
        return Fit(math.nan, math.nan, math.nan, math.nan, "none", None)
    finite = torch.isfinite(x) & torch.isfinite(y)
    skipped = int((~finite).sum())
    x, y = x[finite], y[finite]
    diff = y - x
    ss_diff = float((diff * diff).sum())
    if ss_diff == 0:
        return Fit(1.0, 0.0, 1.0, 1.0, "identical", f"{what} are identical", skipped)
    shaped_base, shaped_run = base.detach().to(torch.float64), run.detach().to(torch.float64).reshape(base.shape)
    if shaped_base.dim() >= 2 and shaped_base.shape[-1] == shaped_base.shape[-2] and skipped == 0 \
            and _close(shaped_run, shaped_base.transpose(-1, -2)):
        return Fit(math.nan, math.nan, math.nan, 1.0, "transposed",
                   f"{what} are the base's transposed (last two dimensions swapped)", skipped)
    n = x.numel()
    mx, my = float(x.mean()), float(y.mean())
    sxx = float(((x - mx) ** 2).sum())
    syy = float(((y - my) ** 2).sum())
    if sxx == 0:
        scale, offset = math.nan, my - mx
        residual = y - my
    else:
        scale = float(((x - mx) * (y - my)).sum()) / sxx
        offset = my - scale * mx
        residual = y - (scale * x + offset)
    ss_res = float((residual * residual).sum())
    r2 = (1.0 - ss_res / syy) if syy > 0 else (1.0 if ss_res == 0 else math.nan)
    explained = max(0.0, 1.0 - ss_res / ss_diff)
    if explained < EXPLAINED and skipped == 0 and n > 1 and _close(torch.sort(y).values, torch.sort(x).values):
        return Fit(scale, offset, r2, explained, "permuted",
                   f"{what} hold the base's values in another order (a layout or permutation)", skipped)
    rms = math.sqrt(float((x * x).sum()) / n) if n else 0.0
    # An offset is worth naming when it is 1% of the values' size and clear of the fit's own noise
    # (three standard errors of the intercept).
    stderr = math.sqrt(ss_res / max(n - 2, 1)) * math.sqrt(1 / n + (mx * mx / sxx if sxx > 0 else 0.0))
    material_offset = abs(offset) > max(_CLOSE * max(rms, 1e-30), 3 * stderr)
    fitted = f"R² {r2:.2f}"
    if math.isnan(scale):
        kind, words = "offset", f"{what} are the base's offset by {offset:+.3g}"
    elif abs(scale - 1) <= _CLOSE:
        kind, words = "offset", f"{what} are the base's offset by {offset:+.3g}, {fitted}"
    elif abs(scale + 1) <= _CLOSE and not material_offset:
        kind, words = "sign-flip", f"{what} are the base's with the sign flipped, {fitted}"
    else:
        kind = "affine" if material_offset else "scale"
        words = f"{what} are {scale:.2f}× the base's{_factor_words(scale)}"
        words += (f" offset by {offset:+.3g}, " if material_offset else ", ") + fitted
    if explained >= EXPLAINED:
        return Fit(scale, offset, r2, explained, kind, words, skipped)
    if explained >= PARTLY:
        return Fit(scale, offset, r2, explained, "partly",
                   f"partly systematic: {words}, explaining {explained:.0%} of the difference", skipped)
    return Fit(scale, offset, r2, explained, "none", None, skipped)
