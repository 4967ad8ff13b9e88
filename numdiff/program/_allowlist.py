"""Which operator names from a file numdiff may turn into callables: an explicit allow-list.

A serialized graph names its operators by dotted strings (``torch.ops.aten.relu.default``).
Resolving such a string by walking attributes (``torch`` → ``ops`` → ``load_library`` …) would let
a crafted file reach any callable torch exposes, so numdiff never does that. A name is accepted
only when

* it is a chain of plain identifiers (no dunder part, nothing but ``[A-Za-z0-9_]``),
* and it is one of:

  - ``torch.ops.<namespace>.<op>.<overload>`` whose schema is *registered* with torch's operator
    registry (``torch._C._jit_get_schemas_for_operator``, a lookup by name, no attribute access);
    only then is the ``OpOverload`` object fetched;
  - ``torch.ops.higher_order.<name>`` for a fixed few higher-order operators;
  - ``_operator.<name>``, ``math.<name>`` or ``torch.sym_*`` builtins from fixed tables;
  - a well-formed name numdiff knows it cannot run (``memory.alloc`` and other ``executorch.…``
    names ExecuTorch writes, ``torch.ops`` names of operators this process has not registered):
    such nodes load as clearly marked, unrunnable stand-ins and are never resolved.

Everything else is a :class:`ForbiddenOperator` that the program guard collects into one error.
"""

from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch

from numdiff.errors import NumdiffError
from numdiff.program.graph_meta import BACKEND_PREFIX, EDGE_PREFIX, TORCH_OPS_PREFIX

__all__ = [
    "HIGHER_ORDER_OPS",
    "MAX_TARGET_LENGTH",
    "OPERATOR_BUILTINS",
    "ForbiddenOperator",
    "OpRef",
    "classify_target",
    "edge_parts",
    "is_plain_identifier",
    "is_safe_value_name",
    "registered_overload",
]

#: Longest operator name accepted (ExecuTorch's longest names are well under 200 characters).
MAX_TARGET_LENGTH = 256
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")  # no leading underscore: no private-namespace tricks
_DOTTED = re.compile(r"[A-Za-z0-9_.]+\Z")

#: Higher-order operators a program may use, by their ``torch.ops.higher_order`` name.
HIGHER_ORDER_OPS = frozenset({"cond", "map_impl", "while_loop", "numdiff_deserialize_placeholder"})
#: ExecuTorch's delegate call: allowed as a target, always replaced by numdiff's own stand-in.
DELEGATE_HOP = "executorch_call_delegate"

#: ``_operator.<name>`` targets (Python operators on values, e.g. ``getitem`` on multi-output ops).
OPERATOR_BUILTINS: dict[str, Any] = {
    name: getattr(operator, name)
    for name in (
        "getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
        "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert", "lshift", "rshift",
        "matmul",
    )
}
_MATH_BUILTINS: dict[str, Any] = {name: getattr(math, name) for name in ("ceil", "floor", "trunc", "sqrt")}
_TORCH_SYM_BUILTINS: dict[str, Any] = {
    name: getattr(torch, name)
    for name in ("sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_sqrt", "sym_ite", "sym_sum")
    if hasattr(torch, name)
}
#: First parts of names ExecuTorch writes for nodes that are not torch operators (never resolved).
_UNRUNNABLE_ROOTS = frozenset({"memory", "executorch"})

# Names that are attributes of torch.ops itself (load_library, import_module, …): never namespaces.
_OPS_ATTRIBUTES = frozenset(dir(type(torch.ops))) | {"higher_order"}
# Names generated code must not rebind: keywords, builtins, the globals torch.fx's code uses.
_RESERVED = (
    frozenset(keyword.kwlist)
    | frozenset(keyword.softkwlist)
    | frozenset(dir(builtins))
    | {"self", "torch", "inf", "nan", "NoneType", "device", "fx_pytree", "pytree", "operator", "_operator"}
)


class ForbiddenOperator(NumdiffError):
    """An operator name numdiff refuses; ``reason`` says why (collected into one ETRecord error).

    Caught inside numdiff (the program guard and the Edge-op resolver turn it into a
    ``ProgramLoadError``); not a ``ValueError``, so the loaders' ``ValueError`` handlers never swallow it.
    """

    def __init__(self, target: str, reason: str, *, well_formed: bool = False) -> None:
        super().__init__(f"{target[:120]!r} ({reason})")
        self.target = target
        self.reason = reason
        #: True for a plausible name numdiff merely does not support (an unlisted higher-order op).
        self.well_formed = well_formed


@dataclass(frozen=True, slots=True)
class OpRef:
    """What an allowed operator name refers to.

    Attributes:
        kind: ``"overload"`` (registered torch operator), ``"higher_order"``, ``"builtin"``,
            ``"edge"`` (an ExecuTorch Edge/backend name, mapped by :mod:`numdiff.program._edge_ops`),
            ``"delegate"`` or ``"unrunnable"`` (well formed, never resolved).
        serialized: The name as written in the file.
        op: The callable for ``overload``/``higher_order``/``builtin``, else ``None``.
        parts: ``(namespace, op, overload)`` for ``overload``, ``edge`` and torch-ops ``unrunnable``.
    """

    kind: str
    serialized: str
    op: Any = None
    parts: tuple[str, str, str] | None = None


def is_plain_identifier(name: object) -> TypeGuard[str]:
    """A Python identifier that is no keyword and no dunder name (``__x``)."""
    return (
        isinstance(name, str)
        and _IDENTIFIER.match(name) is not None
        and not name.startswith("__")
        and not keyword.iskeyword(name)
    )


def is_safe_value_name(name: object) -> bool:
    """Whether ``name`` may name a value in generated graph code as it is (else numdiff renames it)."""
    return is_plain_identifier(name) and name not in _RESERVED and len(str(name)) <= MAX_TARGET_LENGTH


def _check_dotted(target: str) -> list[str]:
    if len(target) > MAX_TARGET_LENGTH:
        raise ForbiddenOperator(target, f"name longer than {MAX_TARGET_LENGTH} characters")
    if _DOTTED.match(target) is None:
        raise ForbiddenOperator(target, "not a dotted operator name")
    parts = target.split(".")
    for part in parts:
        if not is_plain_identifier(part):
            raise ForbiddenOperator(target, f"part {part[:40]!r} is not a plain identifier")
    return parts


_FOUND: dict[tuple[str, str, str], torch._ops.OpOverload] = {}


def registered_overload(namespace: str, name: str, overload: str) -> torch._ops.OpOverload | None:
    """The ``OpOverload`` for ``namespace::name.overload`` if torch has it registered, else ``None``.

    The names are checked as identifiers and looked up in torch's operator-schema registry first;
    only a registered schema leads to fetching the overload object.
    """
    key = (namespace, name, overload)
    if key in _FOUND:
        return _FOUND[key]
    if namespace == "quantized_decomposed":
        _register_quantized_decomposed()
    if (
        _NAMESPACE.match(namespace) is None
        or namespace in _OPS_ATTRIBUTES
        or not is_plain_identifier(name)
        or not is_plain_identifier(overload)
    ):
        return None
    wanted = "" if overload == "default" else overload
    schemas = torch._C._jit_get_schemas_for_operator(f"{namespace}::{name}")
    schema = next((s for s in schemas if s.overload_name == wanted), None)
    if schema is None:
        return None
    # Registered: torch's own resolver fetches the operator by the registry's qualified name (the
    # schema's, not the file's text), so nothing but that registered operator can be reached.
    if schema.name != f"{namespace}::{name}":
        return None
    from torch._library.utils import lookup_op

    try:
        found = lookup_op(f"{schema.name}.{schema.overload_name or 'default'}")
    except (AttributeError, RuntimeError):
        return None
    if not isinstance(found, torch._ops.OpOverload):
        return None
    _FOUND[key] = found
    return found


def _register_quantized_decomposed() -> None:
    """Import torch's ``quantized_decomposed`` operators (``quantize_per_tensor``...), once.

    ``torch.ao.quantization.fx._decomposed`` registers them; importing it loads the whole FX
    quantization package (~20 ms), so it happens only for a program that names one of them.
    """
    if "torch.ao.quantization.fx._decomposed" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import torch.ao.quantization.fx._decomposed  # noqa: F401
        except ImportError:  # pragma: no cover - torch builds without torch.ao
            pass


def edge_parts(target: str) -> tuple[str, str, str] | None:
    """``(namespace, op, overload)`` of an Edge/backend dialect name, or ``None`` for other names."""
    for prefix in (EDGE_PREFIX, BACKEND_PREFIX):
        if target.startswith(prefix):
            parts = target[len(prefix):].split(".")
            if len(parts) != 3 or _NAMESPACE.match(parts[0]) is None:
                raise ForbiddenOperator(target, "an Edge operator name is executorch...ops.<namespace>.<op>.<overload>")
            return parts[0], parts[1], parts[2]
    return None


def classify_target(target: object) -> OpRef:
    """Decide what a serialized operator name refers to, or raise :class:`ForbiddenOperator`.

    Example:
        >>> classify_target("torch.ops.aten.relu.default").kind
        'overload'
        >>> classify_target("torch.ops.load_library")
        Traceback (most recent call last):
        ...
        numdiff.program._allowlist.ForbiddenOperator: 'torch.ops.load_library' (torch.ops.<namespace>.<op>.<overload> expected)
    """
    if not isinstance(target, str):
        raise ForbiddenOperator(repr(target), "operator name is not a string")
    parts = _check_dotted(target)
    edge = edge_parts(target)
    if edge is not None:
        return OpRef("edge", target, parts=edge)
    if target.startswith(TORCH_OPS_PREFIX):
        rest = parts[2:]
        if len(rest) == 2 and rest[0] == "higher_order":
            if rest[1] == DELEGATE_HOP:
                return OpRef("delegate", target)
            if rest[1] not in HIGHER_ORDER_OPS:
                raise ForbiddenOperator(
                    target, f"higher-order operator not in {sorted(HIGHER_ORDER_OPS)}", well_formed=True
                )
            hop = torch._ops._higher_order_ops.get(rest[1])
            if hop is None:
                raise ForbiddenOperator(target, "higher-order operator not registered in this process", well_formed=True)
            return OpRef("higher_order", target, op=hop)
        if len(rest) != 3:
            raise ForbiddenOperator(target, "torch.ops.<namespace>.<op>.<overload> expected")
        namespace, name, overload = rest
        if _NAMESPACE.match(namespace) is None or namespace in _OPS_ATTRIBUTES:
            raise ForbiddenOperator(target, f"{namespace!r} is not an operator namespace")
        op = registered_overload(namespace, name, overload)
        return OpRef("overload" if op is not None else "unrunnable", target, op=op, parts=(namespace, name, overload))
    table = {"_operator": OPERATOR_BUILTINS, "math": _MATH_BUILTINS, "torch": _TORCH_SYM_BUILTINS}.get(parts[0])
    if table is not None:
        if len(parts) != 2 or parts[1] not in table:
            raise ForbiddenOperator(target, f"not one of the allowed {parts[0]} functions {sorted(table)}")
        return OpRef("builtin", target, op=table[parts[1]])
    if parts[0] in _UNRUNNABLE_ROOTS:
        return OpRef("unrunnable", target)
    raise ForbiddenOperator(target, "not a torch operator, an allowed builtin or an ExecuTorch name")
