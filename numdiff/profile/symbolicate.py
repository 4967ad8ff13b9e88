"""Link runtime events to the graph: debug handles, op types, stack traces, module hierarchy.

Handles come from the ETRecord's ``debug_handle_map`` (instruction id → handles) and, for events
inside a delegate, from its ``delegate_map`` (instruction id → backend name and delegate debug
identifier → handles). Graph metadata comes from the Edge program's ``call_function`` nodes
(``getitem`` excluded), keyed by each node's ``debug_handle``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from numdiff._core.events import FRAMEWORK_EVENTS
from numdiff.errors import ETRecordError
from numdiff.limits import current_limits, raise_hint
from numdiff.profile._columns import SlotLink
from numdiff.profile.events import Event, EventBlock
from numdiff.program.graph_meta import OpNodeInfo

if TYPE_CHECKING:
    import torch.fx

#: What ``debug_handle_map`` (or a delegate's map) gives an event: a handle or a list of handles.
EventHandles = int | list[int] | tuple[int, ...] | None

__all__ = ["FORWARD", "OpNode", "attach_graph_metadata", "graph_op_nodes", "op_nodes_from_graph",
           "resolve_debug_handles"]

FORWARD = "forward"


class OpNode:
    """What an event needs to know about one graph node."""

    __slots__ = ("name", "op_type", "stack_trace", "module_stack")

    def __init__(self, info: OpNodeInfo) -> None:
        self.name = info.name + "_"
        self.op_type = info.op_type
        self.stack_trace = info.stack_trace
        self.module_stack = info.nn_module_stack


def op_nodes_from_graph(graph_module: torch.fx.GraphModule) -> list[OpNodeInfo]:
    """The op nodes of a loaded graph (for ETRecord objects numdiff did not parse itself)."""
    out = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or _is_getitem(node) or _target_name(node) == "alloc":
            continue
        meta = node.meta
        out.append(OpNodeInfo(
            name=node.name,
            op_type=meta.get("numdiff_op_type") or _target_name(node),
            debug_handle=meta.get("debug_handle"),
            stack_trace=meta.get("stack_trace"),
            nn_module_stack=meta.get("nn_module_stack"),
            source_fn_stack=meta.get("source_fn_stack"),
        ))
    return out


def graph_op_nodes(nodes: Iterable[OpNodeInfo], enable_module_hierarchy: bool = False) -> dict[Any, list[OpNode]]:
    """``{debug handle: [nodes]}`` over the graph's op nodes, in the reference's traversal order.

    With ``enable_module_hierarchy`` the nodes that belong to a source module (they carry both
    ``source_fn_stack`` and ``nn_module_stack``) come after the others, grouped by module.
    """
    top: list[OpNodeInfo] = []
    by_module: dict[tuple[str, str], list[OpNodeInfo]] = defaultdict(list)
    for node in nodes:
        source_fn = node.source_fn_stack
        if enable_module_hierarchy and source_fn and node.nn_module_stack is not None:
            fn_name, fn_type = source_fn[-1][0], source_fn[-1][1]
            by_module[(fn_name, fn_type if isinstance(fn_type, str) else getattr(fn_type, "__name__", str(fn_type)))].append(node)
        else:
            top.append(node)
    out: dict[Any, list[OpNode]] = {}
    for node in top + [n for group in by_module.values() for n in group]:
        if node.debug_handle is not None:
            out.setdefault(node.debug_handle, []).append(OpNode(node))
    return out


def _target_name(node: torch.fx.Node) -> str:
    return str(getattr(node.target, "__name__", node.target))


def _is_getitem(node: torch.fx.Node) -> bool:
    import operator

    return node.target is operator.getitem


def resolve_debug_handles(
    blocks: Iterable[EventBlock],
    handle_map: Mapping[str, Any],
    delegate_map: Mapping[str, Any] | None,
    num_outs_map: Mapping[Any, int] | None,
) -> list[str]:
    """Set ``debug_handles``, ``num_outputs`` and backend names on every event; return notes."""
    notes: list[str] = []
    limit = current_limits().max_outputs_per_instruction
    for block in blocks:
        for ev in block._link_records():
            if ev._instruction_id is None or (iid := str(ev._instruction_id)) not in handle_map:
                continue
            if num_outs_map is not None:
                ev.num_outputs = _checked_count(iid, num_outs_map.get(iid, 1), limit)
            meta = None if delegate_map is None else delegate_map.get(iid)
            if meta is not None and not isinstance(meta, Mapping):
                raise ETRecordError(
                    None, f"delegate_map entry for instruction {iid} is a {type(meta).__name__}, not a mapping", _SHAPE_HINT
                )
            handles = _checked_handles("debug_handle_map entry for instruction {iid}", handle_map[iid], iid)
            if ev.delegate_debug_identifier is None:
                ev.debug_handles = handles
                if ev.name == "DELEGATE_CALL" and meta is not None:
                    ev.delegate_backend_name = meta.get("name", "")
                continue
            if meta is None:
                ev.debug_handles = handles
                notes.append(f"no delegate map entry for delegated event {ev.name!r} (instruction {iid})")
                continue
            ev.delegate_backend_name = meta.get("name", "")
            dmap = meta.get("delegate_map") or {}
            if not isinstance(dmap, Mapping):
                raise ETRecordError(None, f"delegate_map entry for instruction {iid} has a {type(dmap).__name__} "
                                    "delegate_map, not a mapping", _SHAPE_HINT)
            ev.debug_handles = _checked_handles("delegate_map entry for instruction {iid}",
                                                _delegate_handles(dmap, ev.delegate_debug_identifier), iid)
    return notes


_SHAPE_HINT = (
    "parse_etrecord checks these maps when it reads a file; an ETRecord built or edited in code must keep "
    "the shapes ExecuTorch writes (see numdiff.schema.etrecord._models)."
)


def _checked_count(iid: str, count: object, limit: int) -> int:
    """An output count from ``instruction_id_to_num_outs_map``, bounded before anything loops over it."""
    if type(count) is not int or not 0 <= count <= limit:
        raise ETRecordError(
            None,
            f"instruction_id_to_num_outs_map gives instruction {iid} {count!r} outputs; "
            f"expected an integer in [0, {limit}] (max_outputs_per_instruction)",
            _SHAPE_HINT + " " + raise_hint("max_outputs_per_instruction"),
        )
    return count


def _checked_handles(what: str, handles: object, iid: str) -> EventHandles:
    """``handles`` as the map gave it, once checked to be a handle, a list of handles or None
    (``what`` names the entry, ``{iid}`` replaced by the instruction id: formatted only for the error)."""
    if handles is None or type(handles) is int:
        return handles
    if not isinstance(handles, (list, tuple)) or not all(type(h) is int for h in handles):
        raise ETRecordError(None, f"{what.format(iid=iid)} is {handles!r:.80}; expected a handle or a list of handles",
                            _SHAPE_HINT)
    return handles


def _delegate_handles(dmap: Mapping[object, object], ident: int | str) -> object:
    """The reference's lookup: exact key, then its string form, then the last key that is a
    substring of the identifier (so key "1" also matches identifier "11": kept for fidelity)."""
    handles = dmap.get(ident)
    if handles is None:
        handles = dmap.get(str(ident))
    for key, value in dmap.items():
        if isinstance(key, str) and key in str(ident):
            handles = value
    return handles


def attach_graph_metadata(blocks: Iterable[EventBlock], nodes_by_handle: Mapping[Any, list[OpNode]]) -> None:
    """Fill ``op_types``, ``stack_traces`` and ``module_hierarchy`` from the graph nodes."""
    for block in blocks:
        for ev in block._link_records():
            _attach(ev, nodes_by_handle)


def _attach(ev: Event | SlotLink, nodes_by_handle: Mapping[Any, list[OpNode]]) -> None:
    if ev.name in FRAMEWORK_EVENTS or ev.debug_handles is None:
        return
    handles = [ev.debug_handles] if isinstance(ev.debug_handles, int) else ev.debug_handles
    for handle in handles:
        for node in nodes_by_handle.get(handle, ()):
            if node.name not in ev.stack_traces:
                ev.stack_traces[node.name] = node.stack_trace
                ev.module_hierarchy[node.name] = node.module_stack
            if node.op_type:  # once per node visit, repeats included, as the reference does
                ev.op_types.append(node.op_type)


def op_name_mismatches(blocks: Iterable[EventBlock]) -> tuple[int, list[str]]:
    """Kernel events whose name matches none of the op types the ETRecord gives them.

    The portable runtime names a kernel event after its op (``native_call_convolution.out`` for
    ``aten.convolution.default``), so when an ETDump is paired with the ETRecord of another model
    the names stop agreeing. Returns (events checked, descriptions of the disagreeing ones).
    """
    checked, bad = 0, []
    agrees: dict[tuple[str, tuple[str, ...]], bool] = {}  # by kernel name and op types: a block repeats a few ops
    for block in blocks:
        for ev in block._link_records():
            if ev.is_delegated_op or not ev.op_types or not ev.name.startswith("native_call_"):
                continue
            checked += 1
            key = (ev.name, tuple(ev.op_types))
            ok = agrees.get(key)
            if ok is None:
                kernel = ev.name[len("native_call_"):].split(".")[0]
                bases = {t.split(".")[-2] if t.count(".") >= 1 else t for t in ev.op_types}
                ok = agrees[key] = any(b and (b in kernel or kernel in b) for b in bases)
            if not ok:
                bad.append(f"{ev.name} (instruction {ev._instruction_id}) vs {sorted(set(ev.op_types))}")
    return checked, bad
