"""``Inspector.op_graph_dict``: the ETRecord's graphs as plain op lists, by graph name.

The reference builds, for the Edge program and every ``graph_map`` entry, an operator graph whose
op nodes carry the ``debug_handle``, ``stack_trace`` and ``nn_module_stack`` of the fx node.
numdiff keeps what those nodes hold for each ``call_function`` op (``getitem`` and memory
planning's ``alloc`` left out, as in the profiling view), in graph order, as frozen records. The
Edge program's graph is read from the ETRecord's JSON (no torch); other graphs are loaded when
first asked for.

Example:
    >>> graphs = inspector.op_graph_dict  # doctest: +SKIP
    >>> [n.op for n in graphs["edge_dialect_graph_module"].elements][:2]  # doctest: +SKIP
    ['aten_convolution_default', 'aten_relu_default']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numdiff.errors import UnknownNameError
from numdiff.program.graph_meta import OpNodeInfo

if TYPE_CHECKING:
    from numdiff._core.etrecord import ETRecordLike

__all__ = ["EDGE_DIALECT_GRAPH_KEY", "OperatorGraph", "OperatorNode", "OperatorGraphs", "operator_graphs"]

#: The name of the Edge program's graph, as the reference keys it.
EDGE_DIALECT_GRAPH_KEY = "edge_dialect_graph_module"


@dataclass(frozen=True, slots=True)
class OperatorNode:
    """One op node of a graph.

    Attributes:
        name: The fx node's name (``"aten_addmm_default"``).
        op: The op type, as events list it in ``op_types``.
        metadata: ``debug_handle``, ``stack_trace`` and ``nn_module_stack``, for those the node has.
    """

    name: str
    op: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def debug_handle(self) -> int | None:
        handle: int | None = self.metadata.get("debug_handle")
        return handle


@dataclass(frozen=True, slots=True)
class OperatorGraph:
    """The op nodes of one graph, in graph order."""

    graph_name: str
    elements: tuple[OperatorNode, ...]

    def nodes_by_debug_handle(self) -> dict[int, list[OperatorNode]]:
        """``{debug handle: [nodes]}`` (a handle may be shared, e.g. by ``permute_copy`` + ``addmm``)."""
        out: dict[int, list[OperatorNode]] = {}
        for node in self.elements:
            if node.debug_handle is not None:
                out.setdefault(node.debug_handle, []).append(node)
        return out


def graph_from_op_nodes(name: str, infos: list[OpNodeInfo]) -> OperatorGraph:
    nodes = []
    for info in infos:
        meta: dict[str, Any] = {}
        if info.debug_handle is not None:
            meta["debug_handle"] = info.debug_handle
        if info.stack_trace is not None:
            meta["stack_trace"] = info.stack_trace
        if info.nn_module_stack is not None:
            meta["nn_module_stack"] = info.nn_module_stack
        nodes.append(OperatorNode(info.name, info.op_type, meta))
    return OperatorGraph(name, tuple(nodes))


class OperatorGraphs(Mapping[str, OperatorGraph]):
    """A read-only ``{graph name: OperatorGraph}`` whose graphs are built when first looked up."""

    def __init__(self, loaders: dict[str, Callable[[], list[OpNodeInfo] | None]]) -> None:
        self._loaders = loaders
        self._graphs: dict[str, OperatorGraph] = {}

    def __getitem__(self, name: str) -> OperatorGraph:
        if name not in self._graphs:
            if name not in self._loaders:
                raise UnknownNameError(f"no graph named {name!r} in the ETRecord\n"
                                       f"Known graphs: {', '.join(self._loaders) or '(none)'}.")
            infos = self._loaders[name]()
            self._graphs[name] = graph_from_op_nodes(name, infos or [])
        return self._graphs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __repr__(self) -> str:
        return f"OperatorGraphs({list(self._loaders)})"


def operator_graphs(rec: ETRecordLike, edge_op_nodes: Callable[[], list[OpNodeInfo] | None]) -> OperatorGraphs:
    """The graphs of an ETRecord: every ``graph_map`` entry, then the Edge program's.

    Args:
        rec: The parsed ETRecord.
        edge_op_nodes: Gives the Edge program's op nodes (from JSON when numdiff parsed the record).
    """
    from numdiff.profile.symbolicate import op_nodes_from_graph

    loaders: dict[str, Callable[[], list[OpNodeInfo] | None]] = {}
    graph_map = rec.graph_map or {}
    for name in graph_map:
        loaders[name] = lambda name=name: op_nodes_from_graph(graph_map[name].graph_module)  # type: ignore[misc]
    if rec.edge_dialect_program is not None:
        loaders[EDGE_DIALECT_GRAPH_KEY] = edge_op_nodes
    return OperatorGraphs(loaders)
