"""Median ratio: the median absolute difference over the median absolute AOT value (a robust relative error)."""

from __future__ import annotations

import math
from typing import Any

import torch

from numdiff.comparators.numerics import same_shape, upcast_float64
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["MedianRatioComparator", "median_diff_ratio"]


def median_diff_ratio(reference: torch.Tensor, other: torch.Tensor) -> float:
    """``median(|reference - other|) / median(|reference|)``, in float64.

    A relative error that a few outliers do not move. 0.0 when the medians of the difference and
    of the reference are both 0; ``inf`` when only the reference's is; ``nan`` with a NaN anywhere.

    Example:
        >>> median_diff_ratio(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.5, 3.0, 40.0]))
        0.5
    """
    a, b = same_shape(upcast_float64(reference), upcast_float64(other))
    if a.numel() == 0:
        return 0.0
    if bool(torch.isnan(a).any()) or bool(torch.isnan(b).any()):
        return math.nan
    diff = float(torch.abs(a - b).flatten().quantile(0.5).item())
    scale = float(torch.abs(a).flatten().quantile(0.5).item())
    if scale == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / scale


class MedianRatioComparator(NumericalComparatorBase):
    """Median absolute difference over the median absolute AOT value (LiteRT's median diff ratio).

    Lower is better; 0 means at least half the elements agree exactly.

    Example:
        >>> MedianRatioComparator().element_compare(torch.tensor([2.0, 2.0]), torch.tensor([1.0, 1.0]))
        0.5
    """

    def element_compare(self, a: Any, b: Any) -> float:
        """``median(|a - b|) / median(|a|)`` in float64."""
        return median_diff_ratio(torch.as_tensor(a), torch.as_tensor(b))


register_comparator("median_ratio", MedianRatioComparator)
register_comparator("median_diff_ratio", MedianRatioComparator)
