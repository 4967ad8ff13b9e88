"""What both sides contribute to the numerical gap: the reference graph's outputs and the runtime's.

:func:`gather` runs the reference graph on the representative inputs, keeps the outputs whose debug
handles meet a runtime handle, and collects the runtime outputs from the events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numdiff._core.etrecord import ETRecordLike
from numdiff._core.events import OPERATOR_CALL
from numdiff._core.types import DebugHandle
from numdiff.errors import MismatchedArtifactsError, MissingDataError
from numdiff.gap.aliased import AliasedOutput, emitted_handle_ids, is_aliased

if TYPE_CHECKING:
    import torch

    from numdiff.align import EventLike, RuntimeOutput

#: ``on_pair(aot_tensor, runtime_tensor)``: a likely pair, as soon as the reference graph produced it.
OnPair = Callable[[Any, Any], None]

__all__ = ["GapInputs", "OnPair", "gather", "module_paths", "representative_inputs", "require_etrecord", "stack_traces_for",
           "without_scratch"]


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
    aliased: tuple[AliasedOutput, ...] = ()
    """Reference ops the program aliased (no kernel, no event), in graph order (see numdiff.gap.aliased)."""
    rerun: Callable[[Callable[[DebugHandle, Any, Any], None]], Any] | None = None
    """Set by ``gather(..., shapes_only=True)``: ``aot_outputs`` then hold meta tensors (shape and dtype
    only) and ``rerun(on_output)`` runs the reference graph again, streaming (see numdiff.gap.stream)."""
    reusable_graph: tuple[torch.fx.GraphModule, str] | None = field(default=None, repr=False, compare=False)
    """The reference graph module that was run and its name, when running it again gives the same
    results (``numdiff.capture.runs_without_side_effects``): the culprits' replay reuses it."""


def stack_traces_for(aot_ops: list[str], by_handle: Mapping[DebugHandle, Mapping[str, str | None]]) -> dict[str, str | None]:
    """``{op name: stack trace}`` for a row's AOT ops (first handle that knows the op wins)."""
    out: dict[str, str | None] = {}
    for op in aot_ops:
        out[op] = next((traces[op] for traces in by_handle.values() if op in traces), None)
    return out


def require_etrecord(etrecord: ETRecordLike | None) -> ETRecordLike:
    """``etrecord``, or a :class:`MissingDataError` saying the comparison needs one."""
    if etrecord is None:
        raise MissingDataError(
            "the numerical gap needs an ETRecord\n"
            "Pass etrecord= (CLI: --etrecord) with the ETRecord written when the model was exported."
        )
    return etrecord


def representative_inputs(etrecord: ETRecordLike) -> list[object]:
    """The ETRecord's representative inputs (the runs the reference graph is run on)."""
    inputs: list[object] | None = getattr(etrecord, "_representative_inputs", None)
    if not inputs:
        raise MissingDataError(
            "the ETRecord has no representative inputs, so the reference graph cannot be run\n"
            "Generate the ETRecord with representative inputs: to_edge_transform_and_lower(..., "
            "generate_etrecord=True) on a program exported with example inputs, or pass them to generate_etrecord()."
        )
    return inputs


def gather(
    etrecord: ETRecordLike | None,
    events: Iterable[EventLike],
    *,
    reference_graph: str | None,
    disable_debug_handle_validation: bool,
    etdump_path: str | None = None,
    graph: tuple[torch.fx.GraphModule, str] | None = None,
    inputs: tuple[object, ...] | None = None,
    method: str = "forward",
    shapes_only: bool = False,
    split_delegates: bool = False,
    on_pair: OnPair | None = None,
) -> GapInputs:
    """Run the reference graph and collect the runtime outputs it will be compared with.

    ``graph`` (``(graph module, name)``) and ``inputs`` (one input tuple) replace the graph named
    by ``reference_graph`` and the representative inputs (see :mod:`numdiff.gap.methods`).
    ``shapes_only`` keeps meta tensors instead of the AOT outputs and sets ``rerun``.
    ``on_pair(aot_tensor, runtime_tensor)`` is called as soon as an op's output is kept, when the
    runtime logged one tensor under exactly its handle (the pair the comparison will most likely
    score; see :mod:`numdiff.gap.presum`).
    ``split_delegates`` (the culprit finder's, not the reference's rule) keeps delegate calls that
    share only a duplicated dequantize's id apart (see :func:`numdiff.align.own_delegate_ids`).
    """
    from numdiff._core.gc_pause import gc_paused

    with gc_paused():  # building and running the graph makes no cycles; full collections cost more than the work
        return _gather(etrecord, events, reference_graph=reference_graph,
                       disable_debug_handle_validation=disable_debug_handle_validation, etdump_path=etdump_path,
                       graph=graph, inputs=inputs, method=method, shapes_only=shapes_only, on_pair=on_pair,
                       split_delegates=split_delegates)


def _gather(
    etrecord: ETRecordLike | None,
    events: Iterable[EventLike],
    *,
    reference_graph: str | None,
    disable_debug_handle_validation: bool,
    etdump_path: str | None,
    graph: tuple[torch.fx.GraphModule, str] | None = None,
    inputs: tuple[object, ...] | None = None,
    method: str = "forward",
    shapes_only: bool = False,
    split_delegates: bool = False,
    on_pair: OnPair | None = None,
) -> GapInputs:
    etrecord = require_etrecord(etrecord)
    from numdiff._core.heap import prefaulted_heap
    from numdiff.align import collect_runtime_outputs
    from numdiff.gap.presum import worker_threads
    from numdiff.schema.debug_buffer import MissingTensor

    events = list(events)
    runtime_outputs, runtime_op_names = collect_runtime_outputs(events, split_delegates=split_delegates)
    if not any(_has_values(r.data) for r in runtime_outputs.values()):
        logged = [ev for ev in events if ev.name != OPERATOR_CALL and _has_values(getattr(ev, "debug_data", None))]
        if logged:
            raise MismatchedArtifactsError(
                f"ETDump {etdump_path!r} logs intermediate outputs for {len(logged)} events (e.g. {logged[0].name}), "
                "but the ETRecord gives none of them an op of its graph: the ETRecord describes another program\n"
                "Pass the ETRecord written when this exact program was exported and lowered.")
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
    runtime_outputs, scratch_notes = without_scratch(etrecord, runtime_outputs, method)
    runs = [inputs] if inputs is not None else representative_inputs(etrecord)
    # The outputs kept are about as large as the runtime's tensors: when the caller allows a second
    # thread, fault their pages in there while this one builds and runs the graph (numdiff._core.heap).
    ahead = 0 if shapes_only or not worker_threads() else _tensor_bytes(runtime_outputs.values())
    with prefaulted_heap(ahead):
        return _run_and_collect(etrecord, runtime_outputs, runtime_op_names, scratch_notes, runs, graph,
                                reference_graph=reference_graph,
                                disable_debug_handle_validation=disable_debug_handle_validation,
                                etdump_path=etdump_path, method=method, shapes_only=shapes_only, on_pair=on_pair)


def _run_and_collect(
    etrecord: ETRecordLike,
    runtime_outputs: dict[DebugHandle, RuntimeOutput],
    runtime_op_names: dict[DebugHandle, list[str]],
    scratch_notes: tuple[str, ...],
    runs: list[Any],
    graph: tuple[torch.fx.GraphModule, str] | None,
    *,
    reference_graph: str | None,
    disable_debug_handle_validation: bool,
    etdump_path: str | None,
    method: str,
    shapes_only: bool,
    on_pair: OnPair | None,
) -> GapInputs:
    from numdiff.align import delegate_output_ids
    from numdiff.capture import (aot_debug_handle_to_op_names, aot_debug_handle_to_stack_traces,
                                 capture_intermediate_outputs, resolve_reference_graph, runs_without_side_effects)
    from numdiff.schema.etrecord import op_type_name
    import torch

    graph_module, graph_name = (graph if graph is not None else
                                resolve_reference_graph(etrecord, reference_graph, disable_debug_handle_validation))
    # A captured handle can pair only if it shares an id with some runtime handle.
    runtime_ids: set[int] = set().union(*runtime_outputs)
    kept: dict[DebugHandle, Any] = {}
    emitted = emitted_handle_ids((getattr(etrecord, "_debug_handle_map", None) or {}).get(method))
    aliased: list[AliasedOutput] = []

    solo = _solo_handles(aot_debug_handle_to_op_names(graph_module), runtime_outputs) \
        if on_pair is not None and not shapes_only else set()

    def keep_if_paired(handle: DebugHandle, node: torch.fx.Node, value: object) -> None:
        if not runtime_ids.isdisjoint(handle):
            kept[handle] = _shape_of(value) if shapes_only else value
            if on_pair is not None and handle in solo:
                runtime = _sole_tensor(runtime_outputs.get(handle))
                if runtime is not None and isinstance(value, torch.Tensor) and runtime.numel() == value.numel():
                    on_pair(value, runtime)
        elif is_aliased(op_type := op_type_name(node), handle, emitted):
            aliased.append(AliasedOutput(handle, node.name, op_type, _shape_of(value) if shapes_only else value))

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
        notes=(*result.notes, *scratch_notes),
        aliased=tuple(aliased),
        delegate_outputs=delegate_output_ids(graph_module, runtime_outputs),
        method=method,
        rerun=(lambda on_output: capture_intermediate_outputs(graph_module, [runs], on_output=on_output))
        if shapes_only else None,
        reusable_graph=(graph_module, graph_name) if runs_without_side_effects(graph_module) else None,
    )


def _solo_handles(aot_handles: Iterable[DebugHandle], runtime_handles: Iterable[DebugHandle]) -> set[DebugHandle]:
    """Handles that pair one to one: the same handle on both sides, none of its ids in any other handle."""
    from collections import Counter

    aot, runtime = list(aot_handles), set(runtime_handles)
    counts = Counter(i for h in (*aot, *runtime) for i in set(h))
    return {h for h in aot if h in runtime and all(counts[i] == 2 for i in h)}


def _tensor_bytes(runtime_outputs: Iterable[RuntimeOutput]) -> int:
    """Bytes of the tensors the runtime logged (the reference graph's kept outputs are about as large)."""
    import torch

    total = 0
    for runtime in runtime_outputs:
        data = runtime.data
        for value in data if isinstance(data, (list, tuple)) else (data,):
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
    return total


def _sole_tensor(runtime: RuntimeOutput | None) -> torch.Tensor | None:
    """The one tensor a runtime output logged (None for several values, none, or not a tensor)."""
    import torch

    if runtime is None:
        return None
    data = runtime.data
    if isinstance(data, (list, tuple)):
        data = data[0] if len(data) == 1 else None
    return data if isinstance(data, torch.Tensor) else None


def without_scratch(
    etrecord: ETRecordLike, runtime_outputs: dict[DebugHandle, RuntimeOutput], method: str
) -> tuple[dict[DebugHandle, RuntimeOutput], tuple[str, ...]]:
    """The runtime outputs without the scratch buffers delegate calls log after their outputs (schema 5.5).

    The scratch sizes come from the lowered modules of the ETRecord's programs for ``method`` (an
    Edge program recorded after lowering, or a ``graph_map`` program); only read when the runtime
    logged a delegate call.
    """
    from numdiff._core.events import DELEGATE_CALL
    from numdiff.align import drop_scratch, partition_scratch

    if not any(r.op_name == DELEGATE_CALL for r in runtime_outputs.values()):
        return runtime_outputs, ()
    programs: list[object] = []
    edge = getattr(etrecord, "edge_dialect_program", None)
    if isinstance(edge, dict):
        programs.append(edge.get(method))
    else:
        programs.append(edge)
    graph_map: dict[str, object] = getattr(etrecord, "graph_map", None) or {}
    programs.extend(graph_map[key] for key in graph_map if key == method or key.endswith("/" + method))
    graphs = [gm for gm in (getattr(p, "graph_module", None) for p in programs) if gm is not None]
    return drop_scratch(runtime_outputs, partition_scratch(graphs))


def _shape_of(value: object) -> object:
    """``value`` with every tensor replaced by a meta tensor of its shape and dtype (no storage)."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_shape_of(v) for v in value) if type(value) in (list, tuple) else [_shape_of(v) for v in value]
    return value


def module_paths(graph_module: torch.fx.GraphModule) -> dict[str, str]:
    """``{node name: path of the innermost module it came from}`` (e.g. ``"L['self'].fc1"``)."""
    out: dict[str, str] = {}
    for node in graph_module.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            path, kind = list(stack.values())[-1][:2] if isinstance(list(stack.values())[-1], (tuple, list)) else ("", "")
            out[node.name] = path or str(kind).rsplit(".", 1)[-1]
    return out


def _has_values(data: object) -> bool:
    """Whether a runtime event logged anything (an empty list means it logged no values)."""
    return data is not None and not (isinstance(data, (list, tuple)) and len(data) == 0)


def _is_missing(data: object, missing_type: type) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_is_missing(d, missing_type) for d in data)
    return isinstance(data, missing_type)
