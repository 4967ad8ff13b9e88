"""The numerical gap: capture → align → compare, for one ETRecord and one set of runtime events.

``numeric_gap`` is what ``Inspector.calculate_numeric_gap`` runs (the reference's rows and
numbers); ``numeric_gap_report`` is numdiff's fuller analysis: multi-output ops split into their
elements, view-only shape mismatches compared as reshapes, unmatched rows kept with their reason,
and every note from every stage.

Memory: reference-graph outputs are captured by streaming, and only those whose handle meets a
runtime handle are kept; runtime tensors stay views on the memory-mapped debug buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numdiff._types import DebugHandle
from numdiff.errors import MismatchedArtifactsError, MissingDataError

if TYPE_CHECKING:
    import pandas as pd

    from numdiff.align import AlignmentReport, EventLike, RuntimeOutput
    from numdiff.comparators import GapTable, NumericalComparatorBase

__all__ = ["GapInputs", "GapReport", "numeric_gap", "numeric_gap_report"]


@dataclass(frozen=True, slots=True)
class GapInputs:
    """Everything both sides contributed, before comparison."""

    graph_name: str
    aot_outputs: dict[DebugHandle, Any]
    aot_op_names: dict[DebugHandle, list[str]]
    stack_traces: dict[DebugHandle, dict[str, str | None]]
    runtime_outputs: dict[DebugHandle, RuntimeOutput]
    runtime_op_names: dict[DebugHandle, list[str]]
    module_paths: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    method: str = "forward"
    delegate_outputs: dict[DebugHandle, tuple[int, ...]] = field(default_factory=dict)
    """``{runtime handle: output handle ids}`` of multi-output delegate calls (see numdiff.align)."""
    rerun: Callable[[Callable[[DebugHandle, Any, Any], None]], Any] | None = None
    """Set by ``gather(..., shapes_only=True)``: ``aot_outputs`` then hold meta tensors (shape and dtype
    only) and ``rerun(on_output)`` runs the reference graph again, streaming (see numdiff.gap_stream)."""


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


def stack_traces_for(aot_ops: list[str], by_handle: Mapping[DebugHandle, Mapping[str, str | None]]) -> dict[str, str | None]:
    """``{op name: stack trace}`` for a row's AOT ops (first handle that knows the op wins)."""
    out: dict[str, str | None] = {}
    for op in aot_ops:
        out[op] = next((traces[op] for traces in by_handle.values() if op in traces), None)
    return out


def _representative_inputs(etrecord: Any) -> Any:
    inputs = getattr(etrecord, "_representative_inputs", None)
    if not inputs:
        raise MissingDataError(
            "the ETRecord has no representative inputs, so the reference graph cannot be run\n"
            "Generate the ETRecord with representative inputs: to_edge_transform_and_lower(..., "
            "generate_etrecord=True) on a program exported with example inputs, or pass them to generate_etrecord()."
        )
    return inputs


def gather(
    etrecord: Any,
    events: Iterable[EventLike],
    *,
    reference_graph: str | None,
    disable_debug_handle_validation: bool,
    etdump_path: str | None = None,
    graph: tuple[Any, str] | None = None,
    inputs: Any = None,
    method: str = "forward",
    shapes_only: bool = False,
) -> GapInputs:
    """Run the reference graph and collect the runtime outputs it will be compared with.

    ``graph`` (``(graph module, name)``) and ``inputs`` (one input tuple) replace the graph named
    by ``reference_graph`` and the representative inputs (see :mod:`numdiff.gap_methods`).
    ``shapes_only`` keeps meta tensors instead of the AOT outputs and sets ``rerun``.
    """
    from numdiff._gc_pause import gc_paused

    with gc_paused():  # building and running the graph makes no cycles; full collections cost more than the work
        return _gather(etrecord, events, reference_graph=reference_graph,
                       disable_debug_handle_validation=disable_debug_handle_validation, etdump_path=etdump_path,
                       graph=graph, inputs=inputs, method=method, shapes_only=shapes_only)


def _gather(
    etrecord: Any,
    events: Iterable[EventLike],
    *,
    reference_graph: str | None,
    disable_debug_handle_validation: bool,
    etdump_path: str | None,
    graph: tuple[Any, str] | None = None,
    inputs: Any = None,
    method: str = "forward",
    shapes_only: bool = False,
) -> GapInputs:
    if etrecord is None:
        raise MissingDataError(
            "the numerical gap needs an ETRecord\n"
            "Pass etrecord= (CLI: --etrecord) with the ETRecord written when the model was exported."
        )
    from numdiff.align import collect_runtime_outputs, delegate_output_ids
    from numdiff.capture import aot_debug_handle_to_stack_traces, capture_intermediate_outputs, resolve_reference_graph
    from numdiff.schema.debug_buffer import MissingTensor

    runtime_outputs, runtime_op_names = collect_runtime_outputs(events)
    if not any(_has_values(r.data) for r in runtime_outputs.values()):
        raise MissingDataError(
            f"ETDump {etdump_path!r} holds no intermediate outputs to compare\n"
            "Run the model with intermediate-output logging (ETDumpGen debug level "
            "kIntermediateOutputs, or the Python bindings with a debug buffer) and pass that debug buffer."
        )
    if any(_is_missing(r.data, MissingTensor) for r in runtime_outputs.values()):
        raise MissingDataError(
            f"ETDump {etdump_path!r} logs intermediate tensors but no debug buffer was given\n"
            "Pass debug_buffer_path= (CLI: --debug-buffer) with the buffer the runtime wrote in the same run."
        )
    runs = [inputs] if inputs is not None else _representative_inputs(etrecord)
    graph_module, graph_name = (graph if graph is not None else
                                resolve_reference_graph(etrecord, reference_graph, disable_debug_handle_validation))
    # A captured handle can pair only if it shares an id with some runtime handle.
    runtime_ids: set[int] = set().union(*runtime_outputs)
    kept: dict[DebugHandle, Any] = {}

    def keep_if_paired(handle: DebugHandle, node: Any, value: Any) -> None:
        if not runtime_ids.isdisjoint(handle):
            kept[handle] = _shape_of(value) if shapes_only else value

    result = capture_intermediate_outputs(graph_module, [runs], on_output=keep_if_paired)
    if len(result) == 0 or not result.op_names:
        raise MissingDataError(
            f"running the reference graph {graph_name!r} captured no op outputs with debug handles\n"
            "Regenerate the ETRecord with ExecuTorch's devtools (it assigns the debug handles)."
        )
    if not kept:
        raise MismatchedArtifactsError(
            f"the ETRecord's graph {graph_name!r} and ETDump {etdump_path!r} share no debug handle: "
            f"{len(result)} AOT handles, {len(runtime_outputs)} runtime handles\n"
            "Pass the ETRecord and ETDump of the same exported program."
        )
    aot_outputs = {h: kept[h] for h in result.kept_nodes if h in kept}  # graph order, as captured
    return GapInputs(
        graph_name=graph_name,
        aot_outputs=aot_outputs,
        aot_op_names=result.op_names,
        stack_traces=aot_debug_handle_to_stack_traces(graph_module),
        runtime_outputs=runtime_outputs,
        runtime_op_names=runtime_op_names,
        module_paths=module_paths(graph_module),
        notes=tuple(result.notes),
        delegate_outputs=delegate_output_ids(graph_module, runtime_outputs),
        method=method,
        rerun=(lambda on_output: capture_intermediate_outputs(graph_module, [runs], on_output=on_output))
        if shapes_only else None,
    )


def _shape_of(value: Any) -> Any:
    """``value`` with every tensor replaced by a meta tensor of its shape and dtype (no storage)."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_shape_of(v) for v in value) if type(value) in (list, tuple) else [_shape_of(v) for v in value]
    return value


def module_paths(graph_module: Any) -> dict[str, str]:
    """``{node name: path of the innermost module it came from}`` (e.g. ``"L['self'].fc1"``)."""
    out: dict[str, str] = {}
    for node in graph_module.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            path, kind = list(stack.values())[-1][:2] if isinstance(list(stack.values())[-1], (tuple, list)) else ("", "")
            out[node.name] = path or str(kind).rsplit(".", 1)[-1]
    return out


def _has_values(data: Any) -> bool:
    """Whether a runtime event logged anything (an empty list means it logged no values)."""
    return data is not None and not (isinstance(data, (list, tuple)) and len(data) == 0)


def _is_missing(data: Any, missing_type: type) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_is_missing(d, missing_type) for d in data)
    return isinstance(data, missing_type)


def _reference_raises(report: AlignmentReport) -> bool:
    """Whether the reference's comparison aborts on these pairs (two tensors whose element counts differ)."""
    from numdiff.align import ShapeRelation, shape_relation

    def mismatched(aot: Any, runtime: Any) -> bool:
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
    if inputs.delegate_outputs and _reference_raises(report):
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


def numeric_gap_report(inputs: GapInputs, comparator: NumericalComparatorBase) -> GapReport:
    """numdiff's fuller analysis for gathered inputs (no warnings: everything is on the report)."""
    from numdiff.align import align_intermediate_outputs

    report = align_intermediate_outputs(inputs.aot_outputs, inputs.runtime_outputs,
                                        delegate_outputs=inputs.delegate_outputs)
    table = comparator.compare_aligned(report, inputs.aot_op_names, inputs.runtime_op_names)
    return GapReport(inputs.graph_name, type(comparator).__name__, table, report, inputs.stack_traces,
                     inputs.module_paths, inputs.notes, inputs.method)
