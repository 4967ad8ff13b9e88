"""Nodes of one debug handle that compute the same value share the runtime's value in the replay
(:func:`same_values`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from numdiff._core.types import DebugHandle

__all__ = ["same_values"]


def _cse_key(node: torch.fx.Node) -> object:
    """What ``node`` computes, hashable (its op and its arguments, nodes by name), or None when two such
    nodes need not compute the same (a random op, an impure one, an argument that is no plain literal)."""
    if node.op != "call_function" or node.is_impure():
        return None
    tags = getattr(node.target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return None

    def plain(a: object) -> object:
        if isinstance(a, torch.fx.Node):
            return ("node", a.name)
        if isinstance(a, (list, tuple)):
            return tuple(plain(x) for x in a)
        if a is None or isinstance(a, (bool, int, float, str, torch.dtype, torch.device, torch.layout,
                                       torch.memory_format)):
            return (type(a).__name__, repr(a))
        raise TypeError

    try:
        return (str(node.target), plain(node.args), tuple(sorted((k, plain(v)) for k, v in node.kwargs.items())))
    except TypeError:
        return None


def same_values(graph: torch.fx.Graph, keepers: Mapping[DebugHandle, str],
                handle_of: Callable[[torch.fx.Node], DebugHandle | None]) -> tuple[dict[DebugHandle, str], dict[str, str]]:
    """``(keepers, shared)``: each handle's node to pair, moved to the first node of its handle that
    computes the same, and the other such nodes, each with the node whose value it shares.

    PT2E writes one dequantize per consumer of a quantized value; all of them carry the quantize's
    debug handle, and the runtime's value is kept for the last one. A consumer of another one (a
    portable avg-pool reading a delegate's dequantized output) would replay that value from far
    upstream instead of reading what the runtime logged. Nodes that apply the same op to the same
    arguments compute the same value: they share the runtime's. The first one is paired, so the
    value is there for every later one.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: (torch.relu(x) + 1, torch.relu(x) * 2))
        >>> relu, _, relu_1, _ = [n for n in gm.graph.nodes if n.op == "call_function"]
        >>> same_values(gm.graph, {(3,): "relu_1"}, lambda n: (3,) if n.name.startswith("relu") else None)
        ({(3,): 'relu'}, {'relu_1': 'relu'})
    """
    wanted = set(keepers.values())
    if not wanted:
        return dict(keepers), {}
    first: dict[tuple[DebugHandle, object], str] = {}
    equal_to: dict[str, str] = {}
    for node in graph.nodes:
        handle = handle_of(node)
        key = None if handle is None else _cse_key(node)
        if handle is None or key is None:
            continue
        equal_to[node.name] = first.setdefault((handle, key), node.name)
    moved = {handle: equal_to.get(name, name) for handle, name in keepers.items()}
    kept = set(moved.values())
    shared = {name: to for name, to in equal_to.items() if to != name and to in kept}
    # a node another handle pairs keeps its own value (it has its own row)
    shared = {name: to for name, to in shared.items() if name not in kept}
    return moved, shared
