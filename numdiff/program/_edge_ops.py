"""Map the operator names ExecuTorch serializes to runnable torch operators.

ExecuTorch writes Edge-dialect nodes with targets such as
``executorch.exir.dialects.edge.ops.aten.convolution.default``. Without ExecuTorch those names mean
nothing to torch, so before a program is handed to torch's deserializer every target is rewritten:

* Edge ``aten`` ops become the matching ``torch.ops.aten`` overload (same schema, same kernel).
* ``quantized_decomposed`` ops use torch's own registrations when torch ships them
  (``torch.ao.quantization.fx._decomposed``); the few it lacks are defined here under the
  numdiff-owned namespace ``numdiff_edge``.
* ExecuTorch's dim-order ops (``dim_order_ops::_to_dim_order_copy``, ``_clone_dim_order``,
  ``_empty_dim_order``) are defined under ``numdiff_edge`` with the same schemas, implemented with
  ``aten._to_copy`` / ``clone`` / ``empty`` and the memory format the dim order names.
* Anything else that torch has not registered is reported as unresolved; the caller loads it as an
  opaque, clearly marked node. Names the allow-list refuses (:mod:`numdiff.program._allowlist`)
  are errors; no name is ever resolved by walking attributes.

The op *type* name the reference shows for a node (``target.__name__`` in the program ExecuTorch
loads) is computed from the serialized name, so it does not depend on which torch op stands in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from numdiff.program.graph_meta import EDGE_PREFIX, TORCH_OPS_PREFIX, ProgramLoadError, op_type_for
from numdiff.program._allowlist import ForbiddenOperator, classify_target, registered_overload

__all__ = [
    "EDGE_PREFIX",
    "NUMDIFF_NAMESPACE",
    "ResolvedTarget",
    "ensure_ops_registered",
    "resolve_target",
]

#: Library namespace numdiff owns for the few ops torch does not ship.
NUMDIFF_NAMESPACE = "numdiff_edge"

_LOCK = threading.Lock()
_registered = False
_LIBRARY: Any = None  # keeps the torch.library.Library alive for the process lifetime

# Schemas copied from the public operator signatures so serialized argument names line up.
_NUMDIFF_SCHEMAS = {
    "_to_dim_order_copy": (
        "_to_dim_order_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,"
        " bool? pin_memory=None, bool non_blocking=False, int[]? dim_order=None) -> Tensor"
    ),
    "_clone_dim_order": "_clone_dim_order(Tensor self, *, bool non_blocking=False, int[]? dim_order=None) -> Tensor",
    "_empty_dim_order": (
        "_empty_dim_order(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,"
        " bool? pin_memory=None, int[]? dim_order=None) -> Tensor"
    ),
    "quantize_per_channel": (
        "quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min,"
        " int quant_max, ScalarType dtype) -> Tensor"
    ),
    "dequantize_per_channel": (
        "dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min,"
        " int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"
    ),
}
_DIM_ORDER_OPS = ("_to_dim_order_copy", "_clone_dim_order", "_empty_dim_order")


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """What a serialized operator name turns into.

    Attributes:
        serialized: The name as written in the file.
        target: The name to hand torch's deserializer (``torch.ops.…``), or ``None`` when no
            runnable torch operator exists for it in this process.
        op_type: The op type name the reference shows for such a node (``target.__name__``).
    """

    serialized: str
    target: str | None
    op_type: str


def _memory_format(dim_order: list[int] | None, ndim: int) -> torch.memory_format:
    """Translate a dim order into the memory format that produces it."""
    if dim_order is None or list(dim_order) == list(range(len(dim_order))):
        return torch.contiguous_format
    if list(dim_order) == [0, 2, 3, 1]:
        return torch.channels_last
    if list(dim_order) == [0, 2, 3, 4, 1]:
        return torch.channels_last_3d
    raise ValueError(f"dim order {list(dim_order)} has no torch memory format (tensor rank {ndim})")


def _to_dim_order_copy(
    self: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
    non_blocking: bool = False,
    dim_order: list[int] | None = None,
) -> torch.Tensor:
    out: torch.Tensor = torch.ops.aten._to_copy.default(
        self,
        dtype=dtype,
        layout=layout,
        device=device,
        pin_memory=pin_memory,
        non_blocking=non_blocking,
        memory_format=_memory_format(dim_order, self.dim()),
    )
    return out


def _clone_dim_order(self: torch.Tensor, *, non_blocking: bool = False, dim_order: list[int] | None = None) -> torch.Tensor:
    out: torch.Tensor = torch.ops.aten.clone.default(self, memory_format=_memory_format(dim_order, self.dim()))
    return out


def _empty_dim_order(
    size: list[int],
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
    dim_order: list[int] | None = None,
) -> torch.Tensor:
    out: torch.Tensor = torch.ops.aten.empty.memory_format(
        size,
        dtype=dtype,
        layout=layout,
        device=device,
        pin_memory=pin_memory,
        memory_format=_memory_format(dim_order, len(size)),
    )
    return out


def _channel_view(t: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    shape = [1] * ndim
    shape[axis] = -1
    return t.reshape(shape)


def _quantize_per_channel(
    input: torch.Tensor,
    scales: torch.Tensor,
    zero_points: torch.Tensor,
    axis: int,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    axis = axis % input.dim()
    scale = _channel_view(scales.to(torch.float32), axis, input.dim())
    zp = _channel_view(zero_points.to(torch.float32), axis, input.dim())
    q = torch.round(input.to(torch.float32) / scale) + zp
    return torch.clamp(q, quant_min, quant_max).to(dtype)


def _dequantize_per_channel(
    input: torch.Tensor,
    scales: torch.Tensor,
    zero_points: torch.Tensor | None,
    axis: int,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
    *,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    axis = axis % input.dim()
    scale = _channel_view(scales.to(torch.float32), axis, input.dim())
    x = input.to(torch.float32)
    if zero_points is not None:
        x = x - _channel_view(zero_points.to(torch.float32), axis, input.dim())
    return (x * scale).to(out_dtype or torch.float32)


_IMPLS = {
    "_to_dim_order_copy": _to_dim_order_copy,
    "_clone_dim_order": _clone_dim_order,
    "_empty_dim_order": _empty_dim_order,
    "quantize_per_channel": _quantize_per_channel,
    "dequantize_per_channel": _dequantize_per_channel,
}


def ensure_ops_registered() -> None:
    """Make every operator numdiff maps to resolvable under ``torch.ops`` (idempotent, thread-safe)."""
    global _registered, _LIBRARY
    if _registered:
        return
    with _LOCK:
        if _registered:
            return
        # torch's quantized_decomposed ops are registered when a program names one (registered_overload)
        if not _has_op(NUMDIFF_NAMESPACE, "_to_dim_order_copy"):
            lib = torch.library.Library(NUMDIFF_NAMESPACE, "DEF")  # type: ignore[no-untyped-call]
            for name, schema in _NUMDIFF_SCHEMAS.items():
                lib.define(schema)  # type: ignore[no-untyped-call]
                lib.impl(name, _IMPLS[name], "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
            _LIBRARY = lib
        _registered = True


def _has_op(namespace: str, name: str, overload: str = "default") -> bool:
    return registered_overload(namespace, name, overload) is not None


def _torch_target(namespace: str, name: str, overload: str) -> str | None:
    """The ``torch.ops`` name that runs ``namespace::name.overload``, or ``None``."""
    if namespace == "dim_order_ops" and name in _DIM_ORDER_OPS and overload == "default":
        return f"{TORCH_OPS_PREFIX}{NUMDIFF_NAMESPACE}.{name}.default"
    if _has_op(namespace, name, overload):
        return f"{TORCH_OPS_PREFIX}{namespace}.{name}.{overload}"
    if namespace == "quantized_decomposed" and name in _NUMDIFF_SCHEMAS and overload == "default":
        return f"{TORCH_OPS_PREFIX}{NUMDIFF_NAMESPACE}.{name}.default"
    return None


def resolve_target(serialized: str) -> ResolvedTarget:
    """Decide how a serialized operator name is loaded and what op type the reference shows for it.

    The name goes through the allow-list of :mod:`numdiff.program._allowlist` only; nothing is
    resolved by attribute access.

    Args:
        serialized: A node's ``target`` string from an ExecuTorch-serialized program.

    Returns:
        The torch target to deserialize with (``None`` if this process cannot run it) and the
        reference's op type name.

    Raises:
        ProgramLoadError: The name is refused by the allow-list (see ``classify_target``).

    Example:
        >>> r = resolve_target("executorch.exir.dialects.edge.ops.aten.relu.default")
        >>> (r.target, r.op_type)
        ('torch.ops.aten.relu.default', 'aten.relu.default')
    """
    ensure_ops_registered()
    try:
        ref = classify_target(serialized)
    except ForbiddenOperator as e:
        raise ProgramLoadError(
            f"refused operator name {e}",
            "numdiff resolves only registered torch operators and a fixed list of builtins; ExecuTorch never "
            "writes this name, so the file was modified or crafted.",
        ) from e
    op_type = op_type_for(serialized)
    if ref.parts is not None and ref.kind in ("edge", "unrunnable"):
        return ResolvedTarget(serialized, _torch_target(*ref.parts), op_type)
    if ref.kind in ("overload", "higher_order", "builtin", "delegate"):
        # Allow-listed names only: torch's deserializer may resolve these strings itself.
        return ResolvedTarget(serialized, serialized, op_type)
    # memory.alloc and other ExecuTorch-only names: the reference names them by the full string.
    return ResolvedTarget(serialized, None, op_type)
