"""The numerical gap: capture → align → compare, for one ETRecord and one set of runtime events.

``numeric_gap`` is what ``Inspector.calculate_numeric_gap`` runs (the reference's rows and
numbers); ``numeric_gap_report`` is numdiff's fuller analysis: multi-output ops split into their
elements, view-only shape mismatches compared as reshapes, unmatched rows kept with their reason,
ops the program aliased listed as "aliased, not logged" rows, and every note from every stage.

Memory: reference-graph outputs are captured by streaming, and only those whose handle meets a
runtime handle are kept; runtime tensors stay views on the memory-mapped debug buffer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from numdiff._core.types import DebugHandle
from numdiff.gap.inputs import GapInputs, stack_traces_for

if TYPE_CHECKING:
    import pandas as pd

    from numdiff.align import AlignmentReport
    from numdiff.comparators import GapRow, GapTable, NumericalComparatorBase

__all__ = ["GapReport", "aliased_rows", "numeric_gap", "numeric_gap_report", "reference_raises"]


@dataclass(frozen=True, slots=True)
class GapReport:
    """numdiff's per-layer gap analysis (see ``Inspector.numeric_gap_report``).

    Attributes:
        graph_name: The reference graph used ("exported_program", "edge_dialect_exported_program"...).
        metric: Name of the comparator class.
        table: Typed rows (``GapRow``: handles, ops, outputs, gap, how matched, note).
        alignment: The alignment report (pairs and notes).
        stack_traces: ``{handle: {node name: stack trace}}`` of the reference graph.
        module_paths: ``{node name: innermost module path}`` of the reference graph.
        notes: Remarks from capture (shared handles, ...).
        method: The program method compared (the reference graph's; ``"forward"``).
    """

    graph_name: str
    metric: str
    table: GapTable
    alignment: AlignmentReport
    stack_traces: dict[DebugHandle, dict[str, str | None]]
    module_paths: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = field(default=())
    method: str = "forward"

    def __len__(self) -> int:
        return len(self.table)

    def to_dataframe(self) -> pd.DataFrame:
        """Rows with the reference's columns plus ``stacktraces``, ``matched``, ``match``, ``note`` and ``method``.

        ``method`` names the program method each row belongs to, so rows of multi-method
        programs stay told apart when reports are concatenated.
        """
        df = self.table.to_dataframe(extended=True)
        df.insert(7, "stacktraces", [stack_traces_for(list(ops), self.stack_traces) for ops in df["aot_ops"]])
        df["method"] = self.method
        return df


def reference_raises(report: AlignmentReport) -> bool:
    """Whether the reference's comparison aborts on these pairs (two tensors whose element counts differ)."""
    from numdiff.align import ShapeRelation, shape_relation

    def mismatched(aot: object, runtime: object) -> bool:
        if isinstance(aot, (list, tuple)) and isinstance(runtime, (list, tuple)):
            return len(aot) != len(runtime) or any(mismatched(a, r) for a, r in zip(aot, runtime, strict=True))
        return (hasattr(aot, "shape") and hasattr(runtime, "shape")
                and shape_relation(aot, runtime) is ShapeRelation.MISMATCH)

    return any(mismatched(pair.aot_output, pair.runtime_output) for pair in report.pairs)


def numeric_gap(inputs: GapInputs, comparator: NumericalComparatorBase,
                release: Callable[[Any], None] | None = None) -> pd.DataFrame:
    """The reference's gap DataFrame (with its ``stacktraces`` column) for gathered inputs.

    ``release(runtime_output)`` is called once each pair is scored (debug-buffer pages can go).
    """
    from numdiff.align import pair_outputs
    from numdiff.comparators import NumericalComparatorBase

    report = pair_outputs(inputs.aot_outputs, inputs.runtime_outputs)
    if inputs.delegate_outputs and reference_raises(report):
        # The reference aborts this table; pair delegate outputs with the nodes that give them.
        report = pair_outputs(inputs.aot_outputs, inputs.runtime_outputs, delegate_outputs=inputs.delegate_outputs)
    report.warn("pairing runtime and AOT intermediate outputs", stacklevel=3)
    mapping = report.to_reference_mapping()
    if type(comparator).compare is NumericalComparatorBase.compare and release is not None:
        table = comparator.compare_to_table(mapping, inputs.aot_op_names, inputs.runtime_op_names,
                                            after_pair=lambda _aot, runtime: release(runtime))
        table.warn(f"comparing with {type(comparator).__name__}", stacklevel=3)
        df = table.to_dataframe()
    else:  # a comparator that overrides compare() itself gets the reference's call
        df = comparator.compare(mapping, inputs.aot_op_names, inputs.runtime_op_names)
    if len(df) > 0:
        df["stacktraces"] = [stack_traces_for(list(ops), inputs.stack_traces) for ops in df["aot_ops"]]
    return df


def aliased_rows(inputs: GapInputs) -> list[GapRow]:
    """One unmatched row per aliased op (:mod:`numdiff.gap.aliased`): no runtime value, note says why."""
    from numdiff.comparators import GapRow
    from numdiff.gap.aliased import ALIASED_NOTE

    return [GapRow(a.handle, [a.node], a.aot_output, [], (), None, [math.nan], matched=False, note=ALIASED_NOTE)
            for a in inputs.aliased]


def numeric_gap_report(inputs: GapInputs, comparator: NumericalComparatorBase) -> GapReport:
    """numdiff's fuller analysis for gathered inputs (no warnings: everything is on the report).

    Ops the program aliased (no kernel, no event) end the table as unmatched rows whose note says
    "aliased, not logged" (:func:`aliased_rows`).
    """
    from numdiff.align import align_intermediate_outputs

    report = align_intermediate_outputs(inputs.aot_outputs, inputs.runtime_outputs,
                                        delegate_outputs=inputs.delegate_outputs)
    table = comparator.compare_aligned(report, inputs.aot_op_names, inputs.runtime_op_names)
    if inputs.aliased:
        table = replace(table, rows=(*table.rows, *aliased_rows(inputs)))
    return GapReport(inputs.graph_name, type(comparator).__name__, table, report, inputs.stack_traces,
                     inputs.module_paths, inputs.notes, inputs.method)
