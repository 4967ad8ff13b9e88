"""Write an ETRecord whose Edge program has out-variant ops (generated after ``to_executorch``).

Dev script for the oracle virtualenv (ExecuTorch 1.5.1), never run by tests::

    /root/.cache/numdiff-oracle/bin/python scripts/make_edge_out_variant_fixture.py

Writes ``tests/fixtures/edge_out_variant/etrecord_after_to_executorch.bin`` and ``edge_loader_expected.json``: what the
reference's ``parse_etrecord`` returns for the Edge program (node names, ops, targets' names,
argument layout, debug handles) and its output on a fixed input, plus whether a target equals
ExecuTorch's Edge op object. ``tests/schema/test_edge_loader.py`` compares numdiff with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from executorch.devtools import generate_etrecord
from executorch.devtools.etrecord import parse_etrecord
from executorch.exir import to_edge
from executorch.exir.dialects._ops import ops as exir_ops

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "edge_out_variant"


class SinCosSplit(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.split(torch.sin(x) + torch.cos(x), 2, dim=1)
        return torch.relu(a) * b


def _describe(ep: torch.export.ExportedProgram) -> list[dict[str, object]]:
    nodes = []
    for n in ep.graph.nodes:
        nodes.append({
            "name": n.name,
            "op": n.op,
            "target_name": getattr(n.target, "__name__", None) if n.op == "call_function" else None,
            "n_args": len(n.args),
            "kwargs": sorted(n.kwargs),
            "debug_handle": n.meta.get("debug_handle"),
            "stack_trace": n.meta.get("stack_trace"),
        })
    return nodes


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = SinCosSplit().eval()
    x = torch.randn(3, 4)
    edge = to_edge(torch.export.export(model, (x,)))
    edge_ops = {n.name: n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    et = edge.to_executorch()
    path = OUT / "etrecord_after_to_executorch.bin"  # no representative inputs: not named etrecord.bin
    generate_etrecord(str(path), edge, et)  # after to_executorch: the Edge program holds out variants
    record = parse_etrecord(str(path))
    ep = record.edge_dialect_program
    inp = torch.linspace(-2, 2, 12).reshape(3, 4)
    out = ep.module()(inp)
    sin_node = next(n for n in ep.graph.nodes if getattr(n.target, "__name__", "") == "sin.out")
    expected = {
        "nodes": _describe(ep),
        "input": inp.tolist(),
        "output": [t.tolist() for t in (out if isinstance(out, (tuple, list)) else (out,))],
        "edge_op_names_before_to_executorch": sorted(getattr(t, "__name__", str(t)) for t in edge_ops.values()),
        "out_target_equals_edge_sin": bool(sin_node.target == exir_ops.edge.aten.sin.default),
        "dialect": ep.dialect,
    }
    (OUT / "edge_loader_expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print("wrote", path, path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
