"""On real ETRecords: numdiff's capture gives the reference's answers.

The answers were recorded from ExecuTorch 1.5.1 by ``scripts/record_capture_oracle.py`` into
``tests/fixtures/<name>/capture_expected.json``; the ETRecords are read with numdiff's own
``parse_etrecord`` (no ExecuTorch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff.capture import (
    aot_debug_handle_to_stack_traces,
    capture_intermediate_outputs,
    propagate_back_debug_handle,
    resolve_reference_graph,
)
from numdiff.capture.nodes import iter_nodes_with_control_flow

etrecord_module = pytest.importorskip("numdiff.schema.etrecord")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "capture_expected.json").exists())


def _key(handle: tuple[int, ...]) -> str:
    return ",".join(str(h) for h in handle)


def _expected(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "capture_expected.json").read_text())


def _etrecord(name: str) -> Any:
    return etrecord_module.parse_etrecord(FIXTURES / name / "etrecord.bin")


def _check_value(value: Any, summary: dict[str, Any]) -> None:
    if summary["kind"] == "tensor":
        assert isinstance(value, torch.Tensor)
        assert list(value.shape) == summary["shape"] and str(value.dtype) == summary["dtype"]
        flat = value.detach().reshape(-1).to(torch.float64)
        # The oracle ran on another CPU: float kernels (GEMM, convolution) may sum in another order, so
        # values agree to the dtype's rounding, not bit for bit (a wrong tensor differs by far more).
        tol = _rounding(value.dtype, summary)
        assert float(flat.sum()) == pytest.approx(summary["sum"], rel=0, abs=tol * max(summary["abs_sum"], 1e-30))
        assert float(flat.abs().sum()) == pytest.approx(summary["abs_sum"], rel=tol, abs=1e-9)
        first = summary["first"]
        scale = max((abs(v) for v in first), default=0.0)
        assert [float(v) for v in flat[: len(first)]] == pytest.approx(first, rel=0, abs=tol * scale + 1e-12)
    elif summary["kind"] == "sequence":
        assert isinstance(value, list) and len(value) == len(summary["items"])
        for item, item_summary in zip(value, summary["items"], strict=True):
            _check_value(item, item_summary)
    else:
        assert repr(value) == summary["repr"]


def _rounding(dtype: torch.dtype, summary: dict[str, Any]) -> float:
    """Relative tolerance for a tensor computed on another CPU: 0 for integer dtypes (exact), else a
    few hundred units of rounding of the dtype (sums over a reduction of K terms err by up to ~K eps)."""
    if not dtype.is_floating_point:
        return 0.0
    return 256 * torch.finfo(dtype).eps


def test_fixtures_present() -> None:
    assert len(NAMES) >= 5


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("disable", [False, True])
def test_back_propagation_equals_reference(name: str, disable: bool) -> None:
    expected = _expected(name)["propagation"][f"disable_validation={disable}"]
    etrecord = _etrecord(name)
    if expected is None:
        assert etrecord.exported_program is None
        return
    args = (etrecord.exported_program, etrecord.export_graph_id, etrecord.edge_dialect_program, disable)
    assert propagate_back_debug_handle(*args) == expected["succeeded"]
    assert propagate_back_debug_handle(*args) == expected["second_call"]
    got = {n.name: n.meta.get("debug_handle") for n in etrecord.exported_program.graph.nodes}
    assert got == expected["aten_handles"]


@pytest.mark.parametrize("name", NAMES)
def test_default_reference_graph_equals_reference(name: str) -> None:
    assert resolve_reference_graph(_etrecord(name))[1] == _expected(name)["resolved_default"]


def _graph_cases() -> list[tuple[str, str]]:
    return [(name, graph) for name in NAMES for graph in _expected(name)["graphs"]]


@pytest.mark.parametrize(("name", "graph"), _graph_cases())
def test_capture_equals_reference(name: str, graph: str) -> None:
    expected = _expected(name)["graphs"][graph]
    etrecord = _etrecord(name)
    gm, resolved = resolve_reference_graph(etrecord, graph)
    assert resolved == graph
    result = capture_intermediate_outputs(gm, etrecord._representative_inputs)
    assert {_key(h): names for h, names in result.op_names.items()} == expected["op_names"]
    assert [_key(h) for h in result.outputs] == expected["output_handles"]
    for handle, value in result.outputs.items():
        _check_value(value, expected["outputs"][_key(handle)])
    inputs = etrecord._representative_inputs
    plain = gm(*(inputs[0] if isinstance(inputs[0], (tuple, list)) else inputs))  # capturing changes no number
    for got, want in zip(torch.utils._pytree.tree_leaves(result.graph_output), torch.utils._pytree.tree_leaves(plain), strict=True):
        assert torch.equal(got, want)
    traces = aot_debug_handle_to_stack_traces(gm, resolved)
    assert {_key(h): {n: t is not None for n, t in d.items()} for h, d in traces.items()} == expected["stack_traces"]


@pytest.mark.parametrize("name", NAMES)
def test_streaming_sees_the_same_handles(name: str) -> None:
    etrecord = _etrecord(name)
    gm, _ = resolve_reference_graph(etrecord)
    seen: list[tuple[int, ...]] = []
    result = capture_intermediate_outputs(gm, etrecord._representative_inputs, on_output=lambda h, n, v: seen.append(h))
    assert sorted(seen) == sorted(result.op_names)
    assert len(seen) == len(set(seen))


def test_graph_ids_are_kept_by_the_reader() -> None:
    etrecord = _etrecord(NAMES[0])
    ids = {
        source.graph_id
        for node in iter_nodes_with_control_flow(etrecord.edge_dialect_program.graph_module)
        for source in node.meta.get("from_node", [])[-1:]
    }
    assert ids  # provenance survives parsing
