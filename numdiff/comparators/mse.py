"""MSE: the mean of squared element-wise differences (reference numbers, NaN quirk included)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from numdiff.comparators.numerics import finite_difference_sums, reference_float64, same_shape
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["MSEComparator", "mean_squared_error"]


def mean_squared_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """``mean((a - b)²)`` in the tensors' own dtype; 0.0 when identical, NaN when empty.

    Example:
        >>> mean_squared_error(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 1.0]))
        2.0
    """
    a, b = same_shape(a, b)
    return float(torch.mean(torch.pow(a - b, 2)).item())


class MSEComparator(NumericalComparatorBase):
    """Mean squared error, computed exactly as the reference does (float64, NaN quirk reported).

    Example:
        >>> MSEComparator().element_compare(torch.tensor([1, 3]), torch.tensor([1, 1]))
        2.0
    """

    difference_sums_need_l1: ClassVar[bool] = False
    """Scores come from ``finite_difference_sums`` (``need_l1``), which the gap may compute ahead."""

    def element_compare(self, a: Any, b: Any) -> float:
        """``mean((a - b)²)`` after the reference float conversion."""
        fast = finite_difference_sums(a, b, need_l1=False)
        if fast is not None:
            return fast[1] / fast[3]
        return mean_squared_error(reference_float64(a), reference_float64(b))


register_comparator("mse", MSEComparator)
