"""Top-k agreement: how many of the AOT output's k largest entries the runtime also ranks in its top k."""

from __future__ import annotations

from typing import Any

import torch

from numdiff.comparators.numerics import same_shape, upcast_float64
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase
from numdiff.errors import UsageError

__all__ = ["TopKAgreementComparator", "topk_agreement"]

DEFAULT_K = 5


def topk_agreement(reference: torch.Tensor, other: torch.Tensor, k: int = DEFAULT_K) -> float:
    """Fraction of ``reference``'s top-``k`` indices (last dimension) that are in ``other``'s top ``k``,
    averaged over the other dimensions. ``k`` is capped at the last dimension's size.

    1.0 means the same top-k set (order within it is not compared); a NaN anywhere gives ``nan``.

    Example:
        >>> topk_agreement(torch.tensor([4.0, 3.0, 2.0, 1.0]), torch.tensor([1.0, 3.0, 2.0, 4.0]), k=2)
        0.5
    """
    a, b = same_shape(upcast_float64(reference), upcast_float64(other))
    if a.numel() == 0:
        return 1.0
    if bool(torch.isnan(a).any()) or bool(torch.isnan(b).any()):
        return float("nan")
    if a.dim() == 0:
        a, b = a.reshape(1), b.reshape(1)
    k = min(k, a.shape[-1])
    top_a = torch.topk(a, k, dim=-1).indices
    top_b = torch.topk(b, k, dim=-1).indices
    hits = (top_a.unsqueeze(-1) == top_b.unsqueeze(-2)).any(dim=-1).sum(dim=-1)
    return float((hits.to(torch.float64) / k).mean().item())


class TopKAgreementComparator(NumericalComparatorBase):
    """Top-k agreement of the runtime output with the AOT one over the last dimension (logits).

    Args:
        k: How many top entries to compare. Defaults to 5.

    Higher is better; 1.0 means the runtime ranks the same k entries on top.

    Example:
        >>> TopKAgreementComparator(k=1).element_compare(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 1.0]))
        0.0
    """

    higher_is_better = True

    def __init__(self, k: int = DEFAULT_K, inspector: Any | None = None) -> None:
        super().__init__(inspector)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UsageError(f"top-k agreement needs a whole number k >= 1, got {k!r}\nPass e.g. k=5.")
        self.k = k

    def element_compare(self, a: Any, b: Any) -> float:
        """Fraction of ``a``'s top-k entries that ``b`` also ranks in its top k."""
        return topk_agreement(torch.as_tensor(a), torch.as_tensor(b), self.k)


register_comparator("topk", TopKAgreementComparator)
register_comparator("top_k", TopKAgreementComparator)
