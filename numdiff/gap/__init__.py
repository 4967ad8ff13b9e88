"""The numerical gap: capture the reference graph, pair its outputs with the runtime's, compare.

``inputs`` gathers both sides; ``table`` builds the reference's rows (:func:`numeric_gap`) and numdiff's fuller report
(:func:`numeric_gap_report`) from the inputs :func:`gather` collects; ``methods`` runs it for every
method of a multi-method program; ``stream`` gives the same rows in bounded memory; ``aliased`` lists the
reference ops the program aliased (no kernel, no event).
"""

from __future__ import annotations

from numdiff.gap.inputs import (
    GapInputs,
    gather,
    module_paths,
    representative_inputs,
    require_etrecord,
    stack_traces_for,
    without_scratch,
)
from numdiff.gap.table import GapReport, numeric_gap, numeric_gap_report

__all__ = ["GapInputs", "GapReport", "gather", "module_paths", "numeric_gap", "numeric_gap_report",
           "representative_inputs", "require_etrecord", "stack_traces_for", "without_scratch"]
