"""Runs against runs: where two deployments of one program part ways, which side departs, and how.

:func:`compare_runs` takes the runs of one ``.pte`` from different devices, backends or builds
(each an ETDump with its debug buffer) under the program's ETRecord, aligns them op by op through
the culprit replay (:func:`numdiff.culprits.find_culprits` on each run), and reports per run and op
the agreement with a base run, the first op where the run parts from the base, which side departs
from the reference there (each op replayed on that run's own inputs), and the systematic pattern of
the difference (:mod:`~numdiff.runs_compare.fit`: "outputs are 0.50× the base's, R² 1.00"). For
decode runs it reads the logits as tokens (:mod:`~numdiff.runs_compare.tokens`). CLI:
``numdiff compare-runs``.

Modules: :mod:`~numdiff.runs_compare.compare` (orchestration), :mod:`~numdiff.runs_compare.values`
(opening runs, logged values per op, the one-program check), :mod:`~numdiff.runs_compare.ops` (one
op of two runs), :mod:`~numdiff.runs_compare.fit`, :mod:`~numdiff.runs_compare.tokens`,
:mod:`~numdiff.runs_compare.records` (results and their JSON). Imports torch.
"""

from __future__ import annotations

from numdiff.runs_compare.compare import compare_runs
from numdiff.runs_compare.fit import Fit, fit_systematic
from numdiff.runs_compare.ops import DEFAULT_TOLERANCES, relative_difference
from numdiff.runs_compare.records import (
    Agreement,
    OpComparison,
    OutputComparison,
    RunComparison,
    RunsComparison,
    Side,
    TokenStep,
    TokenView,
)
from numdiff.runs_compare.tokens import argmax_margin
from numdiff.runs_compare.values import RunFiles

__all__ = [
    "DEFAULT_TOLERANCES",
    "Agreement",
    "Fit",
    "OpComparison",
    "OutputComparison",
    "RunComparison",
    "RunFiles",
    "RunsComparison",
    "Side",
    "TokenStep",
    "TokenView",
    "argmax_margin",
    "compare_runs",
    "fit_systematic",
    "relative_difference",
]
