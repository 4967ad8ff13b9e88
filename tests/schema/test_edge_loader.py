"""numdiff's own program builder: Edge programs load as the reference returns them, fast and safely.

The out-variant fixture (``tests/fixtures/edge_out_variant``) and its expected answers were
written by ``scripts/make_edge_out_variant_fixture.py`` with ExecuTorch 1.5.1 (oracle venv).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from numdiff.errors import ETRecordError
from numdiff.program._edge_target import EdgeTarget, edge_target
from numdiff.program.loader import load_program
from numdiff.program.graph_meta import ProgramLoadError
from numdiff.schema.etrecord import op_type_name, parse_etrecord

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OUT_VARIANT = FIXTURES / "edge_out_variant"
EDGE = "edge_dialect_exported_program/forward"


def _entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _load(entries: dict[str, bytes], program: dict[str, Any] | None = None) -> torch.export.ExportedProgram:
    return load_program(
        program if program is not None else json.loads(entries[EDGE]),
        entries[EDGE + "_state_dict"], entries[EDGE + "_constants"], entries[EDGE + "_example_inputs"],
    )


# ----------------------------------------------------------------------------- out variants


def test_out_variant_program_loads_as_the_reference_returns_it() -> None:
    expected = json.loads((OUT_VARIANT / "edge_loader_expected.json").read_text())
    ep = parse_etrecord(OUT_VARIANT / "etrecord_after_to_executorch.bin").edge_dialect_program
    assert isinstance(ep, torch.export.ExportedProgram)
    got = [
        {
            "name": n.name,
            "op": n.op,
            "target_name": getattr(n.target, "__name__", None) if n.op == "call_function" else None,
            "n_args": len(n.args),
            "kwargs": sorted(n.kwargs),
            "debug_handle": n.meta.get("debug_handle"),
            "stack_trace": n.meta.get("stack_trace"),
        }
        for n in ep.graph.nodes
    ]
    assert got == expected["nodes"]
    out = ep.module()(torch.tensor(expected["input"]))
    leaves = pytree.tree_leaves(out)
    assert len(leaves) == len(expected["output"])
    for leaf, want in zip(leaves, expected["output"], strict=True):
        torch.testing.assert_close(leaf, torch.tensor(want))


def test_alloc_nodes_show_the_reference_op_type() -> None:
    ep = parse_etrecord(OUT_VARIANT / "etrecord_after_to_executorch.bin").edge_dialect_program
    assert isinstance(ep, torch.export.ExportedProgram)
    types = [op_type_name(n) for n in ep.graph.nodes if n.op == "call_function"]
    assert types.count("alloc") == 6 and "sin.out" in types


@pytest.mark.parametrize("spec, match", [
    ("(3, 4)", r"memory.alloc argument '\(3, 4\)' is not"),
    ("(3, 4);999", r"is not '\(<sizes>\);<dtype>'"),
    ("__import__('os');7", r"is not '\(<sizes>\);<dtype>'"),
    ("(100000, 100000, 100000);7", r"asks for 1000000000000000 elements"),
])
def test_bad_alloc_argument_is_a_named_error(spec: str, match: str) -> None:
    entries = _entries(OUT_VARIANT / "etrecord_after_to_executorch.bin")
    program = json.loads(entries[EDGE])
    alloc = next(n for n in program["graph_module"]["graph"]["nodes"] if n["target"] == "memory.alloc")
    alloc["inputs"][0]["arg"]["as_string"] = spec
    with pytest.raises(ProgramLoadError, match=match):
        _load(entries, program)


def test_reference_to_a_missing_value_is_a_named_error(tmp_path: Path) -> None:
    entries = _entries(OUT_VARIANT / "etrecord_after_to_executorch.bin")
    program = json.loads(entries[EDGE])
    node = next(n for n in program["graph_module"]["graph"]["nodes"] if n["target"].endswith("sin.out"))
    node["inputs"][0]["arg"]["as_tensor"]["name"] = "nowhere"
    entries[EDGE] = json.dumps(program).encode()
    path = tmp_path / "etrecord.bin"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    with pytest.raises(ETRecordError, match=r"refers to the value 'nowhere', which no earlier node produces"):
        parse_etrecord(path).edge_dialect_program  # noqa: B018


# ----------------------------------------------------------------------------- torch.cond


def test_cond_edge_program_loads_with_nested_edge_subgraphs() -> None:
    record = parse_etrecord(FIXTURES / "realistic" / "real_cond" / "etrecord.bin")
    ep = record.edge_dialect_program
    assert isinstance(ep, torch.export.ExportedProgram)
    cond = next(n for n in ep.graph.nodes if n.op == "call_function" and op_type_name(n) == "cond")
    assert cond.target is torch.ops.higher_order.cond
    branches = [getattr(ep.graph_module, str(a.target)) for a in cond.args[1:3]]
    assert all(isinstance(b, torch.fx.GraphModule) for b in branches)
    inner = [n for b in branches for n in b.graph.nodes if n.op == "call_function"]
    assert inner and all(isinstance(n.target, EdgeTarget) for n in inner)
    assert {n.meta["numdiff_op_type"] for n in inner} >= {"aten.addmm.default", "aten.tanh.default"}
    inputs = record._representative_inputs[0]  # type: ignore[index]
    with torch.no_grad():
        got = pytree.tree_leaves(ep.module()(*inputs))
        want = pytree.tree_leaves(record.exported_program.module()(*inputs))  # type: ignore[union-attr]
    torch.testing.assert_close(got, want)


def test_subgraph_with_a_crafted_name_is_refused() -> None:
    entries = _entries(FIXTURES / "realistic" / "real_cond" / "etrecord.bin")
    program = json.loads(entries[EDGE])
    cond = next(n for n in program["graph_module"]["graph"]["nodes"] if n["target"].endswith("cond"))
    graph_arg = next(a for a in cond["inputs"] if "as_graph" in a["arg"])
    graph_arg["arg"]["as_graph"]["name"] = "__class__"
    with pytest.raises(ProgramLoadError, match=r"subgraph name '__class__' is not a fresh plain identifier"):
        _load(entries, program)


# ----------------------------------------------------------------------------- Edge targets


class _FakeEdgeOp:
    """Exposes what ExecuTorch's Edge op objects expose: ``__name__`` and the wrapped ``_op``."""

    def __init__(self, name: str, op: Any) -> None:
        self.__name__ = name
        self._op = op


def test_edge_targets_equal_objects_with_the_same_edge_name() -> None:
    ep = parse_etrecord(FIXTURES / "mlp_fp32" / "etrecord.bin").edge_dialect_program
    assert isinstance(ep, torch.export.ExportedProgram)
    node = next(n for n in ep.graph.nodes if n.op == "call_function" and isinstance(n.target, EdgeTarget))
    name = node.target.__name__
    op = node.target._op
    fake = _FakeEdgeOp(name, op)
    assert node.target == fake and fake == node.target and not (node.target != fake)
    assert node.target != _FakeEdgeOp(name + "x", op)
    assert node.target != op  # the reference's Edge op is not equal to the plain torch op either
    assert node.target == edge_target(op, name) and hash(node.target) == hash(edge_target(op, name))
    assert node.target.name() == op.name() and node.target._schema is op._schema
    assert {node.target: 1}[edge_target(op, name)] == 1


def test_edge_target_runs_the_torch_op_and_names_like_the_reference() -> None:
    t = edge_target(torch.ops.aten.sin.default, "aten.sin.default")
    assert t.__name__ == "aten.sin.default" and str(t) == "aten.sin.default"
    assert t.name() == torch.ops.aten.sin.default.name() and t.namespace == "aten"
    torch.testing.assert_close(t(torch.ones(2)), torch.sin(torch.ones(2)))


# ----------------------------------------------------------------------------- no slow imports


_CHILD = """
import sys, glob
import torch
from numdiff.schema.etrecord import parse_etrecord
paths = sorted(glob.glob(sys.argv[1] + '/**/etrecord*.bin', recursive=True))
count = 0
for path in paths:
    record = parse_etrecord(path)
    edge = record.edge_dialect_program
    programs = [record.exported_program, *(edge.values() if isinstance(edge, dict) else [edge]),
                *(record.graph_map or {}).values()]
    count += sum(p is not None for p in programs)
print(count, len(paths), 'torch._dynamo' in sys.modules, 'torch._export.serde.serialize' in sys.modules)
"""


def test_loading_every_fixture_program_imports_neither_dynamo_nor_torch_serde() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(FIXTURES)], capture_output=True, text=True, timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    count, files, dynamo, serde = result.stdout.split()
    edge_only = 1  # tests/fixtures/releases/0.7.0: ExecuTorch 0.7 wrote the Edge program alone
    assert int(files) >= 30 and int(count) >= 2 * int(files) - edge_only
    assert (dynamo, serde) == ("False", "False"), result.stderr[-2000:]
    assert "torch's export deserializer" not in result.stderr  # no fallback was needed
