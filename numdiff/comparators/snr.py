"""SNR: signal-to-noise ratio in dB (reference numbers, NaN quirk included)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from numdiff.comparators.numerics import finite_difference_sums, reference_float64, same_shape
from numdiff.comparators._registry import register_comparator
from numdiff.comparators.base import NumericalComparatorBase

__all__ = ["SNRComparator", "signal_to_noise_ratio", "snr_db"]


def signal_to_noise_ratio(signal: torch.Tensor, other: torch.Tensor) -> float:
    """``10·log10(mean(signal²) / mean((signal - other)²))`` in the tensors' own dtype.

    Edge cases, all kept as IEEE gives them (never turned into large finite numbers):

    * zero noise (identical inputs), non-zero signal → ``+inf``
    * zero signal, non-zero noise → ``-inf``
    * zero signal and zero noise (both all-zero) → ``nan``
    * a NaN anywhere → ``nan``

    Example:
        >>> signal_to_noise_ratio(torch.tensor([1.0]), torch.tensor([1.0]))
        inf
    """
    signal, other = same_shape(signal, other)
    signal_power = torch.mean(torch.pow(signal, 2))
    noise_power = torch.mean(torch.pow(signal - other, 2))
    return float((10 * torch.log10(signal_power / noise_power)).item())


def snr_db(signal_power: float, noise_power: float) -> float:
    """``10·log10(signal/noise)`` with the IEEE answers the tensor formula gives at the edges.

    The one SNR-from-powers definition: the gap table, the culprit rows, the taps and the
    quantization view all use it. Zero signal and zero noise (two all-zero tensors) is ``nan``,
    as the reference's tensor formula gives (0/0); a view that wants to call such a pair
    "identical" checks ``noise_power == 0`` itself.

    Example:
        >>> snr_db(1.0, 0.0), snr_db(0.0, 1.0), snr_db(100.0, 1.0)
        (inf, -inf, 20.0)
        >>> snr_db(0.0, 0.0)
        nan
    """
    if noise_power == 0:
        return math.inf if signal_power > 0 else math.nan
    if signal_power == 0:
        return -math.inf
    return 10 * math.log10(signal_power / noise_power)


class SNRComparator(NumericalComparatorBase):
    """Signal-to-noise ratio of the AOT output against the difference, as the reference computes it.

    Higher is better; ``+inf`` means identical. The inputs go through the reference's float64
    conversion (NaN → 0, reported), so a NaN-only difference can read as ``+inf``.

    Example:
        >>> SNRComparator().element_compare(1, 2)
        0.0
    """

    higher_is_better = True

    difference_sums_need_l1: ClassVar[bool] = False
    """Scores come from ``finite_difference_sums`` (``need_l1``), which the gap may compute ahead."""

    def element_compare(self, a: Any, b: Any) -> float:
        """SNR of ``a`` against ``a - b`` after the reference float conversion."""
        fast = finite_difference_sums(a, b, need_l1=False)
        if fast is not None:
            signal, noise, _, n = fast
            return snr_db(signal / n, noise / n)
        return signal_to_noise_ratio(reference_float64(a), reference_float64(b))


register_comparator("snr", SNRComparator)
