"""Comparators: score each AOT/runtime output pair with one number.

Reach a metric by name or instance through :func:`get_comparator`; add one by subclassing
:class:`NumericalComparatorBase` (see its docstring) and calling :func:`register_comparator`.

Built-ins: ``"l1"``, ``"mse"``, ``"snr"`` (the reference's numbers), ``"cosine"`` (alias
``"cosine_similarity"``) and ``"max_abs"`` (numdiff's own: float64, NaN propagated).
:func:`compare_results` compares program outputs like the reference's function of that name.
"""

from __future__ import annotations

from numdiff._core.types import DebugHandle
from numdiff.comparators._registry import (
    available_comparators,
    get_comparator,
    normalize_name,
    register_comparator,
)
from numdiff.comparators._result import (
    GAP_COLUMNS,
    CompareNote,
    CompareNoteKind,
    GapRow,
    GapTable,
)
from numdiff.comparators.base import IntermediateOutputMapping, NumericalComparatorBase
from numdiff.comparators.cosine import CosineSimilarityComparator, cosine_similarity
from numdiff.comparators.l1 import L1Comparator, sum_abs_difference
from numdiff.comparators.max_abs import MaxAbsComparator, max_abs_difference
from numdiff.comparators.mse import MSEComparator, mean_squared_error
from numdiff.comparators.program_outputs import compare_results, program_output_metrics
from numdiff.comparators.snr import SNRComparator, signal_to_noise_ratio

__all__ = [
    "GAP_COLUMNS",
    "CompareNote",
    "CompareNoteKind",
    "CosineSimilarityComparator",
    "DebugHandle",
    "GapRow",
    "GapTable",
    "IntermediateOutputMapping",
    "L1Comparator",
    "MSEComparator",
    "MaxAbsComparator",
    "NumericalComparatorBase",
    "SNRComparator",
    "available_comparators",
    "compare_results",
    "cosine_similarity",
    "get_comparator",
    "max_abs_difference",
    "mean_squared_error",
    "normalize_name",
    "program_output_metrics",
    "register_comparator",
    "signal_to_noise_ratio",
    "sum_abs_difference",
]
