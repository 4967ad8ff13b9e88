"""Tensor conversions shared by every metric: explicit upcasts and the reference's NaN quirk.

Two conversions, deliberately separate:

* :func:`upcast_float64` only changes the dtype (every value, NaN and inf included, is kept).
  numdiff's own metrics use it.
* :func:`reference_float64` is the reference's float conversion, reproduced for drop-in numbers:
  when a tensor holds a NaN, the reference replaces every NaN with 0 *and* every ±inf with the
  largest finite float64. This hides the very faults a numerical debugger hunts, so each
  replacement is counted and reported (a warning, or a tally inside :func:`collect_replacements`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

from numdiff.errors import UsageError

__all__ = [
    "ReplacementTally",
    "collect_replacements",
    "reference_float64",
    "same_shape",
    "upcast_float64",
]


@dataclass(slots=True)
class ReplacementTally:
    """Running count of values :func:`reference_float64` replaced (a counter, hence mutable)."""

    nan: int = 0
    """NaN values replaced by 0."""
    inf: int = 0
    """±inf values replaced by ±1.797e308 (only in tensors that also held a NaN)."""

    def __bool__(self) -> bool:
        return bool(self.nan or self.inf)

    def describe(self) -> str:
        """Human summary, e.g. ``"2 NaN replaced by 0"``."""
        parts = []
        if self.nan:
            parts.append(f"{self.nan} NaN replaced by 0")
        if self.inf:
            parts.append(f"{self.inf} inf replaced by the largest finite float64")
        return ", ".join(parts)


_ACTIVE_TALLY: ContextVar[ReplacementTally | None] = ContextVar("numdiff_replacement_tally", default=None)


@contextmanager
def collect_replacements() -> Iterator[ReplacementTally]:
    """Count :func:`reference_float64` replacements in this block instead of warning per call.

    Example:
        >>> with collect_replacements() as tally:
        ...     _ = reference_float64(torch.tensor([float("nan"), 1.0]))
        >>> tally.nan
        1
    """
    tally = ReplacementTally()
    token = _ACTIVE_TALLY.set(tally)
    try:
        yield tally
    finally:
        _ACTIVE_TALLY.reset(token)


def upcast_float64(value: Any) -> torch.Tensor:
    """A detached float64 CPU tensor holding the same values (scalars become 0-d tensors).

    Raises:
        UsageError: ``value`` is a list/tuple or cannot be turned into a tensor.

    Example:
        >>> upcast_float64(torch.tensor([1, 2], dtype=torch.int8))
        tensor([1., 2.], dtype=torch.float64)
    """
    if isinstance(value, Sequence):
        raise UsageError(
            f"cannot convert a {type(value).__name__} of {len(value)} values to one tensor\n"
            "Compare sequences element by element."
        )
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UsageError(
            f"cannot convert a value of type {type(value).__name__} to a tensor: {e}\n"
            "Metrics accept tensors and Python numbers."
        ) from e
    return tensor.detach().cpu()


def reference_float64(value: Any) -> torch.Tensor:
    """The reference's float conversion, NaN quirk included; every replacement is reported.

    Converts like :func:`upcast_float64`; then, only if the tensor holds a NaN, applies
    ``torch.nan_to_num``: NaN → 0, +inf → +1.797e308, -inf → -1.797e308. Inside
    :func:`collect_replacements` the counts go to the tally; otherwise each call that replaced
    something warns.

    Example:
        >>> with collect_replacements():
        ...     reference_float64(torch.tensor([float("nan"), 2.0]))
        tensor([0., 2.], dtype=torch.float64)
    """
    tensor = upcast_float64(value)
    nan_mask = torch.isnan(tensor)
    if not bool(nan_mask.any()):
        return tensor
    found = ReplacementTally(nan=int(nan_mask.sum()), inf=int(torch.isinf(tensor).sum()))
    tally = _ACTIVE_TALLY.get()
    if tally is None:
        warnings.warn(
            f"numdiff: reference float conversion: {found.describe()} (reference behaviour).\n"
            "numdiff's cosine and max_abs metrics keep NaN; use them to see it.",
            UserWarning,
            stacklevel=2,
        )
    else:
        tally.nan += found.nan
        tally.inf += found.inf
    return torch.nan_to_num(tensor)


def same_shape(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(a, b)`` with ``b`` viewed in ``a``'s shape when only the shapes differ.

    Numbers are compared element by element in row-major order, never broadcast.

    Raises:
        UsageError: The two hold different numbers of elements.

    Example:
        >>> a, b = same_shape(torch.zeros(2, 3), torch.ones(6))
        >>> tuple(b.shape)
        (2, 3)
    """
    if a.shape == b.shape:
        return a, b
    if a.numel() != b.numel():
        raise UsageError(
            f"shapes {tuple(a.shape)} and {tuple(b.shape)} hold different numbers of elements "
            f"({a.numel()} vs {b.numel()})\nElement-wise metrics need the same elements on both sides."
        )
    return a, b.reshape(a.shape)
