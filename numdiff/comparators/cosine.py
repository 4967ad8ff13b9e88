"""Cosine similarity (numdiff's own metric: float64, NaN propagated)."""

from __future__ import annotations

from typing import Any

import torch

from numdiff.comparators.numerics import same_shape, upcast_float64
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["CosineSimilarityComparator", "cosine_similarity"]


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> float:
    """``sum(a·b) / (‖a‖·‖b‖)`` over all elements, in the tensors' own dtype.

    1.0 means same direction. Undefined cases give ``nan``: an all-zero side (0/0), or a NaN
    anywhere. An inf gives ``nan`` too (inf/inf).

    Example:
        >>> cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0]))
        0.0
    """
    a, b = same_shape(a, b)
    dot = torch.sum(a * b)
    norms = torch.sqrt(torch.sum(torch.pow(a, 2))) * torch.sqrt(torch.sum(torch.pow(b, 2)))
    return float((dot / norms).item())


class CosineSimilarityComparator(NumericalComparatorBase):
    """Cosine similarity of the flattened outputs, upcast to float64; NaN is kept, not replaced.

    Example:
        >>> CosineSimilarityComparator().element_compare(torch.tensor([3, 4]), torch.tensor([6, 8]))
        1.0
    """

    higher_is_better = True

    def element_compare(self, a: Any, b: Any) -> float:
        """Cosine similarity of ``a`` and ``b`` in float64."""
        return cosine_similarity(upcast_float64(a), upcast_float64(b))


register_comparator("cosine", CosineSimilarityComparator)
register_comparator("cosine_similarity", CosineSimilarityComparator)
