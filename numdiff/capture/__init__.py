"""Run the reference graph and capture every op's output by debug handle.

Imports torch; ``import numdiff`` does not import this package, so torch loads only when a
capture is needed.

Modules:

* :mod:`~numdiff.capture.nodes`: which nodes are captured; handle → op names / stack traces.
* :mod:`~numdiff.capture.interpreter`: :class:`IntermediateOutputCapturer`, :func:`capture_intermediate_outputs`.
* :mod:`~numdiff.capture.handles`: debug-handle back-propagation from the Edge to the ATen program.
* :mod:`~numdiff.capture.graphs`: :func:`resolve_reference_graph`.
* :mod:`~numdiff.capture.threads`: :func:`graph_threads`, the intra-op threads of a graph run.

Example:
    >>> import torch
    >>> from numdiff.capture import capture_intermediate_outputs
    >>> gm = torch.fx.symbolic_trace(lambda x: torch.exp(x))
    >>> next(n for n in gm.graph.nodes if n.op == "call_function").meta["debug_handle"] = 1
    >>> capture_intermediate_outputs(gm, [torch.zeros(1)]).outputs
    {(1,): tensor([1.])}
"""

from __future__ import annotations

from numdiff.capture.graphs import (
    EDGE_DIALECT_GRAPH,
    EXPORTED_PROGRAM_GRAPH,
    ETRecordPrograms,
    resolve_reference_graph,
)
from numdiff.capture.handles import (
    HandlePropagation,
    ancestor_node_ids,
    plan_debug_handle_propagation,
    propagate_back_debug_handle,
)
from numdiff.capture.interpreter import (
    CaptureResult,
    IntermediateOutputCapturer,
    OnOutput,
    capture_intermediate_outputs,
    runs_without_side_effects,
)
from numdiff.capture.threads import REFERENCE_THREADS_ENV, caller_threads, graph_threads, reference_threads
from numdiff.capture.nodes import (
    aot_debug_handle_to_op_names,
    aot_debug_handle_to_stack_traces,
    handle_key,
    is_captured_node,
)

__all__ = [
    "EDGE_DIALECT_GRAPH",
    "EXPORTED_PROGRAM_GRAPH",
    "CaptureResult",
    "ETRecordPrograms",
    "HandlePropagation",
    "IntermediateOutputCapturer",
    "OnOutput",
    "REFERENCE_THREADS_ENV",
    "aot_debug_handle_to_op_names",
    "aot_debug_handle_to_stack_traces",
    "ancestor_node_ids",
    "capture_intermediate_outputs",
    "caller_threads",
    "graph_threads",
    "handle_key",
    "is_captured_node",
    "plan_debug_handle_propagation",
    "propagate_back_debug_handle",
    "reference_threads",
    "resolve_reference_graph",
    "runs_without_side_effects",
]
