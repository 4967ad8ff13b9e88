"""A known device deviation behind a culprit, verified by replaying the graph as the device computes it.

XNNPACK (ExecuTorch 1.5.1) computes ``aten.gelu(x, approximate="tanh")`` as the exact (erf) GELU. A
model using the tanh approximation (GPT-2, T5, Gemma) gets a culprit at each XNNPACK delegate holding
one, some 70-95 dB from its replay, and the user is left to find why. The culprit is right (the
device does not compute the model as written) and stays one; :func:`explain_deviations` replays the
graph once more with those GELUs exact and, when such a row then agrees with the runtime within
noise, says so in its note. The extra replay runs only when some culprit row is such a delegate.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from numdiff.culprits._delegates import XNNPACK
from numdiff.culprits._noise import Verdict, op_type
from numdiff.culprits.report import DEVICE_DEVIATION, CulpritRow

__all__ = ["exact_gelus", "explain_deviations", "tanh_gelus"]


def _approximate(node: torch.fx.Node) -> object:
    """The literal ``approximate`` argument of a ``gelu`` node (``"none"`` when left out)."""
    return node.args[1] if len(node.args) > 1 else node.kwargs.get("approximate", "none")


def tanh_gelus(graph: torch.fx.Graph, rows: Sequence[CulpritRow]) -> dict[int, tuple[str, ...]]:
    """``{position in rows: names of its tanh GELUs}`` for the culprit rows that are XNNPACK delegate
    calls replaying a ``gelu`` whose ``approximate`` is the literal ``"tanh"``."""
    culprits = [(position, row) for position, row in enumerate(rows)
                if row.is_culprit and (row.delegate or "").startswith(f"{XNNPACK} #")]
    nodes = {n.name: n for n in graph.nodes if n.op == "call_function" and op_type(n.target) == "gelu"} \
        if culprits else {}
    out: dict[int, tuple[str, ...]] = {}
    for position, row in culprits:
        names = tuple(name for name in (*row.replayed_ops, row.node)
                      if name in nodes and _approximate(nodes[name]) == "tanh")
        if names:
            out[position] = names
    return out


def exact_gelus(module: torch.fx.GraphModule, names: Sequence[str]) -> torch.fx.GraphModule:
    """A copy of ``module`` (its graph copied, its weights shared) whose GELUs ``names`` are exact."""
    graph = copy.deepcopy(module.graph)
    for node in graph.nodes:
        if node.name in names:
            if len(node.args) > 1:
                node.args = (node.args[0], "none", *node.args[2:])
            else:
                node.kwargs = {**node.kwargs, "approximate": "none"}
    return torch.fx.GraphModule(module, graph, type(module).__name__)


def explain_deviations(rows: list[CulpritRow], module: torch.fx.GraphModule,
                       replay: Callable[[torch.fx.GraphModule], Sequence[CulpritRow]]) -> list[CulpritRow]:
    """``rows`` with a sentence added to the note of each culprit XNNPACK row holding a tanh GELU that
    agrees with the runtime (``ok`` or ``expected-noise``) once ``replay`` (the same replay and scoring,
    on another graph module; its rows in the same order) runs ``module`` with those GELUs exact.
    Verdicts, culprits and every other row are left as they are."""
    found = tanh_gelus(module.graph, rows)
    if not found:
        return rows
    alternative = replay(exact_gelus(module, sorted({n for names in found.values() for n in names})))
    out = list(rows)
    for position, names in found.items():
        row = rows[position]
        alt = alternative[position] if position < len(alternative) else None
        if alt is None or (alt.node, alt.element) != (row.node, row.element) \
                or alt.verdict not in (Verdict.OK, Verdict.EXPECTED_NOISE):
            continue
        said = (f"{DEVICE_DEVIATION}XNNPACK computes gelu(approximate='tanh') as the exact GELU (replayed with "
                f"approximate='none' at node{'s' if len(names) > 1 else ''} {', '.join(names)}, the runtime matches "
                f"it at local {alt.local_gap:.4g}, {alt.local_noise_units:.2g} noise units, {alt.verdict.value})")
        out[position] = replace(row, note=f"{row.note}; {said}" if row.note else said)
    return out
