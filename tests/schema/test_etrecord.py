"""ETRecord reader: same answers as the reference's parse_etrecord, runnable programs, named errors.

Expected values come from ``tests/fixtures/<name>/etrecord_expected.json``, recorded with the
reference by ``scripts/record_etrecord_oracle.py`` (oracle virtualenv; never hand-edited).
"""

from __future__ import annotations

import base64
import io
import json
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from numdiff.errors import CaptureError, ETRecordError
from numdiff.schema.etrecord import ETRecord, op_type_name, parse_etrecord

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECORDED = sorted(p.parent.name for p in FIXTURES.glob("*/etrecord_expected.json") if (p.parent / "etrecord.bin").is_file())

needs_fixtures = pytest.mark.skipif(not RECORDED, reason="no tests/fixtures/*/etrecord.bin with etrecord_expected.json yet")


@lru_cache(maxsize=None)
def _parsed(name: str) -> ETRecord:
    return parse_etrecord(FIXTURES / name / "etrecord.bin")


@lru_cache(maxsize=None)
def _expected(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "etrecord_expected.json").read_text())  # type: ignore[no-any-return]


def _programs(rec: ETRecord, exp: dict[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    out = [(f"edge_dialect_program/{m}", rec.edge_programs[m], want) for m, want in exp["edge_dialect_program"].items()]
    if exp["exported_program"] is not None:
        out.append(("exported_program", rec.exported_program, exp["exported_program"]))
    out += [(f"graph_map/{k}", rec.graph_map[k], want) for k, want in exp["graph_map"].items()]
    return out


def _tensor(value: dict[str, Any]) -> torch.Tensor:
    dtype = getattr(torch, value["dtype"].removeprefix("torch."))
    values = value["values"]
    return torch.tensor(values, dtype=torch.float64).to(dtype) if dtype.is_floating_point else torch.tensor(values, dtype=dtype)


def _as_json(value: Any) -> Any:
    """Same JSON-able form the oracle script writes (tensors as dtype/shape/values)."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        values = t.to(torch.float64).tolist() if t.dtype.is_floating_point else t.tolist()
        return {"dtype": str(t.dtype), "shape": list(t.shape), "values": values}
    if isinstance(value, dict):
        return {str(k): _as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    return value


# --------------------------------------------------------------------------- real fixtures


@needs_fixtures
@pytest.mark.parametrize("name", RECORDED)
def test_maps_and_ids_equal_reference(name: str) -> None:
    rec, exp = _parsed(name), _expected(name)
    assert rec._debug_handle_map == exp["debug_handle_map"]
    assert rec._delegate_map == exp["delegate_map"]
    assert rec._instruction_id_to_num_outs_map == exp["instruction_id_to_num_outs_map"]
    assert rec.export_graph_id == exp["export_graph_id"]
    assert isinstance(rec.edge_dialect_program, dict) == exp["edge_is_dict"]
    assert sorted(rec.graph_map) == sorted(exp["graph_map"])
    assert rec.unknown_entries == ()


@needs_fixtures
@pytest.mark.parametrize("name", RECORDED)
def test_pickled_entries_equal_reference(name: str) -> None:
    rec, exp = _parsed(name), _expected(name)
    assert _as_json(rec._representative_inputs) == exp["representative_inputs"]
    assert _as_json(rec._reference_outputs) == exp["reference_outputs"]


@needs_fixtures
@pytest.mark.parametrize("name", RECORDED)
def test_nodes_match_reference(name: str) -> None:
    rec, exp = _parsed(name), _expected(name)
    for where, ep, want in _programs(rec, exp):
        nodes = list(ep.graph.nodes)
        assert [n.name for n in nodes] == [w["name"] for w in want["nodes"]], where
        for node, w in zip(nodes, want["nodes"], strict=True):
            stack = node.meta.get("nn_module_stack")
            from_node = node.meta.get("from_node")
            got = {
                "op": node.op,
                "op_type": op_type_name(node) if node.op == "call_function" else None,
                "debug_handle": node.meta.get("debug_handle"),
                "stack_trace": node.meta.get("stack_trace"),
                "nn_module_stack": None if stack is None else {k: list(v) for k, v in stack.items()},
                "from_node": None if from_node is None else [s.to_dict() for s in from_node],
            }
            assert got == {k: w[k] for k in got}, f"{where}: node {node.name}"
        assert sorted(ep.state_dict) == want["state_dict_keys"], where
        assert sorted(ep.constants) == want["constants_keys"], where


@needs_fixtures
@pytest.mark.parametrize("name", RECORDED)
def test_programs_run_like_reference(name: str) -> None:
    rec, exp = _parsed(name), _expected(name)
    for where, ep, _ in _programs(rec, exp):
        run = exp["runs"].get(where)
        if run is None or "values" not in run:
            continue
        args = [_tensor(v) for v in run["inputs"]]
        with torch.no_grad():
            leaves = pytree.tree_leaves(ep.module()(*args))
        assert len(leaves) == len(run["values"]), where
        for got, want in zip(leaves, run["values"], strict=True):
            torch.testing.assert_close(got.to(torch.float64), _tensor(want).to(torch.float64), rtol=1e-5, atol=1e-6)


@needs_fixtures
def test_parsing_defers_programs_and_pickles_until_read() -> None:
    """Speed is shown in benchmarks/; here: parsing checks the programs but builds none of them."""
    name = "mlp_fp32" if "mlp_fp32" in RECORDED else RECORDED[0]
    rec = parse_etrecord(FIXTURES / name / "etrecord.bin")
    assert {"exported_program", "edge_dialect_program", "_reference_outputs"} <= set(rec._loaders)
    assert rec.op_nodes() and rec.has("_reference_outputs")
    assert rec.exported_program is not None and "exported_program" not in rec._loaders


@needs_fixtures
def test_meta_carries_op_type_and_node_sources() -> None:
    rec = _parsed(RECORDED[0])
    edge = rec.edge_programs["forward"]
    calls = [n for n in edge.graph.nodes if n.op == "call_function"]
    assert all(isinstance(n.meta["numdiff_op_type"], str) for n in calls)
    assert all(isinstance(n.meta["debug_handle"], int) for n in calls)
    assert all(isinstance(s, torch.fx.traceback.NodeSource) for n in calls for s in n.meta.get("from_node", []))
    assert op_type_name(next(n for n in edge.graph.nodes if n.op == "placeholder")) == "placeholder"


# --------------------------------------------------------------------------- synthetic files


def _fixture_entries(name: str = "mlp_fp32") -> dict[str, bytes]:
    path = FIXTURES / name / "etrecord.bin"
    if not path.is_file():
        pytest.skip(f"fixture {name} has no etrecord.bin yet")
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zip(entries: dict[str, bytes], tmp_path: Path, name: str = "rec.bin") -> Path:
    out = tmp_path / name
    with zipfile.ZipFile(out, "w") as z:
        for k, v in entries.items():
            z.writestr(k, v)
    return out


def _edit_program(entries: dict[str, bytes], entry: str, edit: Any) -> None:
    program = json.loads(entries[entry])
    edit(program)
    entries[entry] = json.dumps(program).encode()


EDGE = "edge_dialect_exported_program/forward"


def test_not_a_zip(tmp_path: Path) -> None:
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"definitely not a zip file")
    with pytest.raises(ETRecordError, match=r"x\.bin.*not a readable zip archive"):
        parse_etrecord(bad)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ETRecordError, match="file not found"):
        parse_etrecord(tmp_path / "nope.bin")


def test_truncated_zip(tmp_path: Path) -> None:
    data = _zip(_fixture_entries(), tmp_path).read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ETRecordError, match=r"cut\.bin.*(not a readable zip|truncated)"):
        parse_etrecord(cut)


def test_missing_identifier(tmp_path: Path) -> None:
    entries = _fixture_entries()
    del entries["ETRECORD_V0"]
    with pytest.raises(ETRecordError, match=r"entry 'ETRECORD_V0' is missing: this zip is not an ETRecord"):
        parse_etrecord(_zip(entries, tmp_path))


def test_missing_companion_entry(tmp_path: Path) -> None:
    entries = _fixture_entries()
    del entries["exported_program_constants"]
    with pytest.raises(ETRecordError, match=r"entry 'exported_program_constants' is missing"):
        parse_etrecord(_zip(entries, tmp_path))


def test_corrupt_json_map(tmp_path: Path) -> None:
    entries = _fixture_entries()
    entries["debug_handle_map"] = b"{not json"
    with pytest.raises(ETRecordError, match=r"entry 'debug_handle_map' is not valid JSON"):
        parse_etrecord(_zip(entries, tmp_path))


def test_corrupt_program_json(tmp_path: Path) -> None:
    entries = _fixture_entries()
    entries[EDGE] = entries[EDGE][: len(entries[EDGE]) // 2]
    with pytest.raises(ETRecordError, match=r"entry 'edge_dialect_exported_program/forward': program is not valid JSON"):
        parse_etrecord(_zip(entries, tmp_path))


def test_unknown_schema_version(tmp_path: Path) -> None:
    entries = _fixture_entries()
    _edit_program(entries, EDGE, lambda p: p.update(schema_version={"major": 99, "minor": 1}))
    with pytest.raises(ETRecordError, match=r"unknown export schema version 99\.1"):
        parse_etrecord(_zip(entries, tmp_path))


def test_unknown_dialect(tmp_path: Path) -> None:
    entries = _fixture_entries()
    _edit_program(entries, EDGE, lambda p: p.update(verifiers=["MYSTERY"]))
    with pytest.raises(ETRecordError, match=r"unknown program dialect 'MYSTERY'"):
        parse_etrecord(_zip(entries, tmp_path))


class _Gadget:
    """A class weights-only unpickling must refuse (loading it would run code)."""


def test_pickle_needing_code_execution_is_refused(tmp_path: Path) -> None:
    entries = _fixture_entries()
    buf = io.BytesIO()
    torch.save([_Gadget()], buf)
    entries["representative_inputs"] = buf.getvalue()
    record = parse_etrecord(_zip(entries, tmp_path))  # pickles are unpickled on first use
    with pytest.raises(ETRecordError, match=r"entry 'representative_inputs' cannot be loaded with torch\.load\(weights_only=True\)"):
        record._representative_inputs


def test_unknown_entries_are_reported_not_loaded(tmp_path: Path) -> None:
    entries = _fixture_entries()
    entries["notes.txt"] = b"hello"
    with pytest.warns(UserWarning, match=r"ignored 1 unknown entry: \['notes.txt'\]"):
        rec = parse_etrecord(_zip(entries, tmp_path))
    assert rec.unknown_entries == ("notes.txt",)
    assert rec.graph_map == {}


def test_bytes_input_and_zip_closed(tmp_path: Path) -> None:
    path = _zip(_fixture_entries(), tmp_path)
    rec = parse_etrecord(path.read_bytes())
    assert rec.path is None and rec.edge_dialect_program is not None


def test_unrunnable_op_is_marked_and_raises_when_run(tmp_path: Path) -> None:
    entries = _fixture_entries()

    def edit(program: dict[str, Any]) -> None:
        node = program["graph_module"]["graph"]["nodes"][-1]
        node["target"] = "executorch.exir.dialects.edge.ops.vendor_ns.secret_op.default"

    _edit_program(entries, EDGE, edit)
    rec = parse_etrecord(_zip(entries, tmp_path))
    edge = rec.edge_programs["forward"]
    node = [n for n in edge.graph.nodes if n.op == "call_function"][-1]
    assert op_type_name(node) == "vendor_ns.secret_op.default"
    assert "vendor_ns.secret_op.default" in node.meta["numdiff_unrunnable"]
    inputs = rec._representative_inputs[0]  # type: ignore[index]
    with pytest.raises(CaptureError, match=r"cannot run"):
        edge.module()(*inputs)


# --------------------------------------------------------------------------- delegates


def _delegating_entries(with_original: bool) -> dict[str, bytes]:
    """Wrap the mlp Edge program into one delegate call, the way ExecuTorch serializes lowering."""
    entries = _fixture_entries()
    inner = json.loads(entries[EDGE])
    graph = inner["graph_module"]["graph"]
    lowered = {
        "backend_id": "FakeBackend",
        "processed_bytes": base64.b64encode(b"blob").decode(),
        "compile_specs": [{"key": "k", "value": base64.b64encode(b"v").decode()}],
        "original_module": inner if with_original else None,
        "original_state_dict": base64.b64encode(entries[EDGE + "_state_dict"]).decode(),
        "original_constants": base64.b64encode(entries[EDGE + "_constants"]).decode(),
        "named_data_store": None,
    }
    user_inputs = [s["user_input"]["arg"] for s in graph["inputs"] and inner["graph_module"]["signature"]["input_specs"] if "user_input" in s]
    user_names = [a["as_tensor"]["name"] for a in user_inputs]
    outer = json.loads(entries[EDGE])
    og = outer["graph_module"]["graph"]
    out_name = og["outputs"][0]["as_tensor"]["name"]
    og["inputs"] = [{"as_tensor": {"name": n}} for n in user_names]
    og["tensor_values"] = {k: v for k, v in og["tensor_values"].items() if k in user_names or k == out_name}
    og["nodes"] = [
        {
            "name": "executorch_call_delegate",
            "target": "torch.ops.higher_order.executorch_call_delegate",
            "inputs": [{"name": "lowered_module_0", "arg": {"as_string": json.dumps(lowered)}}]
            + [{"name": f"delegate_arg_{i}", "arg": {"as_tensor": {"name": n}}} for i, n in enumerate(user_names)],
            "outputs": [{"as_tensors": [{"name": out_name}]}],
            "metadata": {"debug_handle": "7"},
        }
    ]
    outer["graph_module"]["signature"]["input_specs"] = [{"user_input": {"arg": a}} for a in user_inputs]
    entries[EDGE] = json.dumps(outer).encode()
    empty = io.BytesIO()
    torch.save({}, empty)
    entries[EDGE + "_state_dict"] = empty.getvalue()
    return entries


def test_delegate_runs_its_original_program(tmp_path: Path) -> None:
    entries = _delegating_entries(with_original=True)
    rec = parse_etrecord(_zip(entries, tmp_path))
    edge = rec.edge_programs["forward"]
    names = [n.name for n in edge.graph.nodes]
    assert "lowered_module_0" in names and "executorch_call_delegate" in names
    call = next(n for n in edge.graph.nodes if n.name == "executorch_call_delegate")
    assert op_type_name(call) == "executorch_call_delegate"
    assert call.meta["debug_handle"] == 7 and "nn_module_stack" not in call.meta
    getitem = next(iter(call.users))
    assert getitem.meta["debug_handle"] == 7 and op_type_name(getitem) == "getitem"
    lowered = getattr(edge.graph_module, "lowered_module_0")
    assert lowered.backend_id == "FakeBackend" and lowered.compile_specs == [("k", b"v")]
    inputs = rec._representative_inputs[0]  # type: ignore[index]
    with torch.no_grad():
        got = edge.module()(*inputs)
        want = rec.exported_program.module()(*inputs)  # type: ignore[union-attr]
    torch.testing.assert_close(pytree.tree_leaves(got), pytree.tree_leaves(want))


def test_delegate_without_original_program_is_marked(tmp_path: Path) -> None:
    rec = parse_etrecord(_zip(_delegating_entries(with_original=False), tmp_path))
    edge = rec.edge_programs["forward"]
    call = next(n for n in edge.graph.nodes if n.name == "executorch_call_delegate")
    assert "FakeBackend" in call.meta["numdiff_unrunnable"]
    with pytest.raises(CaptureError, match=r"cannot run the FakeBackend delegate"):
        edge.module()(*rec._representative_inputs[0])  # type: ignore[index]


# --------------------------------------------------------------------------- stand-in ops


def test_dim_order_ops_run() -> None:
    from numdiff.program._edge_ops import ensure_ops_registered, resolve_target

    ensure_ops_registered()
    r = resolve_target("executorch.exir.dialects.edge.ops.dim_order_ops._to_dim_order_copy.default")
    assert r.op_type == "dim_order_ops._to_dim_order_copy.default"
    assert r.target == "torch.ops.numdiff_edge._to_dim_order_copy.default"
    x = torch.randn(1, 3, 4, 5)
    y = torch.ops.numdiff_edge._to_dim_order_copy.default(x, dtype=torch.float64, dim_order=[0, 2, 3, 1])
    assert y.dtype == torch.float64 and y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y, x.double())
    c = torch.ops.numdiff_edge._clone_dim_order.default(y, dim_order=[0, 1, 2, 3])
    assert c.is_contiguous()
    e = torch.ops.numdiff_edge._empty_dim_order.default([2, 3], dtype=torch.float32, dim_order=[0, 1])
    assert e.shape == (2, 3)


def test_quantized_ops_resolve_and_round_trip() -> None:
    from numdiff.program._edge_ops import resolve_target

    per_tensor = resolve_target("executorch.exir.dialects.edge.ops.quantized_decomposed.quantize_per_tensor.default")
    assert per_tensor.target == "torch.ops.quantized_decomposed.quantize_per_tensor.default"
    assert resolve_target("torch.ops.quantized_decomposed.quantize_per_tensor.default").op_type == "quantize_per_tensor.default"
    per_channel = resolve_target("torch.ops.quantized_decomposed.dequantize_per_channel.default")
    assert per_channel.target is not None and per_channel.op_type == "dequantize_per_channel.default"
    x = torch.tensor([[0.5, -1.0], [2.0, 0.25]])
    scales, zps = torch.tensor([0.01, 0.02]), torch.tensor([0, 1])
    q = torch.ops.numdiff_edge.quantize_per_channel.default(x, scales, zps, 0, -128, 127, torch.int8)
    assert q.dtype == torch.int8
    back = torch.ops.numdiff_edge.dequantize_per_channel.default(q, scales, zps, 0, -128, 127, torch.int8)
    torch.testing.assert_close(back, x, atol=0.02, rtol=0)


# --------------------------------------------------------------------------- entry layouts


def _copy_program(entries: dict[str, bytes], src: str, dst: str) -> None:
    entries[dst] = entries[src]
    for suffix in ("_state_dict", "_constants", "_example_inputs"):
        entries[dst + suffix] = entries[src + suffix]


def test_several_methods_give_a_dict(tmp_path: Path) -> None:
    entries = _fixture_entries()
    _copy_program(entries, EDGE, "edge_dialect_exported_program/encode")
    rec = parse_etrecord(_zip(entries, tmp_path))
    assert isinstance(rec.edge_dialect_program, dict)
    assert sorted(rec.edge_dialect_program) == ["encode", "forward"]


def test_old_single_edge_entry(tmp_path: Path) -> None:
    entries = _fixture_entries()
    _copy_program(entries, EDGE, "edge_dialect_exported_program")
    for key in [k for k in entries if k.startswith(EDGE)]:
        del entries[key]
    rec = parse_etrecord(_zip(entries, tmp_path))
    assert isinstance(rec.edge_dialect_program, torch.export.ExportedProgram)


def test_extra_programs_go_to_graph_map(tmp_path: Path) -> None:
    entries = _fixture_entries()
    _copy_program(entries, "exported_program", "aten_again/forward")
    rec = parse_etrecord(_zip(entries, tmp_path))
    assert list(rec.graph_map) == ["aten_again/forward"]
    assert [n.name for n in rec.graph_map["aten_again/forward"].graph.nodes] == [
        n.name for n in rec.exported_program.graph.nodes  # type: ignore[union-attr]
    ]


def test_absent_optional_entries_default_like_reference(tmp_path: Path) -> None:
    entries = _fixture_entries()
    for key in ("export_graph_id", "reference_outputs", "delegate_map"):
        entries.pop(key, None)
    rec = parse_etrecord(_zip(entries, tmp_path))
    assert rec.export_graph_id == 0 and rec._reference_outputs is None and rec._delegate_map is None
    assert rec.graph_map == {}


def test_unknown_plain_string_targets_are_unrunnable() -> None:
    from numdiff.program._edge_ops import resolve_target

    assert resolve_target("memory.alloc").target is None
    assert resolve_target("memory.alloc").op_type == "memory.alloc"
    assert resolve_target("torch.ops.no_such_ns.op.default").target is None
    assert resolve_target("_operator.getitem").target == "_operator.getitem"


def test_edge_methods_are_read_from_the_json_and_forgotten_when_the_program_is_replaced() -> None:
    from numdiff.schema.etrecord import edge_methods

    rec = parse_etrecord(FIXTURES / "mlp_fp32" / "etrecord.bin")
    assert edge_methods(rec) == ("forward",)
    rec.edge_dialect_program = None
    assert edge_methods(rec) == ()
