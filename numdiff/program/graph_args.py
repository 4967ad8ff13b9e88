"""Decode the values of a serialized program (arguments, node metadata) for the direct graph builder.

The encodings are torch.export's serialization schema (``Argument``: one key naming the kind,
e.g. ``{"as_tensor": {"name": "x"}}``) in the version ExecuTorch writes. Every enum goes through
a fixed table; anything this module does not know raises :class:`Unsupported`, and the caller
either refuses the program or hands it to its fallback route. Nothing here resolves a name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.fx.traceback as fx_traceback

from numdiff.errors import NumdiffError
from numdiff.program.graph_meta import ProgramLoadError, parse_nn_module_stack, parse_source_fn_stack

__all__ = ["DTYPES", "Unsupported", "alloc", "decode_alloc_spec", "decode_metadata", "decode_value"]

#: torch.export serde ``ScalarType`` values → dtypes.
DTYPES = {
    1: torch.uint8, 2: torch.int8, 3: torch.int16, 4: torch.int32, 5: torch.int64, 6: torch.float16,
    7: torch.float32, 8: torch.float64, 9: torch.complex32, 10: torch.complex64, 11: torch.complex128,
    12: torch.bool, 13: torch.bfloat16, 28: torch.uint16, 29: torch.float8_e4m3fn, 30: torch.float8_e5m2,
    31: torch.float8_e4m3fnuz, 32: torch.float8_e5m2fnuz, 34: torch.uint32, 35: torch.uint64,
}
_LAYOUTS = {1: torch.sparse_coo, 2: torch.sparse_csr, 3: torch.sparse_csc, 4: torch.sparse_bsr,
            5: torch.sparse_bsc, 6: torch._mkldnn, 7: torch.strided}  # type: ignore[attr-defined]
_MEMORY_FORMATS = {1: torch.contiguous_format, 2: torch.channels_last, 3: torch.channels_last_3d,
                   4: torch.preserve_format}
_DEVICE_TYPES = frozenset({"cpu", "cuda", "meta", "mps", "xpu", "hpu"})
_ALLOC_SPEC = re.compile(r"\(\s*((?:[0-9]{1,12}\s*,?\s*)*)\)\s*;\s*([0-9]{1,3})\Z")
_MAX_ALLOC_ELEMENTS = 1 << 31
#: A ``memory.alloc`` argument: the shape and dtype of the buffer to allocate.
AllocSpec = tuple[tuple[int, ...], torch.dtype]


class Unsupported(NumdiffError):
    """A construct the direct builder does not handle (the caller decides: fallback or error).

    Caught inside numdiff (:func:`numdiff.program.loader.load_program` falls back to torch's
    deserializer). Deliberately not a ``ValueError``: the loader turns those into ``ProgramLoadError``.
    """


def _ref(name: object, env: dict[str, torch.fx.Node]) -> torch.fx.Node:
    if not isinstance(name, str) or name not in env:
        raise ProgramLoadError(f"an argument refers to the value {str(name)[:80]!r}, which no earlier node produces")
    return env[name]


def _sym(value: object, env: dict[str, torch.fx.Node]) -> torch.fx.node.Argument:
    """A ``SymIntArgument`` / ``SymFloatArgument`` / ``SymBoolArgument``: a constant or a node."""
    if not isinstance(value, dict) or len(value) != 1:
        raise Unsupported("malformed symbolic argument")
    (kind, payload), = value.items()
    if kind == "as_name":
        return _ref(payload, env)
    if kind in ("as_int", "as_bool"):
        constant: int | bool = payload  # the type torch.export's schema gives this kind
        return constant
    if kind == "as_float":
        return float(payload)
    raise Unsupported(f"symbolic argument kind {kind}")


def decode_value(
    arg: object, env: dict[str, torch.fx.Node], graph_arg: Callable[[dict[str, Any]], torch.fx.Node]
) -> torch.fx.node.Argument:
    """The Python/fx value of one serialized ``Argument``.

    Args:
        arg: The ``{"as_<kind>": payload}`` object.
        env: Value name → node producing it.
        graph_arg: Builds a subgraph argument (``as_graph``) and returns its ``get_attr`` node.
    """
    if not isinstance(arg, dict) or len(arg) != 1:
        raise ProgramLoadError("an argument is not a one-key JSON object")
    (kind, value), = arg.items()
    if kind == "as_tensor":
        return _ref(value.get("name") if isinstance(value, dict) else None, env)
    if kind == "as_tensors":
        return [_ref(v.get("name"), env) for v in value]
    if kind == "as_optional_tensors":
        return [None if "as_none" in v else _ref(v["as_tensor"]["name"], env) for v in value]
    if kind in ("as_int", "as_bool", "as_string"):
        scalar: int | bool | str = value  # checked by check_program (_PAYLOADS)
        return scalar
    if kind in ("as_ints", "as_bools", "as_strings"):
        return list(value)
    if kind == "as_float":
        return float(value)
    if kind == "as_floats":
        return [float(v) for v in value]
    if kind == "as_none":
        return None
    if kind in ("as_sym_int", "as_sym_float", "as_sym_bool"):
        return _sym(value, env)
    if kind in ("as_sym_ints", "as_sym_floats", "as_sym_bools"):
        return [_sym(v, env) for v in value]
    if kind == "as_scalar_type" and value in DTYPES:
        return DTYPES[value]
    if kind == "as_layout" and value in _LAYOUTS:
        layout: torch.layout = _LAYOUTS[value]
        return layout
    if kind == "as_memory_format" and value in _MEMORY_FORMATS:
        return _MEMORY_FORMATS[value]
    if kind == "as_device" and isinstance(value, dict) and value.get("type") in _DEVICE_TYPES:
        index = value.get("index")
        return torch.device(value["type"], index) if isinstance(index, int) else torch.device(value["type"])
    if kind == "as_graph" and isinstance(value, dict):
        return graph_arg(value)
    if kind == "as_complex" and isinstance(value, dict):
        return complex(float(value["real"]), float(value["imag"]))
    raise Unsupported(f"argument kind {kind}")


def decode_alloc_spec(text: object) -> AllocSpec:
    """``"(3, 4);7"`` (shape; serde dtype value), as ExecuTorch writes a ``memory.alloc`` argument."""
    match = _ALLOC_SPEC.match(text) if isinstance(text, str) and len(text) <= 512 else None
    if match is None or int(match.group(2)) not in DTYPES:
        raise ProgramLoadError(f"memory.alloc argument {str(text)[:80]!r} is not '(<sizes>);<dtype>'")
    shape = tuple(int(p) for p in match.group(1).replace(" ", "").split(",") if p)
    count = 1
    for size in shape:
        count *= size
    if count > _MAX_ALLOC_ELEMENTS:
        raise ProgramLoadError(f"memory.alloc argument {str(text)[:80]!r} asks for {count} elements")
    return shape, DTYPES[int(match.group(2))]


class _Alloc:
    """Stand-in for ExecuTorch's ``memory.alloc``: empty tensor(s) for ``(shape, dtype)`` spec(s).

    Equal to itself and to any function named ``alloc`` from module ``executorch.exir.memory``
    (compared by name only, nothing imported), so graphs numdiff loads compare equal node by node
    with the reference's.
    """

    __name__ = "alloc"
    __qualname__ = "alloc"
    _REFERENCE_MODULE = "executorch.exir.memory"

    def __call__(self, spec: AllocSpec | list[AllocSpec]) -> torch.Tensor | list[torch.Tensor]:
        if isinstance(spec, list):
            return [torch.empty(shape, dtype=dtype) for shape, dtype in spec]
        shape, dtype = spec
        return torch.empty(shape, dtype=dtype)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        return bool(getattr(other, "__module__", None) == self._REFERENCE_MODULE
                    and getattr(other, "__name__", None) == "alloc" and callable(other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("numdiff-alloc", "alloc"))

    def __repr__(self) -> str:
        return "<numdiff memory.alloc>"

    def __reduce__(self) -> str:
        return "alloc"  # the module-level instance (pickle and deepcopy keep the one object)


alloc = _Alloc()
alloc.__module__ = __name__


def decode_metadata(metadata: object, node_name: str) -> dict[str, Any]:
    """The node meta the reference's loader restores from a serialized node's ``metadata`` strings."""
    meta: dict[str, Any] = {}
    if not isinstance(metadata, dict):
        return meta
    if stack_trace := metadata.get("stack_trace"):
        meta["stack_trace"] = stack_trace
    if raw := metadata.get("nn_module_stack"):
        meta["nn_module_stack"] = parse_nn_module_stack(raw)
    if raw := metadata.get("source_fn_stack"):
        meta["source_fn_stack"] = parse_source_fn_stack(raw)  # kept as strings: never resolved
    if raw := metadata.get("torch_fn"):
        meta["torch_fn"] = tuple(str(raw).split(";"))
    if raw := metadata.get("from_node"):
        try:
            meta["from_node"] = [fx_traceback.NodeSource._from_dict(d) for d in json.loads(raw)]
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            raise ProgramLoadError(f"node {node_name!r} has unreadable from_node metadata ({type(e).__name__})") from e
    if raw := metadata.get("debug_handle"):
        try:
            meta["debug_handle"] = int(raw)
        except ValueError as e:
            raise ProgramLoadError(f"node {node_name!r} has a non-integer debug_handle {str(raw)[:40]!r}") from e
    if raw := metadata.get("custom"):
        try:
            meta["custom"] = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise ProgramLoadError(f"node {node_name!r} has unreadable custom metadata") from e
    return meta
