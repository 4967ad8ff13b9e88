"""Small ATen/Edge program pairs with ExecuTorch-style debug handles, built with torch alone.

``run_decompositions()`` gives an "Edge-like" program whose nodes carry ``from_node`` back to the
ATen program; :func:`assign_debug_handles` numbers its nodes the way ExecuTorch's
``DebugHandleGeneratorPass`` does (one handle per greatest ancestor, from 1, breadth first through
control-flow subgraphs, placeholders and output excluded).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from numdiff.capture.handles import ancestor_node_ids
from numdiff.capture.nodes import iter_nodes_with_control_flow


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(4, 8)
        self.l2 = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.l2(torch.relu(self.l1(x))), dim=-1)


class MultiOutput(torch.nn.Module):
    """Ops with several outputs (max with indices, topk, max_pool2d) and two inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values, _ = torch.max(x, dim=-1)
        top, idx = torch.topk(x, 2)
        pooled = torch.nn.functional.max_pool2d(self.conv(y), 2)
        return values + 1, top * idx, pooled


def assign_debug_handles(program: ExportedProgram) -> None:
    """Give every node (not placeholders/output) the handle of its greatest ancestor."""
    by_origin: dict[tuple[str, str], int] = {}
    for node in iter_nodes_with_control_flow(program.graph_module):
        if node.op in ("placeholder", "output"):
            continue
        origin = ancestor_node_ids(node)[-1]
        node.meta["debug_handle"] = by_origin.setdefault(origin, len(by_origin) + 1)


@dataclass
class Pair:
    """An ETRecord-like object: ATen program, its graph id, Edge program, graph_map, inputs."""

    exported_program: ExportedProgram | None
    export_graph_id: int | None
    edge_dialect_program: Any
    graph_map: dict[str, ExportedProgram] | None
    _representative_inputs: list[Any]


def make_pair(model: torch.nn.Module, inputs: tuple[Any, ...]) -> Pair:
    """Export ``model``, decompose it into an Edge-like program and give that debug handles."""
    aten = torch.export.export(model.eval(), inputs)
    edge = aten.run_decompositions()
    assign_debug_handles(edge)
    return Pair(aten, id(aten.graph), edge, {}, [inputs])


# Exporting takes most of a test's time: build each pair once and hand out deep copies (which keep
# node names, from_node graph ids and export_graph_id, so back-propagation works on them unchanged).
@functools.cache
def _mlp_pair() -> Pair:
    torch.manual_seed(0)
    return make_pair(MLP(), (torch.randn(2, 4),))


@functools.cache
def _multi_output_pair() -> Pair:
    torch.manual_seed(0)
    return make_pair(MultiOutput(), (torch.randn(3, 5), torch.randn(1, 1, 6, 6)))


def mlp_pair() -> Pair:
    """A fresh (mutable) copy of the MLP pair."""
    return copy.deepcopy(_mlp_pair())


def multi_output_pair() -> Pair:
    """A fresh (mutable) copy of the multi-output pair."""
    return copy.deepcopy(_multi_output_pair())


def handles_by_name(program: ExportedProgram) -> dict[str, Any]:
    return {n.name: n.meta.get("debug_handle") for n in iter_nodes_with_control_flow(program.graph_module)}
