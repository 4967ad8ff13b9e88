"""Check a serialized program's graph JSON on the way in, before any reader or builder walks it.

The readers (profiling metadata, provenance, the ATen builder, torch's deserializer) assume the
shapes ExecuTorch writes: nodes are objects with a unique string name and string target, inputs
and outputs are lists of objects, metadata values are strings, tensor metadata uses the export
schema's enums and sizes that fit in 64 bits. :func:`check_program` checks exactly that, once,
so that a malformed file gives one error naming the graph, the node and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from numdiff.limits import Limits, current_limits, raise_hint
from numdiff.schema._graph_meta import ProgramLoadError
from numdiff.schema._safe_json import TooDeepError, json_depth

__all__ = ["SCALAR_TYPES", "LAYOUTS", "MEMORY_FORMATS", "check_program"]

_INT64_MAX = 2**63 - 1
#: torch.export schema enums (``torch._export.serde.schema``), by value.
SCALAR_TYPES = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 33, 34, 35})
LAYOUTS = frozenset(range(8))
MEMORY_FORMATS = frozenset(range(5))
_ENUM_ARGS = {"as_scalar_type": SCALAR_TYPES, "as_layout": LAYOUTS, "as_memory_format": MEMORY_FORMATS}


def check_program(program: dict[str, Any]) -> None:
    """Check the graph JSON of a program that passed :func:`~numdiff.schema._graph_meta.check_header`.

    Raises:
        ProgramLoadError: Naming the graph, the node and the field that is wrong.
    """
    module = program["graph_module"]
    if not isinstance(module, dict):
        raise ProgramLoadError("field graph_module is not an object")
    limits = current_limits()
    budget = [limits.max_graph_nodes]
    for label, graph in _graphs(module.get("graph", {}), "top-level graph"):
        _check_graph(label, graph, budget, limits)


def _graphs(graph: Any, label: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The graph and its control-flow subgraphs (``as_graph`` arguments), iteratively."""
    pending = [(label, graph)]
    while pending:
        label, graph = pending.pop()
        if not isinstance(graph, dict):
            raise ProgramLoadError(f"{label}: is a {type(graph).__name__}, not an object")
        yield label, graph
        for node in graph.get("nodes") or []:
            for entry in node.get("inputs") or [] if isinstance(node, dict) else []:
                sub = entry.get("arg", {}).get("as_graph") if isinstance(entry, dict) and isinstance(entry.get("arg"), dict) else None
                if isinstance(sub, dict):
                    pending.append((f"subgraph {sub.get('name')!r} of node {node.get('name')!r}", sub.get("graph")))


def _check_graph(label: str, graph: dict[str, Any], budget: list[int], limits: Limits) -> None:
    nodes = graph.get("nodes", [])
    if not isinstance(nodes, list):
        raise ProgramLoadError(f"{label}: field nodes is a {type(nodes).__name__}, not a list")
    budget[0] -= len(nodes)
    if budget[0] < 0:
        limit = limits.max_graph_nodes
        raise ProgramLoadError(
            f"{label}: more than {limit} nodes (max_graph_nodes)", raise_hint("max_graph_nodes", limit * 2)
        )
    seen: set[str] = set()
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise ProgramLoadError(f"{label}: node {index} is a {type(node).__name__}, not an object")
        name = node.get("name")
        if not isinstance(name, str) or not name:
            raise ProgramLoadError(f"{label}: node {index}: field name is {name!r}, not a non-empty string")
        if name in seen:
            raise ProgramLoadError(f"{label}: two nodes are named {name!r}; node names must be unique")
        seen.add(name)
        _check_node(f"{label}: node {name!r}", node, limits)
    values = graph.get("tensor_values", {})
    if not isinstance(values, dict):
        raise ProgramLoadError(f"{label}: field tensor_values is a {type(values).__name__}, not an object")
    for tensor_name, meta in values.items():
        _check_tensor_meta(f"{label}: tensor {tensor_name!r}", meta)


def _check_node(where: str, node: dict[str, Any], limits: Limits) -> None:
    target = node.get("target")
    if not isinstance(target, str):
        raise ProgramLoadError(f"{where}: field target is {type(target).__name__}, not a string")
    for field in ("inputs", "outputs"):
        items = node.get(field, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ProgramLoadError(f"{where}: field {field} is not a list of objects")
    for i, entry in enumerate(node.get("inputs", [])):
        arg = entry.get("arg", {})
        if not isinstance(arg, dict):
            raise ProgramLoadError(f"{where}: field inputs[{i}].arg is a {type(arg).__name__}, not an object")
        for kind, allowed in _ENUM_ARGS.items():
            if kind in arg and (type(arg[kind]) is not int or arg[kind] not in allowed):
                raise ProgramLoadError(f"{where}: field inputs[{i}].arg.{kind}: unknown value {arg[kind]!r}")
    meta = node.get("metadata", {})
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise ProgramLoadError(f"{where}: field metadata is a {type(meta).__name__}, not an object")
    for key, value in meta.items():
        if not isinstance(value, str):
            raise ProgramLoadError(f"{where}: field metadata.{key} is a {type(value).__name__}, not a string")
    if (raw := meta.get("from_node")) and raw.count("[") + raw.count("{") > limits.max_nesting_depth:
        depth = json_depth(raw)  # builders parse it later: refuse what would recurse too deep now
        if depth > limits.max_nesting_depth:
            raise ProgramLoadError(
                f"{where}: field metadata.from_node: {TooDeepError(depth, limits.max_nesting_depth)}",
                raise_hint("max_nesting_depth", depth),
            )
    if raw := meta.get("debug_handle"):
        if not (raw.isascii() and raw.strip().lstrip("-").isdigit()) or len(raw) > 20:
            raise ProgramLoadError(f"{where}: field metadata.debug_handle {raw[:40]!r} is not an integer")


def _check_tensor_meta(where: str, meta: Any) -> None:
    if not isinstance(meta, dict):
        raise ProgramLoadError(f"{where}: is a {type(meta).__name__}, not an object")
    if "dtype" in meta and (type(meta["dtype"]) is not int or meta["dtype"] not in SCALAR_TYPES):
        raise ProgramLoadError(f"{where}: field dtype: unknown scalar type {meta['dtype']!r}")
    if "layout" in meta and (type(meta["layout"]) is not int or meta["layout"] not in LAYOUTS):
        raise ProgramLoadError(f"{where}: field layout: unknown layout {meta['layout']!r}")
    sizes = _sym_ints(where, "sizes", meta.get("sizes", []))
    strides = _sym_ints(where, "strides", meta.get("strides", []))
    offset = _sym_ints(where, "storage_offset", [meta.get("storage_offset", {"as_int": 0})])[0]
    if "requires_grad" in meta and not isinstance(meta["requires_grad"], bool):
        raise ProgramLoadError(f"{where}: field requires_grad is {meta['requires_grad']!r}, not a boolean")
    if None in sizes or None in strides or offset is None:
        return  # symbolic sizes: bounded when the program runs
    if len(strides) != len(sizes):
        raise ProgramLoadError(f"{where}: {len(sizes)} sizes but {len(strides)} strides")
    numel, extent = 1, offset
    for size, stride in zip(sizes, strides):
        numel *= size  # type: ignore[operator]
        extent += max(size - 1, 0) * stride  # type: ignore[operator]
    if numel > _INT64_MAX or extent > _INT64_MAX:
        raise ProgramLoadError(f"{where}: sizes {sizes} with strides {strides} overflow 64 bits")


def _sym_ints(where: str, field: str, items: Any) -> list[int | None]:
    """Concrete values of a list of serialized SymInts (None for symbolic ones); bounds checked."""
    if not isinstance(items, list):
        raise ProgramLoadError(f"{where}: field {field} is a {type(items).__name__}, not a list")
    out: list[int | None] = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and "as_int" in item:
            value = item["as_int"]
            if type(value) is not int or not 0 <= value <= _INT64_MAX:
                raise ProgramLoadError(f"{where}: field {field}[{i}] is {value!r}, not an integer in [0, 2^63)")
            out.append(value)
        elif isinstance(item, dict) and isinstance(item.get("as_expr"), dict):
            out.append(None)
        else:
            raise ProgramLoadError(f"{where}: field {field}[{i}] is {item!r:.60}, not a SymInt")
    return out
