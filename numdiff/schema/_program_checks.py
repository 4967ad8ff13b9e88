"""Check a serialized program's graph JSON before any reader or builder walks it.

The readers (profiling metadata, provenance, the ATen builder, torch's deserializer) assume the
shapes ExecuTorch writes: nodes are objects with a unique string name and string target, inputs
and outputs are lists of objects, metadata values are strings, tensor metadata uses the export
schema's enums and sizes that fit in 64 bits. :func:`check_program` checks exactly that, once
per program (the ETRecord reader runs it before the program's first use), so that a malformed
file gives one error naming the graph, the node and the field.
"""

from __future__ import annotations

from typing import Any

from numdiff.limits import Limits, current_limits, raise_hint
from numdiff.schema._graph_meta import ProgramLoadError
from numdiff.schema._safe_json import TooDeepError, json_depth

__all__ = ["LAYOUTS", "MEMORY_FORMATS", "SCALAR_TYPES", "check_program"]

_INT64_MAX = 2**63 - 1
#: torch.export schema enums (``torch._export.serde.schema``), by value.
SCALAR_TYPES = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 33, 34, 35})
LAYOUTS = frozenset(range(8))
MEMORY_FORMATS = frozenset(range(5))
_ENUM_ARGS = (("as_scalar_type", SCALAR_TYPES), ("as_layout", LAYOUTS), ("as_memory_format", MEMORY_FORMATS))
_MISSING = object()
_Subgraphs = list[tuple[str, Any]]


def check_program(program: dict[str, Any]) -> None:
    """Check the graph JSON of a program that passed :func:`~numdiff.schema._graph_meta.check_header`.

    Raises:
        ProgramLoadError: Naming the graph, the node and the field that is wrong.
    """
    module = program["graph_module"]
    if not isinstance(module, dict):
        raise ProgramLoadError("field graph_module is not an object")
    limits = current_limits()
    budget = limits.max_graph_nodes
    pending: _Subgraphs = [("top-level graph", module.get("graph", {}))]
    while pending:  # the graph, then its control-flow subgraphs (``as_graph`` arguments)
        label, graph = pending.pop()
        if not isinstance(graph, dict):
            raise ProgramLoadError(f"{label}: is a {type(graph).__name__}, not an object")
        budget = _check_graph(label, graph, budget, limits, pending)


def _check_graph(label: str, graph: dict[str, Any], budget: int, limits: Limits, pending: _Subgraphs) -> int:
    nodes = graph.get("nodes", [])
    if type(nodes) is not list:
        raise ProgramLoadError(f"{label}: field nodes is a {type(nodes).__name__}, not a list")
    budget -= len(nodes)
    if budget < 0:
        raise ProgramLoadError(
            f"{label}: more than {limits.max_graph_nodes} nodes (max_graph_nodes)",
            raise_hint("max_graph_nodes", limits.max_graph_nodes * 2),
        )
    seen: set[str] = set()
    for index, node in enumerate(nodes):
        if type(node) is not dict:
            raise ProgramLoadError(f"{label}: node {index} is a {type(node).__name__}, not an object")
        name = node.get("name")
        if type(name) is not str or not name:
            raise ProgramLoadError(f"{label}: node {index}: field name is {name!r:.60}, not a non-empty string")
        if name in seen:
            raise ProgramLoadError(f"{label}: two nodes are named {name!r}; node names must be unique")
        seen.add(name)
        _check_node(label, name, node, limits, pending)
    values = graph.get("tensor_values", {})
    if type(values) is not dict:
        raise ProgramLoadError(f"{label}: field tensor_values is a {type(values).__name__}, not an object")
    for tensor_name, meta in values.items():
        _check_tensor_meta(label, tensor_name, meta)
    return budget


def _check_node(label: str, name: str, node: dict[str, Any], limits: Limits, pending: _Subgraphs) -> None:
    def bad(problem: str) -> ProgramLoadError:
        return ProgramLoadError(f"{label}: node {name!r}: {problem}")

    target = node.get("target")
    if type(target) is not str:
        raise bad(f"field target is {type(target).__name__}, not a string")
    outputs = node.get("outputs", [])
    if type(outputs) is not list or not all(type(o) is dict for o in outputs):
        raise bad("field outputs is not a list of objects")
    inputs = node.get("inputs", [])
    if type(inputs) is not list:
        raise bad("field inputs is not a list of objects")
    for i, entry in enumerate(inputs):
        if type(entry) is not dict:
            raise bad("field inputs is not a list of objects")
        arg = entry.get("arg", {})
        if type(arg) is not dict:
            raise bad(f"field inputs[{i}].arg is a {type(arg).__name__}, not an object")
        if len(arg) != 1:
            for kind, allowed in _ENUM_ARGS:
                value = arg.get(kind, _MISSING)
                if value is not _MISSING and (type(value) is not int or value not in allowed):
                    raise bad(f"field inputs[{i}].arg.{kind}: unknown value {value!r:.60}")
            continue
        kind, value = next(iter(arg.items()))
        if kind == "as_graph" and type(value) is dict:
            pending.append((f"subgraph {value.get('name')!r:.60} of node {name!r}", value.get("graph")))
        for enum_kind, allowed in _ENUM_ARGS:
            if kind == enum_kind and (type(value) is not int or value not in allowed):
                raise bad(f"field inputs[{i}].arg.{kind}: unknown value {value!r:.60}")
    meta = node.get("metadata", {})
    if meta is None:
        return
    if type(meta) is not dict:
        raise bad(f"field metadata is a {type(meta).__name__}, not an object")
    for key, value in meta.items():
        if type(value) is not str:
            raise bad(f"field metadata.{key} is a {type(value).__name__}, not a string")
    raw = meta.get("from_node")
    if raw and raw.count("[") + raw.count("{") > limits.max_nesting_depth:
        depth = json_depth(raw)  # builders parse it later: refuse what would recurse too deep now
        if depth > limits.max_nesting_depth:
            raise ProgramLoadError(
                f"{label}: node {name!r}: field metadata.from_node: {TooDeepError(depth, limits.max_nesting_depth)}",
                raise_hint("max_nesting_depth", depth),
            )
    raw = meta.get("debug_handle")
    if raw and (len(raw) > 20 or not raw.isascii() or not raw.strip().lstrip("-").isdigit()):
        raise bad(f"field metadata.debug_handle {raw[:40]!r} is not an integer")


def _check_tensor_meta(label: str, tensor_name: str, meta: Any) -> None:
    where = f"{label}: tensor {tensor_name!r:.80}"
    if type(meta) is not dict:
        raise ProgramLoadError(f"{where}: is a {type(meta).__name__}, not an object")
    dtype = meta.get("dtype", 7)
    if type(dtype) is not int or dtype not in SCALAR_TYPES:
        raise ProgramLoadError(f"{where}: field dtype: unknown scalar type {dtype!r:.60}")
    layout = meta.get("layout", 7)
    if type(layout) is not int or layout not in LAYOUTS:
        raise ProgramLoadError(f"{where}: field layout: unknown layout {layout!r:.60}")
    requires_grad = meta.get("requires_grad", False)
    if type(requires_grad) is not bool:
        raise ProgramLoadError(f"{where}: field requires_grad is {requires_grad!r:.60}, not a boolean")
    sizes = _sym_ints(where, "sizes", meta.get("sizes", []))
    strides = _sym_ints(where, "strides", meta.get("strides", []))
    offset = _sym_ints(where, "storage_offset", [meta.get("storage_offset", {"as_int": 0})])[0]
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
    if type(items) is not list:
        raise ProgramLoadError(f"{where}: field {field} is a {type(items).__name__}, not a list")
    out: list[int | None] = []
    for item in items:
        value = item.get("as_int", _MISSING) if type(item) is dict else _MISSING
        if type(value) is int and 0 <= value <= _INT64_MAX:
            out.append(value)
        elif value is _MISSING and type(item) is dict and type(item.get("as_expr")) is dict:
            out.append(None)
        elif value is _MISSING:
            raise ProgramLoadError(f"{where}: field {field}[{len(out)}] is {item!r:.60}, not a SymInt")
        else:
            raise ProgramLoadError(f"{where}: field {field}[{len(out)}] is {value!r:.60}, not an integer in [0, 2^63)")
    return out
