"""The ATen graph built from JSON captures what torch's deserializer route captures."""

from __future__ import annotations

import torch
import pytest

from numdiff.capture import capture_intermediate_outputs, propagate_back_debug_handle
from numdiff.capture._aten_builder import build_aten_graph_module
from numdiff.capture.graphs import resolve_reference_graph
from numdiff.schema.etrecord import parse_etrecord
from tests.conftest import artifact, fixture_names


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("name", fixture_names(need=("etrecord",)))
def test_direct_route_equals_the_deserializer_route(name: str) -> None:
    direct_record = parse_etrecord(artifact(name, "etrecord"))  # type: ignore[arg-type]
    source = direct_record.program_source("exported_program")
    assert source is not None and build_aten_graph_module(*source) is not None, "direct route must apply"
    module, graph = resolve_reference_graph(direct_record)
    assert graph == "exported_program"
    inputs = [direct_record._representative_inputs]
    direct = capture_intermediate_outputs(module, inputs)

    slow_record = parse_etrecord(artifact(name, "etrecord"))  # type: ignore[arg-type]
    assert propagate_back_debug_handle(slow_record.exported_program, slow_record.export_graph_id,
                                       slow_record.edge_dialect_program)
    slow = capture_intermediate_outputs(slow_record.exported_program.module(), inputs)

    assert list(direct.outputs) == list(slow.outputs)
    assert direct.op_names == slow.op_names
    assert all(_same(direct.outputs[h], slow.outputs[h]) for h in slow.outputs)
    from torch.utils import _pytree

    assert _same(_pytree.tree_leaves(direct.graph_output), _pytree.tree_leaves(slow.graph_output))
    # the handles are left on the record's ATen program for whoever reads it later
    late = {n.name: n.meta.get("debug_handle") for n in direct_record.exported_program.graph.nodes if n.op == "call_function"}
    early = {n.name: n.meta.get("debug_handle") for n in slow_record.exported_program.graph.nodes if n.op == "call_function"}
    assert late == early


def test_unsupported_programs_fall_back() -> None:
    record = parse_etrecord(artifact("mlp_fp32", "etrecord"))  # type: ignore[arg-type]
    program, state, consts = record.program_source("exported_program")  # type: ignore[misc]
    broken = dict(program, graph_module=dict(program["graph_module"]))
    broken["graph_module"]["graph"] = dict(program["graph_module"]["graph"], nodes=[
        dict(program["graph_module"]["graph"]["nodes"][0], target="torch.ops.higher_order.cond")])
    assert build_aten_graph_module(broken, state, consts) is None
