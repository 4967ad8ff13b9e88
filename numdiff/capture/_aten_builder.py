"""Build the ATen reference graph as a runnable ``fx.GraphModule`` straight from its JSON.

Loading the ETRecord's ATen ``exported_program`` through torch's export deserializer costs a
second of imports plus a slow dataclass decoding and an unlifting pass, and the numerical gap only
needs to *run* the graph. For the common case — plain ``torch.ops`` calls on tensors, parameters,
buffers and constants, user inputs and outputs that are tensors — this module builds the same
graph (same node names, targets, arguments and ``stack_trace`` / ``nn_module_stack`` /
``from_node`` metadata) directly with ``torch.fx``. Anything else (symbolic shapes, control flow,
custom objects, mutated buffers, non-tensor inputs) returns ``None`` and the caller falls back to
torch's deserializer. ``tests/capture/test_aten_builder.py`` checks both routes capture the same
values on every fixture.

The JSON is untrusted: :func:`~numdiff.schema._program_guard.guard_program` checks it first,
operators come only from the allow-list (:mod:`numdiff.schema._op_allowlist`), and nodes are
named with the guard's safe names (the file's name kept in ``meta["numdiff_original_name"]``).
A program the guard refuses returns ``None`` here; torch's route then raises the named error.
"""

from __future__ import annotations

import io
import json
import operator
from typing import Any

import torch
import torch.fx
import torch.fx.traceback as fx_traceback

from numdiff.schema._graph_meta import ProgramLoadError, check_header, parse_nn_module_stack
from numdiff.schema._op_allowlist import ForbiddenOperator, classify_target
from numdiff.schema._program_guard import ORIGINAL_NAME_KEY, ProgramNames, guard_program

__all__ = ["build_aten_graph_module"]

# torch.export serde schema enums (torch/_export/serde/schema.py), by value.
_DTYPES = {
    1: torch.uint8, 2: torch.int8, 3: torch.int16, 4: torch.int32, 5: torch.int64, 6: torch.float16,
    7: torch.float32, 8: torch.float64, 9: torch.complex32, 10: torch.complex64, 11: torch.complex128,
    12: torch.bool, 13: torch.bfloat16, 28: torch.uint16, 29: torch.float8_e4m3fn, 30: torch.float8_e5m2,
    31: torch.float8_e4m3fnuz, 32: torch.float8_e5m2fnuz, 34: torch.uint32, 35: torch.uint64,
}
_LAYOUTS = {1: torch.sparse_coo, 2: torch.sparse_csr, 3: torch.sparse_csc, 4: torch.sparse_bsr,
            5: torch.sparse_bsc, 6: torch._mkldnn, 7: torch.strided}  # type: ignore[attr-defined]
_MEMORY_FORMATS = {1: torch.contiguous_format, 2: torch.channels_last, 3: torch.channels_last_3d,
                   4: torch.preserve_format}


class _Unsupported(Exception):
    """Something the direct builder does not handle; the caller uses torch's deserializer."""


def _load(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    value = torch.load(io.BytesIO(data), weights_only=True)
    if not isinstance(value, dict):
        raise _Unsupported("companion is not a dict")
    return value


def _op(target: str) -> Any:
    """The registered torch operator a target names (allow-list only, never an attribute walk)."""
    try:
        ref = classify_target(target)
    except ForbiddenOperator as e:
        raise _Unsupported(target) from e
    if ref.kind != "overload":
        raise _Unsupported(target)
    return ref.op


def _create(
    graph: torch.fx.Graph,
    names: ProgramNames,
    op: str,
    target: Any,
    name: str,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
) -> torch.fx.Node:
    """A node named with the safe form of the file's name (the original kept in meta when they differ)."""
    safe = names.safe(name)
    node = graph.create_node(op, safe if op == "placeholder" else target, args, kwargs, name=safe)
    if safe != name:
        node.meta[ORIGINAL_NAME_KEY] = name
    return node


def _tensor_ref(arg: dict[str, Any], env: dict[str, torch.fx.Node]) -> torch.fx.Node:
    name = arg.get("name")
    if name not in env:
        raise _Unsupported(f"reference to unknown value {name!r}")
    return env[name]


def _decode(arg: dict[str, Any], env: dict[str, torch.fx.Node]) -> Any:
    (kind, value), = arg.items()
    if kind == "as_tensor":
        return _tensor_ref(value, env)
    if kind == "as_tensors":
        return [_tensor_ref(v, env) for v in value]
    if kind == "as_optional_tensors":
        return [None if "as_none" in v else _tensor_ref(v["as_tensor"], env) for v in value]
    if kind in ("as_int", "as_bool", "as_string", "as_ints", "as_bools", "as_strings"):
        return value
    if kind == "as_float":
        return float(value)
    if kind == "as_floats":
        return [float(v) for v in value]
    if kind == "as_none":
        return None
    if kind == "as_scalar_type" and value in _DTYPES:
        return _DTYPES[value]
    if kind == "as_layout" and value in _LAYOUTS:
        return _LAYOUTS[value]
    if kind == "as_memory_format" and value in _MEMORY_FORMATS:
        return _MEMORY_FORMATS[value]
    if kind == "as_device":
        return torch.device(value["type"], value.get("index"))
    raise _Unsupported(f"argument kind {kind}")


def _meta(metadata: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if metadata.get("stack_trace"):
        meta["stack_trace"] = metadata["stack_trace"]
    if metadata.get("nn_module_stack"):
        meta["nn_module_stack"] = parse_nn_module_stack(metadata["nn_module_stack"])
    if metadata.get("from_node"):
        meta["from_node"] = [fx_traceback.NodeSource._from_dict(d) for d in json.loads(metadata["from_node"])]
    return meta


def build_aten_graph_module(program: dict[str, Any], state_dict: bytes, constants: bytes) -> torch.fx.GraphModule | None:
    """A runnable module for a serialized ATen program, or None when it needs torch's deserializer.

    The module takes the program's user inputs as flat positional arguments and returns its user
    outputs as a tuple; parameters, buffers and constants are attributes of the module.
    """
    try:
        return _build(program, state_dict, constants)
    except (_Unsupported, ProgramLoadError, KeyError, TypeError, ValueError, RuntimeError):
        # ProgramLoadError: refused by the guard; torch's route raises it again, with the file named.
        return None


def _build(program: dict[str, Any], state_dict_bytes: bytes, constants_bytes: bytes) -> torch.fx.GraphModule:
    check_header(program)
    names = guard_program(program)  # refuses forbidden operators; safe names for generated code
    gm_json = program["graph_module"]
    signature, graph_json = gm_json["signature"], gm_json["graph"]
    state, consts = _load(state_dict_bytes), _load(constants_bytes)
    root, graph = torch.nn.Module(), torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    lifted: list[tuple[str, torch.Tensor]] = []
    for spec in signature["input_specs"]:
        (kind, body), = spec.items()
        if kind == "user_input":
            if "as_tensor" not in body["arg"]:
                raise _Unsupported("non-tensor user input")
            name = body["arg"]["as_tensor"]["name"]
            env[name] = _create(graph, names, "placeholder", None, name)
        elif kind in ("parameter", "buffer", "tensor_constant"):
            key = body.get("parameter_name") or body.get("buffer_name") or body.get("tensor_constant_name")
            source = consts if kind == "tensor_constant" or key not in state else state
            if key not in source:
                raise _Unsupported(f"missing {kind} {key!r}")
            lifted.append((body["arg"]["name"], source[key]))
        else:
            raise _Unsupported(f"input kind {kind}")
    for i, (name, tensor) in enumerate(lifted):
        attr = f"_lifted_{i}"
        root.register_buffer(attr, tensor, persistent=False)
        env[name] = _create(graph, names, "get_attr", attr, name)
    for node_json in graph_json["nodes"]:
        op = _op(node_json["target"])
        kwargs = {arg["name"]: _decode(arg["arg"], env) for arg in node_json["inputs"]}
        node = _create(graph, names, "call_function", op, node_json["name"], (), kwargs)
        node.meta.update(_meta(node_json.get("metadata") or {}))
        outputs = node_json["outputs"]
        if len(outputs) == 1 and "as_tensor" in outputs[0]:
            env[outputs[0]["as_tensor"]["name"]] = node
            continue
        items = outputs[0]["as_tensors"] if len(outputs) == 1 and "as_tensors" in outputs[0] else outputs
        for index, item in enumerate(items):
            ref = item.get("as_tensor", item) if isinstance(item, dict) else None
            if not isinstance(ref, dict) or "name" not in ref:
                if isinstance(item, dict) and "as_none" in item:
                    continue
                raise _Unsupported("output kind")
            out = _create(graph, names, "call_function", operator.getitem, ref["name"], (node, index))
            out.meta.update({k: v for k, v in node.meta.items() if k != ORIGINAL_NAME_KEY})
            env[ref["name"]] = out
    results = []
    for spec in signature["output_specs"]:
        (kind, body), = spec.items()
        if kind != "user_output" or "as_tensor" not in body["arg"]:
            raise _Unsupported(f"output kind {kind}")
        results.append(env[body["arg"]["as_tensor"]["name"]])
    graph.output(tuple(results))
    graph.set_codegen(_FlatInputs())
    graph.lint()
    return torch.fx.GraphModule(root, graph)


class _FlatInputs(torch.fx.graph.CodeGen):
    """Inputs arrive nested as the ETRecord stores them (``[(x, y)]``); the graph takes the leaves.

    ``ExportedProgram.module()`` accepts the same nesting through its pytree input spec.
    """

    def process_inputs(self, *args: Any) -> Any:
        from torch.utils import _pytree

        return list(_pytree.tree_leaves(args))
