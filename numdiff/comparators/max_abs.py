"""Max-abs: the largest absolute element-wise difference (numdiff's own metric, NaN propagated)."""

from __future__ import annotations

from typing import Any

import torch

from numdiff.comparators.numerics import same_shape, upcast_float64
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["MaxAbsComparator", "max_abs_difference"]


def max_abs_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max(|a - b|)``; 0.0 for identical or empty inputs, ``nan`` if any difference is NaN.

    ``inf - inf`` is NaN, so matching infinities give ``nan``: say "equal" only for finite values.

    Example:
        >>> max_abs_difference(torch.tensor([1.0, 5.0]), torch.tensor([1.5, 2.0]))
        3.0
    """
    a, b = same_shape(a, b)
    if a.numel() == 0:
        return 0.0
    return float(torch.abs(a - b).max().item())


class MaxAbsComparator(NumericalComparatorBase):
    """Largest absolute difference, upcast to float64 before subtracting; NaN is kept.

    Example:
        >>> MaxAbsComparator().element_compare(torch.tensor([100], dtype=torch.int8),
        ...                                    torch.tensor([-100], dtype=torch.int8))
        200.0
    """

    def element_compare(self, a: Any, b: Any) -> float:
        """``max(|a - b|)`` in float64."""
        return max_abs_difference(upcast_float64(a), upcast_float64(b))


register_comparator("max_abs", MaxAbsComparator)
