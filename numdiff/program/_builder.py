"""Build ``torch.fx`` graphs straight from a serialized program's JSON (ATen and Edge alike).

This is numdiff's loader for the graphs ExecuTorch serializes; it replaces torch's export
deserializer, whose import costs seconds (``torch._dynamo``) and which cannot read every program
ExecuTorch writes (out-variant ops after ``to_executorch``, Edge ops inside ``torch.cond``
branches). It reproduces what the reference's loader returns: the same node names (a node is
named after its single tensor output, else after the serialized node; one ``getitem`` per
output of a multi-output op, named after the output), the same targets — Edge ops as
:class:`~numdiff.program._edge_target.EdgeTarget` objects equal to ExecuTorch's, ``memory.alloc``
as :func:`~numdiff.program.graph_args.alloc`, delegate calls as numdiff's
:data:`~numdiff.program._delegate.DELEGATE_CALL` on a ``get_attr`` of a
:class:`~numdiff.program._delegate.LoweredModule`, operators this process cannot run as
:class:`~numdiff.program._delegate.UnrunnableOp` — and the same node metadata.
Higher-order operators (``cond``, ``map_impl``, ``while_loop``) get their subgraphs as nested
``GraphModule`` attributes, built recursively (depth bounded by the program guard).

The JSON must have passed :func:`~numdiff.program.guard.guard_program` first: operators
are resolved only through :func:`~numdiff.program._edge_ops.resolve_target` and the allow-list,
and value names are the guard's safe names (the file's name kept in
``meta["numdiff_original_name"]``).
"""

from __future__ import annotations

import keyword
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from numdiff.program._edge_ops import resolve_target
from numdiff.program._edge_target import edge_target
from numdiff.program._delegate import DELEGATE_CALL, DELEGATE_OP_TYPE, LoweredModule, UnrunnableOp
from numdiff.program.graph_args import DTYPES, Unsupported, alloc, decode_alloc_spec, decode_metadata, decode_value
from numdiff.program.graph_meta import DELEGATE_TARGET, EDGE_PREFIX, BACKEND_PREFIX, ProgramLoadError
from numdiff.program._allowlist import classify_target, is_plain_identifier
from numdiff.program.signatures import check_call
from numdiff.program.guard import MAX_SUBGRAPH_DEPTH, ORIGINAL_NAME_KEY, ProgramNames

__all__ = ["OP_TYPE_KEY", "UNRUNNABLE_KEY", "GraphBuilder", "Unsupported", "lazy_graph_module"]

OP_TYPE_KEY = "numdiff_op_type"
UNRUNNABLE_KEY = "numdiff_unrunnable"
_SYM_OPS = frozenset({"sym_size.int", "sym_numel.default", "sym_stride.int", "sym_storage_offset.default",
                      "item.default"})
#: Loads a delegate's lowered module from its JSON text (given by the program loader).
LoweredLoader = Callable[[str], LoweredModule]



def lazy_graph_module(root: torch.nn.Module, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """A ``GraphModule`` that writes and compiles its Python code only when first called.

    ``torch.fx.GraphModule`` generates and compiles ``forward`` as it is made (~10 ms for a graph
    of a few hundred nodes); a loaded program's module is copied by ``ExportedProgram`` and the
    gap runs its graph with an ``Interpreter``, so that code is usually never used. torch's own
    lazy module (``torch.fx._lazy_graph_module``, torch 2.2+) defers it; without it, the usual one.
    """
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # pragma: no cover - every supported torch has it
        return torch.fx.GraphModule(root, graph)
    return _LazyGraphModule(root, graph)

@dataclass(slots=True)
class GraphBuilder:
    """Builds one program's graphs; one instance per program.

    Attributes:
        names: The guard's safe value names.
        load_lowered: Turns a delegate's lowered-module JSON text into a :class:`LoweredModule`.
    """

    names: ProgramNames
    load_lowered: LoweredLoader
    _lowered_count: int = field(default=0)

    def build(self, graph_json: object, depth: int = 0) -> torch.fx.GraphModule:
        """The ``GraphModule`` of one serialized graph (placeholders for every graph input)."""
        if depth > MAX_SUBGRAPH_DEPTH:
            raise ProgramLoadError(f"subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH} levels")
        if not isinstance(graph_json, dict):
            raise ProgramLoadError("a graph is not a JSON object")
        root, graph = torch.nn.Module(), torch.fx.Graph()
        env: dict[str, torch.fx.Node] = {}
        for item in graph_json.get("inputs") or []:
            self._input(graph, env, item, graph_json.get("tensor_values"))
        for node_json in graph_json.get("nodes") or []:
            if not isinstance(node_json, dict):
                raise ProgramLoadError("a graph node is not a JSON object")
            self._node(root, graph, env, node_json, depth)
        outputs = [decode_value(o, env, _no_graph) for o in graph_json.get("outputs") or []]
        if graph_json.get("is_single_tensor_return"):
            if len(outputs) != 1:
                raise ProgramLoadError("a graph marked single-tensor-return has several outputs")
            graph.output(outputs[0])
        else:
            graph.output(tuple(outputs))
        return lazy_graph_module(root, graph)

    # ------------------------------------------------------------------ nodes

    def _create(self, graph: torch.fx.Graph, op: str, target: torch.fx.node.Target, name: str | None,
                args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> torch.fx.Node:
        safe = self.names.safe(name) if name else None
        node = graph.create_node(op, target, args, kwargs or {}, name=safe)
        if name and safe != name:
            node.meta[ORIGINAL_NAME_KEY] = name
        return node

    def _input(self, graph: torch.fx.Graph, env: dict[str, torch.fx.Node], item: object, tensor_values: object) -> None:
        if not isinstance(item, dict) or len(item) != 1:
            raise ProgramLoadError("a graph input is not a one-key JSON object")
        (kind, value), = item.items()
        if kind in ("as_tensor", "as_custom_obj"):
            name = value.get("name") if isinstance(value, dict) else None
        elif kind == "as_sym_int" and isinstance(value, dict) and "as_name" in value:
            name = value["as_name"]
        else:
            raise Unsupported(f"graph input kind {kind}")
        if not isinstance(name, str):
            raise ProgramLoadError("a graph input has no name")
        if name in env:
            raise ProgramLoadError(f"graph input {name[:80]!r} is listed twice")
        safe = self.names.safe(name)
        node = graph.placeholder(safe)
        node.name = safe
        if safe != name:
            node.meta[ORIGINAL_NAME_KEY] = name
        node.meta["val"] = _meta_tensor(name, tensor_values.get(name) if isinstance(tensor_values, dict) else None)
        env[name] = node

    def _graph_arg(self, root: torch.nn.Module, graph: torch.fx.Graph, depth: int) -> Callable[[dict[str, Any]], torch.fx.Node]:
        def build(value: dict[str, Any]) -> torch.fx.Node:
            name = value.get("name")
            if not is_plain_identifier(name) or hasattr(root, str(name)):
                raise ProgramLoadError(f"subgraph name {str(name)[:80]!r} is not a fresh plain identifier")
            root.add_module(str(name), self.build(value.get("graph"), depth + 1))
            return self._create(graph, "get_attr", str(name), str(name))

        return build

    def _node(self, root: torch.nn.Module, graph: torch.fx.Graph, env: dict[str, torch.fx.Node],
              node_json: dict[str, Any], depth: int) -> None:
        target = node_json.get("target")
        if not isinstance(target, str):
            raise ProgramLoadError(f"node {str(node_json.get('name'))[:80]!r} has no operator name")
        inputs = node_json.get("inputs") or []
        outputs = node_json.get("outputs") or []
        name = node_json.get("name") if isinstance(node_json.get("name"), str) and node_json.get("name") else None
        single = _single_output_name(outputs)
        meta = decode_metadata(node_json.get("metadata"), str(name))
        graph_arg = self._graph_arg(root, graph, depth)

        if target == "memory.alloc":
            specs = [decode_alloc_spec(_string(a)) for a in inputs]
            if len(inputs) == 1 and inputs[0].get("name") == "alloc_arg":
                args: tuple[Any, ...] = (specs[0],)
            else:
                args = (specs,)
            node = self._create(graph, "call_function", alloc, "alloc", args)
            op_type = "alloc"
        elif target == DELEGATE_TARGET:
            node, op_type = self._delegate(root, graph, env, inputs, single), DELEGATE_OP_TYPE
            lowered = getattr(root, str(node.args[0].target))  # type: ignore[union-attr]
            if lowered.unrunnable_reason is not None:
                meta[UNRUNNABLE_KEY] = f"{lowered.backend_id} delegate: {lowered.unrunnable_reason}"
        else:
            resolved = resolve_target(target)
            op_type = resolved.op_type
            if resolved.target is None:
                reason = f"operator {target!r} is not available in this process (no torch op or numdiff stand-in)"
                values = tuple(decode_value(a.get("arg"), env, graph_arg) for a in inputs)
                node = self._create(graph, "call_function", UnrunnableOp(target, reason), single or name, values)
                meta[UNRUNNABLE_KEY] = reason
            else:
                ref = classify_target(resolved.target)
                if ref.kind == "overload":
                    returns = len(ref.op._schema.returns)
                    if len(outputs) > max(1, returns):
                        raise ProgramLoadError(f"node {str(name)[:80]!r} lists {len(outputs)} outputs but operator "
                                               f"{target[:80]!r} returns {returns}")
                    args, kwargs = _schema_args(ref.op, inputs, env, graph_arg)
                    is_sym = f"{ref.op._opname}.{ref.op._overloadname}" in _SYM_OPS and ref.op.namespace == "aten"
                    node_name = (_sym_output_name(outputs) or name) if is_sym else (single or name)
                    call: Any = ref.op
                    if target.startswith((EDGE_PREFIX, BACKEND_PREFIX)):
                        call = edge_target(ref.op, op_type)
                    node = self._create(graph, "call_function", ref.op, node_name, args, kwargs)
                    node.target = call
                elif ref.kind in ("higher_order", "builtin"):
                    args, kwargs = _hop_args(inputs, env, graph_arg, positional=ref.kind == "builtin")
                    check_call(str(name or single), target, ref.kind, ref.op, args, kwargs)
                    node = self._create(graph, "call_function", ref.op, single or name or _sym_output_name(outputs), args, kwargs)
                    for value in (*args, *kwargs.values()):
                        if isinstance(value, torch.fx.Node) and value.op == "get_attr":
                            value.meta.update(meta)
                else:  # pragma: no cover - resolve_target only returns runnable names for these kinds
                    raise Unsupported(f"operator kind {ref.kind}")
        node.meta.update(meta)
        node.meta[OP_TYPE_KEY] = op_type
        self._outputs(graph, env, node, outputs, meta)

    def _delegate(self, root: torch.nn.Module, graph: torch.fx.Graph, env: dict[str, torch.fx.Node],
                  inputs: list[Any], single: str | None) -> torch.fx.Node:
        if not inputs or not isinstance(inputs[0], dict):
            raise ProgramLoadError("delegate node has no lowered module")
        lowered = self.load_lowered(_string(inputs[0]))
        lowered.returns_sequence = single is None
        wanted = inputs[0].get("name")
        attr = str(wanted) if is_plain_identifier(wanted) and len(str(wanted)) <= 128 and not hasattr(root, str(wanted)) else None
        if attr is None:
            attr = f"lowered_module_{self._lowered_count}"
            while hasattr(root, attr):
                attr += "_"
        self._lowered_count += 1
        root.add_module(attr, lowered)
        module_node = graph.get_attr(attr)
        module_node._rename(attr)
        values = tuple(decode_value(a.get("arg"), env, _no_graph) for a in inputs[1:])
        return self._create(graph, "call_function", DELEGATE_CALL, single, (module_node, *values))

    def _outputs(self, graph: torch.fx.Graph, env: dict[str, torch.fx.Node], node: torch.fx.Node,
                 outputs: list[Any], meta: dict[str, Any]) -> None:
        if not outputs:
            return
        if len(outputs) == 1:
            (kind, value), = outputs[0].items()
            if kind == "as_tensor":
                env[value["name"]] = node
                return
            if kind in ("as_sym_int", "as_sym_float", "as_sym_bool") and "as_name" in value:
                env[value["as_name"]] = node
                return
            if kind == "as_none":
                return
            if kind == "as_tensors":
                env.setdefault(node.name, node)
                self._getitems(graph, env, node, [{"as_tensor": v} for v in value], meta, set())
                return
        env.setdefault(node.name, node)  # as torch's loader: the node itself is a value (e.g. an alloc list)
        self._getitems(graph, env, node, outputs, meta, set())

    def _getitems(self, graph: torch.fx.Graph, env: dict[str, torch.fx.Node], node: torch.fx.Node,
                  items: list[Any], meta: dict[str, Any], seen: set[str]) -> None:
        for index, item in enumerate(items):
            if not isinstance(item, dict) or len(item) != 1:
                raise ProgramLoadError(f"node {node.name!r}: an output is not a one-key JSON object")
            (kind, value), = item.items()
            if kind == "as_tensor" or (kind in ("as_sym_int", "as_sym_float") and "as_name" in value):
                out_name = value["name"] if kind == "as_tensor" else value["as_name"]
                if not isinstance(out_name, str):
                    raise ProgramLoadError(f"node {node.name!r}: an output has no name")
                if out_name in seen:
                    raise ProgramLoadError(f"node {node.name!r} lists its output {str(out_name)[:80]!r} more than once")
                seen.add(out_name)
                out = self._create(graph, "call_function", operator.getitem, out_name, (node, index))
                env[out_name] = out
            elif kind == "as_none":
                out = self._create(graph, "call_function", operator.getitem, "as_none", (node, index))
            elif kind in ("as_tensors", "as_sym_ints"):
                out = self._create(graph, "call_function", operator.getitem, None, (node, index))
                wrap = "as_tensor" if kind == "as_tensors" else "as_sym_int"
                self._getitems(graph, env, out, [{wrap: v} for v in value], meta, seen)
            else:
                raise Unsupported(f"output kind {kind}")
            out.meta.update(meta)
            out.meta[OP_TYPE_KEY] = "getitem"


#: Bytes a tensor can span: torch computes a storage size in int64 and refuses sizes whose product overflows.
_MAX_TENSOR_BYTES = 1 << 62


def _meta_tensor(name: str, value: object) -> torch.Tensor | None:
    """A storage-less tensor with an input's static shape and dtype (``None`` for symbolic or unknown shapes).

    ``ExportedProgram.module()`` turns it into input-shape checks, as it does with the reference's fake tensors.

    Raises:
        ProgramLoadError: The sizes hold more bytes than any tensor can (torch would overflow).
    """
    if not isinstance(value, dict) or value.get("dtype") not in DTYPES:
        return None
    sizes: list[int] = []
    for size in value.get("sizes") or []:
        dim = size.get("as_int") if isinstance(size, dict) else None
        if not isinstance(dim, int) or not 0 <= dim < (1 << 40):
            return None
        sizes.append(dim)
    dtype = DTYPES[value["dtype"]]
    if math.prod(sizes) * dtype.itemsize > _MAX_TENSOR_BYTES:
        raise ProgramLoadError(f"tensor {name[:80]!r}: sizes {sizes} hold more elements than a tensor can "
                               f"({_MAX_TENSOR_BYTES} bytes at most)")
    return torch.empty(sizes, dtype=dtype, device="meta")


def _no_graph(value: dict[str, Any]) -> torch.fx.Node:
    raise ProgramLoadError("a subgraph appears where only values are allowed")


def _string(named: object) -> str:
    arg = named.get("arg") if isinstance(named, dict) else None
    text = arg.get("as_string") if isinstance(arg, dict) else None
    if not isinstance(text, str):
        raise ProgramLoadError("an argument that must be a string is not one")
    return text


def _single_output_name(outputs: list[Any]) -> str | None:
    if len(outputs) == 1 and isinstance(outputs[0], dict) and "as_tensor" in outputs[0]:
        name = outputs[0]["as_tensor"].get("name")
        return name if isinstance(name, str) else None
    return None


def _sym_output_name(outputs: list[Any]) -> str | None:
    if len(outputs) == 1 and isinstance(outputs[0], dict) and len(outputs[0]) == 1:
        (kind, value), = outputs[0].items()
        if kind.startswith("as_sym_") and isinstance(value, dict) and isinstance(value.get("as_name"), str):
            return str(value["as_name"])
    return None


def _schema_args(op: torch._ops.OpOverload, inputs: list[Any], env: dict[str, torch.fx.Node],
                 graph_arg: Callable[[dict[str, Any]], torch.fx.Node]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword arguments laid out by the operator's schema, as torch's loader does."""
    given = {a.get("name"): decode_value(a.get("arg"), env, graph_arg) for a in inputs}
    kinds = {a.get("name"): a.get("kind") for a in inputs}
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for schema_arg in op._schema.arguments:
        name = schema_arg.name
        if name in given and kinds.get(name) == 1:  # ArgumentKind.POSITIONAL
            args.append(given[name])
        elif name in given and kinds.get(name) == 2 and not keyword.iskeyword(name):  # KEYWORD
            kwargs[name] = given[name]
        elif not schema_arg.has_default_value() and not schema_arg.kwarg_only:
            if name not in given:
                raise ProgramLoadError(f"operator {op} is missing its argument {name!r}")
            args.append(given[name])
        elif keyword.iskeyword(name):
            args.extend(kwargs.values())
            kwargs = {}
            args.append(given.get(name, schema_arg.default_value))
        elif name in given:
            kwargs[name] = given[name]
    return tuple(args), kwargs


def _hop_args(inputs: list[Any], env: dict[str, torch.fx.Node],
              graph_arg: Callable[[dict[str, Any]], torch.fx.Node], *, positional: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Arguments of a higher-order operator (positional when unnamed or marked so) or a builtin (positional)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for named in inputs:
        value = decode_value(named.get("arg"), env, graph_arg)
        name = named.get("name")
        if positional or named.get("kind") == 1 or not name:
            args.append(value)
        elif is_plain_identifier(name):
            kwargs[str(name)] = value
        else:
            raise ProgramLoadError(f"argument name {str(name)[:80]!r} is not a plain identifier")
    return tuple(args), kwargs
