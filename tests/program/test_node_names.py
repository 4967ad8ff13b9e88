"""Names of unnamed nodes (ExecuTorch 0.7's schema 5.3, torch 2.9's .pt2) are torch's deserializer's names."""

from __future__ import annotations

import json
import zipfile
from typing import Any

import torch

from numdiff.program.node_names import derive_node_names
from tests.conftest import FIXTURES


def test_the_0_7_edge_program_gets_the_names_0_7s_inspector_shows() -> None:
    """Golden: ExecuTorch 0.7.0's Inspector (torch 2.8's deserializer) named these nodes in its gap rows."""
    folder = FIXTURES / "releases" / "0.7.0"
    with zipfile.ZipFile(folder / "etrecord.bin") as record:
        program = json.loads(record.read("edge_dialect_exported_program"))
    nodes = program["graph_module"]["graph"]["nodes"]
    assert all("name" not in node for node in nodes)
    assert derive_node_names(program) == len(nodes)
    shown = [ops[0] for ops in json.loads((folder / "expected.json").read_text())["inspector"]["gap"]["MSE"]["aot_ops"]]
    assert [node["name"] for node in nodes] == shown


def _node(target: str, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"target": target, "inputs": [], "outputs": outputs, "metadata": {}}


def test_multi_output_and_repeated_ops_are_named_as_torch_fx_names_them() -> None:
    """Nodes that return no single tensor take torch.fx.Graph's name for their target, numbered when taken."""
    ops = [
        ("torch.ops.aten.max_pool2d_with_indices.default", torch.ops.aten.max_pool2d_with_indices.default, ["getitem", "getitem_1"]),
        ("torch.ops.aten.max_pool2d_with_indices.default", torch.ops.aten.max_pool2d_with_indices.default, ["getitem_2", "getitem_3"]),
        ("torch.ops.aten.split.Tensor", torch.ops.aten.split.Tensor, ["getitem_4"]),
        ("torch.ops.higher_order.executorch_call_delegate", None, ["getitem_5", "getitem_6"]),
    ]
    nodes = []
    graph = torch.fx.Graph()
    graph.placeholder("x")
    for serialized, target, outputs in ops:
        if target is None:  # a higher-order op: FX names it after its __name__
            target = type("Op", (), {"__name__": "executorch_call_delegate", "__call__": lambda self: None})()
        as_tensors = [{"name": name} for name in outputs]
        nodes.append(_node(serialized, [{"as_tensors": as_tensors}] if "split" in serialized else
                           [{"as_tensor": t} for t in as_tensors]))
        node = graph.create_node("call_function", target, (), {})
        for name in outputs:
            graph.create_node("call_function", getattr, (node, "x"), {}, name=name)
    expected = [n.name for n in graph.nodes if n.op == "call_function" and n.target is not getattr]
    program = {"graph_module": {"graph": {"inputs": [{"as_tensor": {"name": "x"}}], "nodes": nodes}}}
    assert derive_node_names(program) == 4
    assert [node["name"] for node in nodes] == expected
    assert expected[:2] == ["max_pool2d_with_indices_default", "max_pool2d_with_indices_default_1"]


def test_single_tensor_nodes_take_their_outputs_name_and_named_programs_are_left_alone() -> None:
    nodes = [_node("executorch.exir.dialects.edge.ops.aten.relu.default", [{"as_tensor": {"name": "aten_relu_default"}}])]
    program = {"graph_module": {"graph": {"inputs": [], "nodes": nodes}}}
    assert derive_node_names(program) == 1 and nodes[0]["name"] == "aten_relu_default"
    assert derive_node_names(program) == 0
