"""Which graph nodes numdiff captures, and what it knows about them before running anything.

One rule decides which nodes of a reference graph count as "ops" for the numerical gap, the same
rule the reference (ExecuTorch 1.5.1 devtools) applies in three places (capture, op names, stack
traces): a node is selected when

* ``node.op == "call_function"``,
* ``node.meta["debug_handle"]`` is present and not ``None`` (``0``, the "unset" handle that
  back-propagation gives ATen nodes with no Edge counterpart, *is* selected, as in the reference),
* and ``"getitem"`` does not occur in ``node.name`` (a substring test on the node's name, not a
  test of its target, reproduced on purpose for drop-in answers).

The functions here only read the graph; running it is :mod:`numdiff.capture.interpreter`'s job.

Example:
    >>> import torch
    >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    >>> for n in gm.graph.nodes:
    ...     if n.op == "call_function":
    ...         n.meta["debug_handle"] = 7
    >>> aot_debug_handle_to_op_names(gm)
    {(7,): ['relu', 'add']}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from numdiff._core.types import DebugHandle
from numdiff.errors import CaptureError
from numdiff.program.signatures import CONTROL_FLOW_SUBGRAPH_ARGS

__all__ = [
    "DEBUG_HANDLE_KEY",
    "FROM_NODE_KEY",
    "UNSET_DEBUG_HANDLE",
    "aot_debug_handle_to_op_names",
    "aot_debug_handle_to_stack_traces",
    "handle_key",
    "is_captured_node",
    "iter_nodes_with_control_flow",
]

_log = logging.getLogger(__name__)

#: ``node.meta`` key holding the debug handle ExecuTorch assigned to a node.
DEBUG_HANDLE_KEY = "debug_handle"
#: ``node.meta`` key holding the node's provenance (a list of ``torch.fx.traceback.NodeSource``).
FROM_NODE_KEY = "from_node"
#: Handle that back-propagation gives ATen nodes no Edge node descends from.
UNSET_DEBUG_HANDLE = 0

# Higher-order ops whose graph-module arguments hold nodes of their own, and at which argument
# positions; the same set ExecuTorch's graph walks descend into.


def handle_key(debug_handle: int | Iterable[int]) -> DebugHandle:
    """Turn a node's ``debug_handle`` meta (an int or a sequence of ints) into a dict key.

    Args:
        debug_handle: The value of ``node.meta["debug_handle"]``.

    Returns:
        ``(h,)`` for an int ``h``, ``tuple(debug_handle)`` for a list or tuple.

    Example:
        >>> handle_key(3), handle_key([3, 4])
        ((3,), (3, 4))
    """
    if isinstance(debug_handle, int):
        return (debug_handle,)
    return tuple(debug_handle)


def is_captured_node(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an op whose output the numerical gap captures (see the module docstring).

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x))
        >>> relu = next(n for n in gm.graph.nodes if n.op == "call_function")
        >>> is_captured_node(relu)
        False
        >>> relu.meta["debug_handle"] = 1
        >>> is_captured_node(relu)
        True
    """
    return (
        node.op == "call_function"
        and node.meta.get(DEBUG_HANDLE_KEY) is not None
        and "getitem" not in node.name
    )


def aot_debug_handle_to_op_names(graph_module: torch.fx.GraphModule) -> dict[DebugHandle, list[str]]:
    """Map each debug handle of the graph's captured nodes to their node names, in graph order.

    Only the top-level graph is read (nodes inside control-flow subgraphs are not ops of their own
    for the gap). Several nodes may share a handle (a Linear lowered to ``permute_copy`` + ``addmm``):
    all their names are listed.

    Args:
        graph_module: The reference graph (e.g. ``ExportedProgram.module()``).

    Returns:
        ``{handle: [node.name, ...]}``, the reference's ``debug_handle_to_op_names`` mapping.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x * 2))
        >>> for h, n in zip([4, 4], [n for n in gm.graph.nodes if n.op != "placeholder"]):
        ...     n.meta["debug_handle"] = h
        >>> aot_debug_handle_to_op_names(gm)
        {(4,): ['mul', 'relu']}
    """
    mapping: dict[DebugHandle, list[str]] = {}
    for node in graph_module.graph.nodes:
        if is_captured_node(node):
            mapping.setdefault(handle_key(node.meta[DEBUG_HANDLE_KEY]), []).append(node.name)
    return mapping


def aot_debug_handle_to_stack_traces(
    graph_module: torch.fx.GraphModule, graph_name: str | None = None
) -> dict[DebugHandle, dict[str, str | None]]:
    """Map each debug handle of the graph's captured nodes to ``{node.name: node.stack_trace}``.

    Logs a warning (as the reference does) when the graph has captured nodes but none of them
    carries a stack trace, since the ``stacktraces`` column will then hold only ``None``.

    Args:
        graph_module: The reference graph.
        graph_name: Name used in the warning (e.g. ``"exported_program"``). Defaults to ``None``
            (the warning then says "the reference graph").

    Returns:
        ``{handle: {node.name: stack trace or None}}``.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x))
        >>> relu = [n for n in gm.graph.nodes][1]
        >>> relu.meta.update(debug_handle=2, stack_trace="File 'm.py', line 3")
        >>> aot_debug_handle_to_stack_traces(gm)
        {(2,): {'relu': "File 'm.py', line 3"}}
    """
    mapping: dict[DebugHandle, dict[str, str | None]] = {}
    any_trace = False
    for node in graph_module.graph.nodes:
        if not is_captured_node(node):
            continue
        trace = node.meta.get("stack_trace")
        any_trace = any_trace or trace is not None
        mapping.setdefault(handle_key(node.meta[DEBUG_HANDLE_KEY]), {})[node.name] = trace
    if mapping and not any_trace:
        where = f"reference graph {graph_name!r}" if graph_name else "the reference graph"
        _log.warning(
            "No stack traces in %s: the 'stacktraces' column will hold None.\n"
            "Export the model with stack traces kept to fill it.",
            where,
        )
    return mapping


def iter_nodes_with_control_flow(graph_module: torch.fx.GraphModule) -> Iterator[torch.fx.Node]:
    """Yield every node of ``graph_module``, then of its control-flow subgraphs, breadth first.

    Subgraphs are the graph-module arguments of ``torch.ops.higher_order.cond`` (true and false
    branches), ``map_impl`` and ``scan`` (the body), visited in the order their ops appear — the
    walk debug-handle generation and back-propagation use.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: x + 1)
        >>> [n.op for n in iter_nodes_with_control_flow(gm)]
        ['placeholder', 'call_function', 'output']
    """
    ops = _control_flow_ops()
    queue = [graph_module]
    while queue:
        current = queue.pop(0)
        subgraphs: list[torch.fx.GraphModule] = []
        for node in current.graph.nodes:
            yield node
            if node.op != "call_function":
                continue
            for op, arg_indices in ops:
                if node.target is op:
                    subgraphs.extend(_subgraph_arg(current, node, i) for i in arg_indices)
        queue.extend(subgraphs)


def _control_flow_ops() -> list[tuple[Any, tuple[int, ...]]]:
    higher_order = torch.ops.higher_order
    return [
        (getattr(higher_order, name), indices)
        for name, indices in CONTROL_FLOW_SUBGRAPH_ARGS
        if hasattr(higher_order, name)
    ]


def _subgraph_arg(owner: torch.fx.GraphModule, node: torch.fx.Node, index: int) -> torch.fx.GraphModule:
    arg = node.args[index]
    if not (isinstance(arg, torch.fx.Node) and arg.op == "get_attr" and isinstance(arg.target, str)):
        raise CaptureError(
            f"node {node.name!r} ({node.target}): argument {index} is not a get_attr of a subgraph\n"
            "Control-flow ops must name their branch/body graph modules with get_attr nodes."
        )
    sub = owner.get_submodule(arg.target)
    if not isinstance(sub, torch.fx.GraphModule):
        raise CaptureError(
            f"node {node.name!r}: submodule {arg.target!r} is a {type(sub).__name__}, not a GraphModule\n"
            "Control-flow branches must be graph modules."
        )
    return sub
