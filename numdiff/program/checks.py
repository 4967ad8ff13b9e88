"""Check a serialized program's graph JSON before any reader or builder walks it.

The readers (profiling metadata, provenance, the ATen builder, torch's deserializer) assume the
shapes ExecuTorch writes: nodes are objects with a unique string name and string target, inputs
and outputs are lists of objects, metadata values are strings, tensor metadata uses the export
schema's enums and sizes that fit in 64 bits. :func:`check_program` checks exactly that, once
per program (the ETRecord reader runs it before the program's first use), so that a malformed
file gives one error naming the graph, the node and the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numdiff.limits import Limits, current_limits, raise_hint
from numdiff.program.graph_meta import ProgramLoadError
from numdiff._core.safe_json import TooDeepError, loads_checked

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
    """Check the graph JSON of a program that passed :func:`~numdiff.program.graph_meta.check_header`.

    Raises:
        ProgramLoadError: Naming the graph, the node and the field that is wrong.
    """
    module = program["graph_module"]
    if not isinstance(module, dict):
        raise ProgramLoadError("field graph_module is not an object")
    limits = current_limits()
    _check_signature(module.get("signature", {}))
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
    if type(outputs) is not list:
        raise bad("field outputs is not a list of objects")
    for i, output in enumerate(outputs):
        _check_argument(output, f"{label}: node {name!r}: field outputs[{i}]", pending, name)
    inputs = node.get("inputs", [])
    if type(inputs) is not list:
        raise bad("field inputs is not a list of objects")
    for i, entry in enumerate(inputs):
        if type(entry) is not dict or type(entry.get("name", "")) is not str:
            raise bad(f"field inputs[{i}] is not an object with a string name")
        _check_argument(entry.get("arg", {}), f"{label}: node {name!r}: field inputs[{i}].arg", pending, name)
    meta = node.get("metadata", {})
    if meta is None:
        return
    if type(meta) is not dict:
        raise bad(f"field metadata is a {type(meta).__name__}, not an object")
    for key, value in meta.items():
        if type(value) is not str:
            raise bad(f"field metadata.{key} is a {type(value).__name__}, not a string")
    if raw := meta.get("from_node"):
        _check_from_node(raw, f"{label}: node {name!r}: field metadata.from_node", limits)
    raw = meta.get("debug_handle")
    if raw and (len(raw) > 20 or not raw.isascii() or not raw.strip().lstrip("-").isdigit()):
        raise bad(f"field metadata.debug_handle {raw[:40]!r} is not an integer")


def _check_tensor_meta(label: str, tensor_name: str, meta: object) -> None:
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


def _sym_ints(where: str, field: str, items: object) -> list[int | None]:
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


def _is_int(v: object) -> bool:
    return type(v) is int


def _is_number(v: object) -> bool:
    return type(v) in (int, float) or (type(v) is str and v in ("inf", "-inf", "nan", "Infinity", "-Infinity", "NaN"))


def _is_tensor_ref(v: object) -> bool:
    return type(v) is dict and type(v.get("name")) is str


def _is_optional_tensor(v: object) -> bool:
    return type(v) is dict and len(v) == 1 and (_is_tensor_ref(v.get("as_tensor")) or "as_none" in v)


def _is_sym(v: object) -> bool:
    return type(v) is dict and len(v) == 1 and (type(v.get("as_name")) is str or next(iter(v)) in ("as_int", "as_float", "as_bool"))


def _list_of(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: type(v) is list and all(check(x) for x in v)


#: What each argument kind's payload must look like (torch.export's ``Argument`` union).
_PAYLOADS: dict[str, Callable[[object], bool]] = {
    "as_none": lambda v: v is None or type(v) is bool or v == {} or v == [],
    "as_tensor": _is_tensor_ref,
    "as_tensors": _list_of(_is_tensor_ref),
    "as_optional_tensor": _is_optional_tensor,
    "as_optional_tensors": _list_of(_is_optional_tensor),
    "as_nested_tensors": _list_of(_list_of(_is_tensor_ref)),
    "as_int": _is_int,
    "as_ints": _list_of(_is_int),
    "as_int_lists": _list_of(_list_of(_is_int)),
    "as_float": _is_number,
    "as_floats": _list_of(_is_number),
    "as_float_lists": _list_of(_list_of(_is_number)),
    "as_string": lambda v: type(v) is str,
    "as_strings": _list_of(lambda v: type(v) is str),
    "as_operator": lambda v: type(v) is str,
    "as_bool": lambda v: type(v) is bool,
    "as_bools": _list_of(lambda v: type(v) is bool),
    "as_sym_int": _is_sym,
    "as_sym_ints": _list_of(_is_sym),
    "as_sym_float": _is_sym,
    "as_sym_floats": _list_of(_is_sym),
    "as_sym_bool": _is_sym,
    "as_sym_bools": _list_of(_is_sym),
    "as_scalar_type": lambda v: type(v) is int and v in SCALAR_TYPES,
    "as_layout": lambda v: type(v) is int and v in LAYOUTS,
    "as_memory_format": lambda v: type(v) is int and v in MEMORY_FORMATS,
    "as_device": lambda v: type(v) is dict and type(v.get("type")) is str and type(v.get("index")) in (int, type(None)),
    "as_custom_obj": lambda v: type(v) is dict and type(v.get("name")) is str and type(v.get("class_fqn")) is str,
    "as_complex": lambda v: type(v) is dict and all(_is_number(x) for x in v.values()),
    "as_graph": lambda v: type(v) is dict and type(v.get("name")) is str and type(v.get("graph")) is dict,
}


def _check_argument(arg: object, where: str, pending: _Subgraphs, node_name: str) -> None:
    """One serialized ``Argument``: a single-key object whose payload has its kind's shape.

    Kinds numdiff does not know are left to the readers (newer schemas add kinds; the builders
    refuse what they do not know).
    """
    if type(arg) is not dict or len(arg) != 1:
        raise ProgramLoadError(f"{where} is {arg!r:.60}, not an object with one argument kind")
    ((kind, value),) = arg.items()
    if kind == "as_string_to_argument":
        if type(value) is not dict:
            raise ProgramLoadError(f"{where}.{kind} is a {type(value).__name__}, not an object")
        for key, item in value.items():  # nesting bounded by the JSON depth limit
            _check_argument(item, f"{where}.{kind}[{key!r:.40}]", pending, node_name)
        return
    check = _PAYLOADS.get(kind)
    if check is not None and not check(value):
        raise ProgramLoadError(f"{where}.{kind}: malformed or unknown value {value!r:.60}")
    if kind == "as_graph":
        pending.append((f"subgraph {value['name']!r:.60} of node {node_name!r}", value["graph"]))


def _check_signature(signature: object) -> None:
    if type(signature) is not dict:
        raise ProgramLoadError(f"field graph_module.signature is a {type(signature).__name__}, not an object")
    for field in ("input_specs", "output_specs"):
        specs = signature.get(field, [])
        if type(specs) is not list:
            raise ProgramLoadError(f"field graph_module.signature.{field} is not a list")
        for i, spec in enumerate(specs):
            body = next(iter(spec.values())) if type(spec) is dict and len(spec) == 1 else None
            if type(body) is not dict or type(body.get("arg", {})) is not dict:
                raise ProgramLoadError(f"field graph_module.signature.{field}[{i}] is {spec!r:.60}, not one spec object")


def _check_from_node(raw: str, where: str, limits: Limits) -> None:
    """``from_node`` is JSON text: a list of objects, each with optional ``from_node`` lists (iteratively)."""
    try:
        value = loads_checked(raw, limits.max_nesting_depth)
    except TooDeepError as e:
        raise ProgramLoadError(f"{where}: {e}", e.hint) from e
    except ValueError as e:
        raise ProgramLoadError(f"{where}: not JSON ({str(e)[:100]})") from e
    pending = [value]
    while pending:
        sources = pending.pop()
        if sources is None:
            continue
        if type(sources) is not list:
            raise ProgramLoadError(f"{where}: a {type(sources).__name__} where a list of objects belongs")
        for source in sources:
            if type(source) is not dict or type(source.get("action", "")) not in (str, type(None)):
                raise ProgramLoadError(f"{where}: {source!r:.60} is not a node-source object")
            pending.append(source.get("from_node"))
