"""Carry debug handles from the Edge program back to the ATen ``exported_program``.

ExecuTorch gives debug handles to the *Edge* program's nodes only: every node whose greatest
ancestor (followed through ``node.meta["from_node"]``, a list of ``torch.fx.traceback.NodeSource``,
always through the last entry) is the same ATen node gets the same handle. An ancestor is identified
by ``(node name, graph id)``, where the graph id is ``id()`` of the graph it lived in at export
time; the ETRecord stores the ATen graph's as ``export_graph_id``. So the ATen node ``linear`` gets
the handle of the Edge nodes descending from ``("linear", export_graph_id)``.

The rules reproduce the reference's result:

1. Every ancestor of every Edge node (other than placeholders and the output) maps to that node's
   handle.
2. An ATen node (other than placeholders and the output) is *matched* when ``(name,
   export_graph_id)`` is such an ancestor, or else when one of its own ``from_node`` ancestors is
   (the nearest wins).
3. Validation: every Edge node's handle must belong to a matched ATen node; otherwise propagation
   fails (returns ``False``) and nothing is changed. ``disable_debug_handle_validation=True`` skips
   this check (ATen graphs whose symbolic-shape ops lost their ``from_node`` when re-exported).
4. Each ATen node then gets its matched handle, or ``0`` (``UNSET_DEBUG_HANDLE``) when no Edge node
   descends from it.

Where the reference crashes, numdiff answers: an Edge node without a ``debug_handle`` fails
validation (the reference raises ``KeyError``), an empty ``from_node`` list means "no ancestors"
(the reference raises ``IndexError``), and an ancestor reached from Edge nodes with
different handles is a conflict that fails validation, the first handle winning when validation is
off (the reference fails an ``assert``).

**Mutation**: :func:`propagate_back_debug_handle` writes ``debug_handle`` into the ATen program's
node meta *in place*, as the reference does (so ``etrecord.exported_program`` shows the handles
afterwards, as users of the reference expect). It is idempotent: it never reads the ATen handles it
writes, so a second call gives the same answer and the same meta. :func:`plan_debug_handle_propagation`
computes everything without changing anything.

Example:
    >>> import torch
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.nn.functional.linear(x, torch.ones(2, 2)).relu()
    >>> aten = torch.export.export(M(), (torch.ones(1, 2),))
    >>> edge = aten.run_decompositions()
    >>> by_origin = {}  # one handle per greatest ancestor, as ExecuTorch assigns them
    >>> for n in edge.graph.nodes:
    ...     if n.op == "call_function":
    ...         origin = ancestor_node_ids(n)[-1]
    ...         n.meta["debug_handle"] = by_origin.setdefault(origin, len(by_origin) + 1)
    >>> [(n.name, n.meta["debug_handle"]) for n in edge.graph.nodes if n.op == "call_function"]
    [('full', 1), ('permute', 2), ('mm', 2), ('relu', 3)]
    >>> propagate_back_debug_handle(aten, id(aten.graph), edge)
    True
    >>> [(n.name, n.meta["debug_handle"]) for n in aten.graph.nodes if n.op == "call_function"]
    [('ones', 1), ('linear', 2), ('relu', 3)]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

import torch
from torch.export import ExportedProgram

from numdiff.capture.nodes import (
    DEBUG_HANDLE_KEY,
    FROM_NODE_KEY,
    UNSET_DEBUG_HANDLE,
    iter_nodes_with_control_flow,
)

__all__ = [
    "HandlePropagation",
    "ancestor_node_ids",
    "plan_debug_handle_propagation",
    "propagate_back_debug_handle",
]

#: ``(node name, graph id as text)``: a node of some graph of the export flow.
NodeId = tuple[str, str]

#: An ``ExportedProgram``, or the ``GraphModule`` holding its graph.
ProgramLike = Union[ExportedProgram, torch.fx.GraphModule]


@dataclass(frozen=True, slots=True)
class HandlePropagation:
    """The outcome of matching an Edge program's handles to ATen nodes, before anything is applied.

    Attributes:
        assignments: Handle each ATen node (not placeholders/output, control-flow subgraphs
            included) would get; ``0`` for nodes no Edge node descends from.
        matched_handles: Edge handles that some ATen node carries.
        unmatched_edge_nodes: ``(edge node name, its handle)`` for Edge nodes whose handle no ATen
            node carries (``None`` when the node has no handle) — why validation failed.
        conflicts: ``(ancestor, first handle, other handle)`` for ancestors reached from Edge nodes
            with different handles.
    """

    assignments: dict[Any, Any]
    matched_handles: frozenset[Hashable]
    unmatched_edge_nodes: tuple[tuple[str, Any], ...]
    conflicts: tuple[tuple[NodeId, Any, Any], ...]

    @property
    def validated(self) -> bool:
        """True when every Edge node's handle has an ATen counterpart and nothing conflicts."""
        return not self.unmatched_edge_nodes and not self.conflicts

    def describe_failure(self, limit: int = 5) -> str:
        """One line saying why validation failed (empty when it did not).

        Args:
            limit: How many unmatched Edge nodes to name. Defaults to 5.
        """
        parts: list[str] = []
        if self.unmatched_edge_nodes:
            named = ", ".join(f"{name} (handle {h})" for name, h in self.unmatched_edge_nodes[:limit])
            more = len(self.unmatched_edge_nodes) - limit
            parts.append(
                f"{len(self.unmatched_edge_nodes)} Edge node(s) have no ATen counterpart: {named}"
                + (f" and {more} more" if more > 0 else "")
            )
        if self.conflicts:
            (name, gid), first, other = self.conflicts[0]
            parts.append(
                f"{len(self.conflicts)} ancestor(s) map to several handles, e.g. {name}.{gid}: {first} and {other}"
            )
        return "; ".join(parts)

    def apply(self) -> None:
        """Write :attr:`assignments` into the ATen nodes' ``debug_handle`` meta (in place)."""
        for node, handle in self.assignments.items():
            if isinstance(node, torch.fx.Node):  # records planned from provenance carry names only
                node.meta[DEBUG_HANDLE_KEY] = handle


def ancestor_node_ids(node: torch.fx.Node) -> list[NodeId]:
    """The node's ancestors, nearest first, following the last ``from_node`` entry at each step.

    Returns:
        ``[(name, graph id as text), ...]``; empty when the node has no ``from_node``.

    Example:
        >>> import torch
        >>> ep = torch.export.export(torch.nn.ReLU(), (torch.ones(1),)).run_decompositions()
        >>> relu = next(n for n in ep.graph.nodes if n.op == "call_function")
        >>> [name for name, _ in ancestor_node_ids(relu)]
        ['relu', 'relu']
    """
    sources = node.meta.get(FROM_NODE_KEY)
    if not sources:
        return []
    source = sources[-1]
    ids = [(str(source.name), str(source.graph_id))]
    while len(source.from_node) > 0:
        source = source.from_node[-1]
        ids.append((str(source.name), str(source.graph_id)))
    return ids


def plan_debug_handle_propagation(
    exported_program: ProgramLike | Sequence[Any],
    export_graph_id: int | str,
    edge_dialect_program: ProgramLike | Sequence[Any],
) -> HandlePropagation:
    """Match Edge handles to ATen nodes without changing either program.

    Args:
        exported_program: The ATen program (or its graph module), or its nodes' provenance
            records (then ``assignments`` is keyed by node name).
        export_graph_id: ``id()`` of the ATen graph at export time (the ETRecord's
            ``export_graph_id``).
        edge_dialect_program: The Edge program (or its graph module), whose nodes carry
            ``debug_handle`` and ``from_node``; or its nodes' provenance records
            (``ETRecord.edge_provenance()``), which spares loading it.

    Returns:
        The :class:`HandlePropagation`; call ``.apply()`` to write it.
    """
    edge = _edge_provenance(edge_dialect_program)
    ancestor_handles, conflicts = _ancestor_handles(edge)
    graph_id = str(export_graph_id)
    assignments: dict[Any, Any] = {}
    matched: set[Hashable] = set()
    for key, name, ancestors in _aten_provenance(exported_program):
        handle = _handle_for(name, ancestors, graph_id, ancestor_handles)
        if handle is None:
            handle = UNSET_DEBUG_HANDLE
        else:
            matched.add(_hashable(handle))
        assignments[key] = handle
    unmatched = tuple(
        (name, handle) for name, handle, _ in edge if handle is None or _hashable(handle) not in matched
    )
    return HandlePropagation(assignments, frozenset(matched), unmatched, tuple(conflicts))


def propagate_back_debug_handle(
    exported_program: ProgramLike,
    exported_program_graph_id: int | str,
    edge_dialect_program: ProgramLike,
    disable_debug_handle_validation: bool = False,
) -> bool:
    """Give the ATen program's nodes the debug handles of the Edge nodes descending from them.

    Mutates ``exported_program``'s node meta in place (see the module docstring); idempotent.

    Args:
        exported_program: The ATen program (the ETRecord's ``exported_program``).
        exported_program_graph_id: The ETRecord's ``export_graph_id``.
        edge_dialect_program: The Edge program (the ETRecord's ``edge_dialect_program``).
        disable_debug_handle_validation: Apply the handles even when some Edge handles have no
            ATen counterpart. Defaults to ``False``.

    Returns:
        ``True`` when the handles were applied; ``False`` when validation failed (nothing changed).
    """
    plan = plan_debug_handle_propagation(exported_program, exported_program_graph_id, edge_dialect_program)
    if not disable_debug_handle_validation and not plan.validated:
        return False
    plan.apply()
    return True


def _program_nodes(program: ProgramLike) -> Iterable[torch.fx.Node]:
    graph_module = program if isinstance(program, torch.fx.GraphModule) else program.graph_module
    return (n for n in iter_nodes_with_control_flow(graph_module) if n.op not in ("placeholder", "output"))


def _edge_provenance(edge: ProgramLike | Sequence[Any]) -> list[tuple[str, Any, list[NodeId]]]:
    """``(name, debug_handle, ancestors)`` per Edge node, from a program or from provenance records."""
    if isinstance(edge, Sequence):  # NodeProvenance records read from the ETRecord's JSON
        return [(p.name, p.debug_handle, list(p.ancestors)) for p in edge]
    return [(n.name, n.meta.get(DEBUG_HANDLE_KEY), ancestor_node_ids(n)) for n in _program_nodes(edge)]


def _ancestor_handles(
    edge_nodes: Iterable[tuple[str, Any, list[NodeId]]],
) -> tuple[dict[NodeId, Any], list[tuple[NodeId, Any, Any]]]:
    handles: dict[NodeId, Any] = {}
    conflicts: list[tuple[NodeId, Any, Any]] = []
    for _, handle, ancestors in edge_nodes:
        if handle is None:
            continue
        for ancestor in ancestors:
            known = handles.setdefault(ancestor, handle)
            if known != handle:
                conflicts.append((ancestor, known, handle))
    return handles, conflicts


def _aten_provenance(aten: ProgramLike | Sequence[Any]) -> list[tuple[Any, str, list[NodeId]]]:
    """``(key, name, ancestors)`` per ATen node; the key is the fx node, or the name for records."""
    if isinstance(aten, Sequence):  # NodeProvenance records read from the ETRecord's JSON
        return [(p.name, p.name, list(p.ancestors)) for p in aten]
    return [(n, n.name, ancestor_node_ids(n)) for n in _program_nodes(aten)]


def _handle_for(name: str, ancestors: list[NodeId], graph_id: str, ancestor_handles: dict[NodeId, Any]) -> Any:
    own = (name, graph_id)
    if own in ancestor_handles:
        return ancestor_handles[own]
    for ancestor in ancestors:
        if ancestor in ancestor_handles:
            return ancestor_handles[ancestor]
    return None


def _hashable(handle: object) -> Hashable:
    return tuple(handle) if isinstance(handle, list) else handle
