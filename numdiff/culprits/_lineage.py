"""Where a paired node's inputs come from: its :class:`Lineage`, found by walking back through the
nodes the runtime did not log (the rest of its debug-handle group, or the whole delegate)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

__all__ = ["Lineage", "lineage"]


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a paired node's inputs come from, found by walking back through unlogged nodes.

    Attributes:
        producers: Paired nodes it consumes, as ``(node name, element index or None)``.
        graph_inputs: Graph inputs (placeholders) it consumes, directly or through unlogged nodes.
        replayed: Unlogged call nodes replayed with it (the rest of its group or delegate).
    """

    producers: tuple[tuple[str, int | None], ...] = ()
    graph_inputs: tuple[str, ...] = ()
    replayed: tuple[str, ...] = field(default=())


def lineage(graph: torch.fx.Graph, paired: set[str], shared: Mapping[str, str] | None = None) -> dict[str, Lineage]:
    """The :class:`Lineage` of every paired node of ``graph`` (a node of ``shared`` counts as the
    paired node whose value it shares, see :func:`~numdiff.culprits._same_values.same_values`)."""
    shared = shared or {}
    out: dict[str, Lineage] = {}
    for node in graph.nodes:
        if node.name not in paired:
            continue
        producers: list[tuple[str, int | None]] = []
        inputs: list[str] = []
        replayed: list[str] = []
        seen: set[str] = set()
        stack: list[tuple[torch.fx.Node, int | None]] = [(a, None) for a in node.all_input_nodes]
        while stack:
            arg, element = stack.pop()
            key = f"{arg.name}/{element}"
            if key in seen:
                continue
            seen.add(key)
            if arg.name in paired:
                producers.append((arg.name, element))
            elif arg.name in shared:
                producers.append((shared[arg.name], element))
            elif arg.op == "placeholder":
                inputs.append(arg.name)
            elif arg.op == "call_function":
                if "getitem" in str(getattr(arg.target, "__name__", arg.target)) and len(arg.args) == 2 \
                        and isinstance(arg.args[0], torch.fx.Node) and isinstance(arg.args[1], int):
                    stack.append((arg.args[0], arg.args[1]))
                    continue
                replayed.append(arg.name)
                stack.extend((a, None) for a in arg.all_input_nodes)
        out[node.name] = Lineage(tuple(dict.fromkeys(producers)), tuple(dict.fromkeys(inputs)),
                                 tuple(dict.fromkeys(replayed)))
    return out
