"""Names for the graph nodes of programs serialized before nodes carried their own name.

ExecuTorch 0.7 (its export schema 5.3) and torch 2.9 (``torch.export.save``, schema 8.14) write op
nodes without a ``name`` field; their deserializer names each node while rebuilding the graph.
:func:`derive_node_names` gives the same names from the JSON alone, by the same rule, so every
later reader (checks, profiling view, builder, gap rows) sees the names the release's own Inspector
shows:

* a node whose op returns exactly one tensor is named after that output (``outputs[0].as_tensor``);
* any other node gets the name ``torch.fx.Graph`` makes from its target (the op's ``__name__``,
  snake-cased, characters illegal in an identifier replaced by ``_``), numbered ``_1``, ``_2``, ...
  when already taken, exactly as ``torch.fx.graph._Namespace.create_name`` does;
* names are taken in graph order: the graph's inputs first, then each node and the ``getitem``
  outputs the deserializer adds after it.

No torch is needed.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections import defaultdict
from typing import Any

__all__ = ["derive_node_names"]

_ILLEGAL = re.compile("[^0-9a-zA-Z_]+")
_SUFFIX = re.compile(r"(.*)_(\d+)$")
_CAMEL = re.compile(r"(?<=[a-z])([A-Z])")
#: Target prefixes whose op's ``__name__`` is the rest of the target string.
_NAMESPACED = ("executorch.exir.dialects.edge.ops.", "executorch.exir.dialects.backend.ops.")


class _Namespace:
    """``torch.fx.graph._Namespace.create_name`` for names only (no objects)."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.base_count: dict[str, int] = defaultdict(int)

    def create(self, candidate: str) -> str:
        candidate = _ILLEGAL.sub("_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        match = _SUFFIX.match(candidate)
        base, num = (candidate, None) if match is None else (match.group(1), int(match.group(2)))
        candidate = base if num is None else f"{base}_{num}"
        if not num:
            num = self.base_count[base]
        while candidate in self.used or keyword.iskeyword(candidate) or candidate in vars(builtins):
            num += 1
            candidate = f"{base}_{num}"
        self.used.add(candidate)
        self.base_count[base] = num
        return candidate


def _op_name(target: str) -> str:
    """The ``__name__`` of the op a serialized target string names."""
    for prefix in _NAMESPACED:
        if target.startswith(prefix):
            return target[len(prefix):]  # EdgeOpOverload.__name__: "aten.addmm.default"
    if target.startswith("torch.ops.higher_order."):
        return target.rsplit(".", 1)[-1]
    if target.startswith("torch.ops."):
        parts = target.split(".")
        return ".".join(parts[3:]) if len(parts) > 3 else parts[-1]  # OpOverload.__name__: "addmm.default"
    return target.rsplit(".", 1)[-1]


def _single_tensor(node: dict[str, Any]) -> str | None:
    outputs = node.get("outputs")
    if isinstance(outputs, list) and len(outputs) == 1 and isinstance(outputs[0], dict):
        tensor = outputs[0].get("as_tensor")
        if isinstance(tensor, dict) and isinstance(tensor.get("name"), str):
            return str(tensor["name"])
    return None


def _output_names(node: dict[str, Any]) -> list[str]:
    """The names of the ``getitem`` nodes the deserializer adds after a multi-output node."""
    names = []
    for output in node.get("outputs") or []:
        if not isinstance(output, dict):
            continue
        for value in output.values():
            items = value if isinstance(value, list) else [value]
            names += [item["name"] for item in items if isinstance(item, dict) and isinstance(item.get("name"), str)]
    return names


def _input_names(graph: dict[str, Any]) -> list[str]:
    names = []
    for item in graph.get("inputs") or []:
        if isinstance(item, dict):
            for value in item.values():
                if isinstance(value, dict) and isinstance(value.get("name"), str):
                    names.append(value["name"])
                elif isinstance(value, str):
                    names.append(value)
    return names


def derive_node_names(program: dict[str, Any]) -> int:
    """Give every unnamed node of the top-level graph its deserializer name, in place; return how many.

    Programs whose nodes all have names are left alone (0). A node that is not an object, or a
    graph that is not where ExecuTorch writes it, is left for the checks to report.
    """
    module = program.get("graph_module")
    graph = module.get("graph") if isinstance(module, dict) else None
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or not any(isinstance(n, dict) and "name" not in n for n in nodes):
        return 0
    assert isinstance(graph, dict)
    namespace = _Namespace()
    for name in _input_names(graph):
        namespace.create(name)
    named = 0
    for node in nodes:
        if not isinstance(node, dict):
            return named
        if "name" in node:
            namespace.create(str(node["name"]))
        else:
            target = node.get("target")
            single = _single_tensor(node)
            candidate = single if single is not None else _CAMEL.sub(r"_\1", _op_name(str(target))).lower()
            node["name"] = namespace.create(candidate)
            named += 1
        if _single_tensor(node) is None:
            for output in _output_names(node):
                namespace.create(output)
    return named
