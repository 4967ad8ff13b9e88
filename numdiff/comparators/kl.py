"""KL divergence of the softmax distributions over the last dimension (logits of a language model)."""

from __future__ import annotations

from typing import Any

import torch

from numdiff.comparators.numerics import same_shape, upcast_float64
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["KLDivergenceComparator", "kl_divergence"]


def kl_divergence(reference: torch.Tensor, other: torch.Tensor) -> float:
    """``KL(softmax(reference) || softmax(other))`` in nats over the last dimension, averaged over the rest.

    Both sides are read as logits (the softmax is taken here, in float64). 0.0 means the same
    distribution; a NaN anywhere gives ``nan``; an empty tensor gives 0.0.

    Example:
        >>> kl_divergence(torch.tensor([2.0, 0.0]), torch.tensor([2.0, 0.0]))
        0.0
        >>> round(kl_divergence(torch.tensor([0.0, 0.0]), torch.tensor([0.0, 100.0])), 3)
        49.307
    """
    a, b = same_shape(upcast_float64(reference), upcast_float64(other))
    if a.numel() == 0:
        return 0.0
    if a.dim() == 0:
        a, b = a.reshape(1), b.reshape(1)
    log_p, log_q = torch.log_softmax(a, dim=-1), torch.log_softmax(b, dim=-1)
    per_row = torch.sum(torch.exp(log_p) * (log_p - log_q), dim=-1)
    return float(per_row.mean().item())


class KLDivergenceComparator(NumericalComparatorBase):
    """KL divergence of the runtime's softmax distribution from the AOT one, over the last dimension.

    Meant for logits: both outputs go through a softmax on their last dimension (float64), and the
    divergence of each row is averaged. Lower is better; 0 means the same distribution.

    Example:
        >>> KLDivergenceComparator().element_compare(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]))
        0.0
    """

    def element_compare(self, a: Any, b: Any) -> float:
        """``KL(softmax(a) || softmax(b))`` over the last dimension, mean over the others."""
        return kl_divergence(torch.as_tensor(a), torch.as_tensor(b))


register_comparator("kl", KLDivergenceComparator)
register_comparator("kl_divergence", KLDivergenceComparator)
