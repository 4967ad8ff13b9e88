"""How the allow-listed calls that have no torch schema are called: builtins and higher-order operators.

Schema operators (``torch.ops.<ns>.<op>.<overload>``) have their arguments matched against their
schema when a node is built. Builtins (``_operator.add``, ``math.sqrt``, ``torch.sym_max``...) and the
higher-order operators numdiff runs (``cond``, ``map_impl``, ``while_loop``) have none, so a crafted
file could give one the arguments of another op: :func:`check_call` matches them against the builtin's
own signature, or the higher-order operator's parameters below, and checks that the parameters that
take a subgraph get one and the others do not, before the node reaches torch.fx.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence

import torch

from numdiff.program.graph_meta import ProgramLoadError

__all__ = ["CONTROL_FLOW_SUBGRAPH_ARGS", "HIGHER_ORDER_PARAMETERS", "SUBGRAPH_PARAMETERS", "check_call"]

#: The parameters of each higher-order operator numdiff builds, in order (torch 2.13's definitions).
HIGHER_ORDER_PARAMETERS: dict[str, tuple[str, ...]] = {
    "cond": ("pred", "true_fn", "false_fn", "operands"),
    "map_impl": ("f", "xs", "pos_args"),
    "while_loop": ("cond_fn", "body_fn", "carried_inputs", "additional_inputs"),
}
#: Parameters that take a subgraph (a graph module), and only those.
SUBGRAPH_PARAMETERS = frozenset({"true_fn", "false_fn", "f", "cond_fn", "body_fn"})

#: Where the reference-graph capture looks for subgraphs to walk into, by higher-order operator name
#: (``scan`` cannot be loaded from a file but may be in a program object the user passes).
CONTROL_FLOW_SUBGRAPH_ARGS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("cond", (1, 2)),
    ("map_impl", (0,)),
    ("scan", (0,)),
)


#: Each higher-order operator's parameters as a signature, built once.
_HIGHER_ORDER_SIGNATURES = {
    name: inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    for name, params in HIGHER_ORDER_PARAMETERS.items()
}


@functools.cache
def _builtin_signature(op: Callable[..., object]) -> inspect.Signature:
    """A builtin's signature, read once per builtin (``getitem`` follows every multi-output op)."""
    return inspect.signature(op)


def _is_subgraph(value: object) -> bool:
    return isinstance(value, torch.fx.Node) and value.op == "get_attr"


def _given(args: Sequence[object], kwargs: Mapping[str, object]) -> str:
    parts = [f"{len(args)} positional"] + ([f"keywords {', '.join(sorted(kwargs))[:120]}"] if kwargs else [])
    return " and ".join(parts)


def check_call(node: str, target: str, kind: str, op: Callable[..., object] | None,
               args: Sequence[object], kwargs: Mapping[str, object]) -> None:
    """Refuse a builtin or higher-order call whose arguments do not fit it.

    Args:
        node: The node's name (for the message).
        target: The target as the file names it.
        kind: ``"builtin"`` or ``"higher_order"``.
        op: The allow-listed callable (a builtin's signature is read from it).
        args, kwargs: The decoded arguments.

    Raises:
        ProgramLoadError: Too many or too few arguments, unknown keywords, a subgraph where a value
            belongs or a value where a subgraph belongs.
    """
    name = target.rsplit(".", 1)[-1]
    if kind == "builtin":
        if op is None:
            return
        signature = _builtin_signature(op)
    elif name in _HIGHER_ORDER_SIGNATURES:
        signature = _HIGHER_ORDER_SIGNATURES[name]
    else:  # numdiff's own placeholder for what it cannot deserialize: built by numdiff, never from a file's arguments
        return
    params = list(signature.parameters)
    where = f"node {node[:80]!r}: {target[:80]!r}"
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        raise ProgramLoadError(
            f"{where} takes {len(params)} argument{'' if len(params) == 1 else 's'} ({', '.join(params)}), "
            f"the node gives {_given(args, kwargs)}"
        ) from e
    for parameter, value in bound.arguments.items():
        values = value if isinstance(value, (tuple, list)) and parameter == "args" else (value,)
        for item in values:
            wants_graph = kind == "higher_order" and parameter in SUBGRAPH_PARAMETERS
            if wants_graph != _is_subgraph(item):
                what = "a subgraph" if wants_graph else "a value, not a subgraph"
                raise ProgramLoadError(f"{where}: argument {parameter!r} must be {what}")
