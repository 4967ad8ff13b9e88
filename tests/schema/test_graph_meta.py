"""Node metadata read from the program JSON equals what the loaded programs carry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from numdiff.profile.symbolicate import op_nodes_from_graph
from numdiff.program.graph_meta import op_type_for, parse_nn_module_stack, parse_source_fn_stack
from numdiff.schema.etrecord import parse_etrecord
from tests.conftest import FIXTURES, artifact, fixture_names


@pytest.mark.parametrize("name", fixture_names(need=("etrecord",)))
def test_json_nodes_equal_loaded_graph_nodes(name: str) -> None:
    record = parse_etrecord(artifact(name, "etrecord"))  # type: ignore[arg-type]
    from_json = record.op_nodes()
    assert from_json is not None
    program = record.edge_dialect_program
    loaded = op_nodes_from_graph(program.graph_module)  # type: ignore[union-attr]
    strip = [(n.name, n.op_type, n.debug_handle, n.stack_trace, n.nn_module_stack) for n in loaded]
    assert [(n.name, n.op_type, n.debug_handle, n.stack_trace, n.nn_module_stack) for n in from_json] == strip
    for j, g in zip(from_json, loaded, strict=True):
        if g.source_fn_stack:
            assert [s[0] for s in j.source_fn_stack or []] == [s[0] for s in g.source_fn_stack]


def test_replacing_the_program_drops_the_json_view() -> None:
    record = parse_etrecord(FIXTURES / "mlp_fp32" / "etrecord.bin")
    record.edge_dialect_program = None
    assert record.op_nodes() is None


def test_profiling_with_an_etrecord_needs_no_torch() -> None:
    d = FIXTURES / "mlp_fp32"
    code = (
        "import sys, warnings; warnings.simplefilter('ignore'); from numdiff import Inspector;"
        f"i = Inspector(etdump_path={str(d / 'etdump.etdp')!r}, etrecord={str(d / 'etrecord.bin')!r});"
        "assert any(e.op_types for b in i.event_blocks for e in b.events);"
        "i.to_dataframe(); assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parsers() -> None:
    assert op_type_for("executorch.exir.dialects.edge.ops.quantized_decomposed.quantize_per_tensor.default") == (
        "quantized_decomposed.quantize_per_tensor.default")
    assert op_type_for("torch.ops.higher_order.executorch_call_delegate") == "executorch_call_delegate"
    assert parse_nn_module_stack("L__self__,,M;L__self__fc,fc,torch.nn.Linear") == {
        "L__self__": ("", "M"), "L__self__fc": ("fc", "torch.nn.Linear")}
    assert parse_nn_module_stack("k,layers[(0, 1)],T") == {"k": ("layers[(0, 1)]", "T")}
    assert parse_source_fn_stack("linear,torch.nn.Linear;relu,function.relu") == [
        ("linear", "torch.nn.Linear"), ("relu", "function.relu")]


@pytest.mark.parametrize("name", fixture_names(need=("etrecord",)))
def test_back_propagation_from_json_equals_from_the_loaded_program(name: str) -> None:
    from numdiff.capture import plan_debug_handle_propagation

    record = parse_etrecord(artifact(name, "etrecord"))  # type: ignore[arg-type]
    provenance = record.edge_provenance()
    assert provenance is not None
    ep = record.exported_program
    by_json = plan_debug_handle_propagation(ep, record.export_graph_id, provenance)
    by_program = plan_debug_handle_propagation(ep, record.export_graph_id, record.edge_dialect_program)
    assert {n.name: h for n, h in by_json.assignments.items()} == {n.name: h for n, h in by_program.assignments.items()}
    assert by_json.validated == by_program.validated
    assert by_json.matched_handles == by_program.matched_handles
