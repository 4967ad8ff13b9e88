"""Which of an analysis's gap rows compare the device with the model on the inputs it ran.

A run whose ops reading a graph input all disagree with their replays may have used other inputs
than the ETRecord's representative ones (``culprits.inputs_in_doubt``): its gap rows then compare the
device with a reference run on other inputs, and say nothing about the device. Every view that ranks
or compares runs by their SNRs (``numdiff diff`` and ``runs compare``, the run lists' lowest SNR, the
service's compare page, the fleet summary) leaves those rows out by this one rule; the culprit
verdicts stay, since each op is replayed on the device's own values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numdiff.analysis.models import Analysis
    from numdiff.analysis.records import GapRowModel

__all__ = ["doubted_methods", "is_clear", "rows_clear_of_doubt"]


def doubted_methods(analyses: Iterable[Analysis]) -> frozenset[str] | None:
    """The methods whose gap rows are left out because any of ``analyses`` may have used other inputs:
    empty for every row (a program of one method, or a doubting analysis that names none); None when
    none is in doubt."""
    doubting = [a.culprits for a in analyses if a.culprits.inputs_in_doubt]
    if not doubting:
        return None
    if any(not c.methods_in_doubt for c in doubting):
        return frozenset()
    return frozenset(m for c in doubting for m in c.methods_in_doubt)


def is_clear(row: GapRowModel, methods: frozenset[str] | None) -> bool:
    """Whether ``row`` is kept, given what :func:`doubted_methods` answered: every row when none is in
    doubt, none when every method is, else the rows of the methods not in doubt."""
    return methods is None or (bool(methods) and row.method not in methods)


def rows_clear_of_doubt(analysis: Analysis) -> list[GapRowModel]:
    """The analysis's gap rows that compare the device with the model on the inputs it ran."""
    methods = doubted_methods([analysis])
    return [r for r in (analysis.gap.rows if analysis.gap is not None else []) if is_clear(r, methods)]
