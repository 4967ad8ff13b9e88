"""L1: the sum of absolute element-wise differences (reference numbers, NaN quirk included)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from numdiff.comparators.numerics import finite_difference_sums, reference_float64, same_shape
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["L1Comparator", "sum_abs_difference"]


def sum_abs_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``sum(|a - b|)`` in the tensors' own dtype; 0.0 for identical or empty inputs.

    Example:
        >>> sum_abs_difference(torch.tensor([4.0, 9.0]), torch.tensor([1.0, 2.0]))
        10.0
    """
    a, b = same_shape(a, b)
    return float(torch.abs(a - b).sum().item())


class L1Comparator(NumericalComparatorBase):
    """Sum of absolute differences, computed exactly as the reference does.

    Both sides go through the reference's float64 conversion (:func:`numdiff.comparators.numerics.reference_float64`:
    a tensor holding NaN has its NaN set to 0 and ±inf to ±1.797e308; counted and reported).

    Example:
        >>> L1Comparator().element_compare(1, 2)
        1.0
    """

    difference_sums_need_l1: ClassVar[bool] = True
    """Scores come from ``finite_difference_sums`` (``need_l1``), which the gap may compute ahead."""

    def element_compare(self, a: Any, b: Any) -> float:
        """``sum(|a - b|)`` after the reference float conversion."""
        fast = finite_difference_sums(a, b)
        if fast is not None:
            return fast[2]
        return sum_abs_difference(reference_float64(a), reference_float64(b))


register_comparator("l1", L1Comparator)
