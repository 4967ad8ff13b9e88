"""Comparators: the metric contract, its registry, one file per metric and the maths every package uses.

Each metric scores an AOT/runtime output pair with one number and says how to read it
(``higher_is_better``); :func:`snr_db` and :func:`finite_difference_sums` (in
:mod:`~numdiff.comparators.numerics`) are the functional maths the gap, the culprits and the
views share.

Reach a metric by name or instance through :func:`get_comparator`; add one by subclassing
:class:`NumericalComparatorBase` (see its docstring) and calling :func:`register_comparator`.

Built-ins: ``"l1"``, ``"mse"``, ``"snr"`` (the reference's numbers), ``"cosine"`` (alias
``"cosine_similarity"``) and ``"max_abs"`` (numdiff's own: float64, NaN propagated); for logits
and robust relative error, ``"kl"`` (alias ``"kl_divergence"``), ``"topk"`` (alias ``"top_k"``,
keyword ``k``) and ``"median_ratio"`` (alias ``"median_diff_ratio"``).
:func:`compare_results` compares program outputs like the reference's function of that name.
"""

from __future__ import annotations

from numdiff._core.types import DebugHandle
from numdiff.comparators._registry import (
    available_comparators,
    comparator_class,
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
from numdiff.comparators.kl import KLDivergenceComparator, kl_divergence
from numdiff.comparators.l1 import L1Comparator, sum_abs_difference
from numdiff.comparators.max_abs import MaxAbsComparator, max_abs_difference
from numdiff.comparators.median_ratio import MedianRatioComparator, median_diff_ratio
from numdiff.comparators.mse import MSEComparator, mean_squared_error
from numdiff.comparators.program_outputs import compare_results, program_output_metrics
from numdiff.comparators.snr import SNRComparator, signal_to_noise_ratio, snr_db
from numdiff.comparators.topk import TopKAgreementComparator, topk_agreement

__all__ = [
    "GAP_COLUMNS",
    "CompareNote",
    "CompareNoteKind",
    "CosineSimilarityComparator",
    "DebugHandle",
    "GapRow",
    "GapTable",
    "IntermediateOutputMapping",
    "KLDivergenceComparator",
    "L1Comparator",
    "MSEComparator",
    "MaxAbsComparator",
    "MedianRatioComparator",
    "NumericalComparatorBase",
    "SNRComparator",
    "TopKAgreementComparator",
    "available_comparators",
    "comparator_class",
    "compare_results",
    "cosine_similarity",
    "get_comparator",
    "kl_divergence",
    "max_abs_difference",
    "mean_squared_error",
    "median_diff_ratio",
    "normalize_name",
    "program_output_metrics",
    "register_comparator",
    "signal_to_noise_ratio",
    "snr_db",
    "sum_abs_difference",
    "topk_agreement",
]
