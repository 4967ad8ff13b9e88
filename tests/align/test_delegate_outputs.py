"""Multi-output delegate calls: each output is paired with the graph node that produces it.

REFERENCE-NOTES 6 and 18: a DELEGATE_CALL logs its inputs then its outputs, under the union of
its partition's handles. The reference pairs the k-th output from the end with the k-th handle id
from the end, which scores unrelated tensors when the partition's outputs are not its highest
handles (a false alarm of about -4 dB on an fp32 Llama lowered to XNNPACK).
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff._core.types import DebugHandle
from numdiff.align import (
    MatchKind,
    NoteKind,
    RuntimeOutput,
    align_intermediate_outputs,
    delegate_output_ids,
    pair_outputs,
    partition_output_ids,
)

REALISTIC = Path(__file__).parents[1] / "fixtures" / "realistic"


def _graph() -> torch.fx.GraphModule:
    """x -> a(1) -> b(2) -> c(3) -> out; a also feeds d(4) -> out. Handles 1..4."""

    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = x + 1
        b = a * 2
        c = b - 3
        d = a.reshape(-1)
        return c, d

    gm = torch.fx.symbolic_trace(f)
    for handle, node in enumerate((n for n in gm.graph.nodes if n.op == "call_function"), start=1):
        node.meta["debug_handle"] = handle
    return gm


def test_partition_outputs_are_nodes_used_outside_in_graph_order() -> None:
    gm = _graph()
    # Partition {1, 2}: a feeds d (outside), b feeds c (outside): outputs a, b in graph order.
    assert partition_output_ids(gm, [(2, 1)]) == {(2, 1): (1, 2)}
    # Partition {1, 2, 3}: a feeds d, c feeds the graph output.
    assert partition_output_ids(gm, [(1, 2, 3)]) == {(1, 2, 3): (1, 3)}
    assert partition_output_ids(gm, []) == {}


def _delegate(handle: tuple[int, ...], outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> RuntimeOutput:
    return RuntimeOutput(handle, 5, "DELEGATE_CALL", [*inputs, *outputs], len(outputs))


def test_delegate_outputs_pair_with_the_nodes_that_produce_them() -> None:
    # The delegate covers handles (1, 2, 3, 4); its outputs are a (handle 1) then c (handle 3).
    # The reference's rule pairs the last output with handle 4 and the one before with handle 3.
    a, b, c, d = torch.arange(4.0), torch.ones(4), torch.full((4,), 7.0), torch.zeros(2, 2)
    aot: dict[DebugHandle, Any] = {(1,): a, (2,): b, (3,): c, (4,): d}
    runtime: dict[DebugHandle, RuntimeOutput] = {(1, 2, 3, 4): _delegate((1, 2, 3, 4), [a.clone(), c.clone()], [torch.ones(4)])}

    reference = pair_outputs(aot, runtime)
    assert [(p.aot_output is c, p.aot_output is d) for p in reference.pairs] == [(False, True), (True, False)]

    ordered: dict[DebugHandle, tuple[int, ...]] = {(1, 2, 3, 4): (1, 3)}
    for report in (pair_outputs(aot, runtime, delegate_outputs=ordered),
                   align_intermediate_outputs(aot, runtime, delegate_outputs=ordered)):
        got = {p.aot_handle: (p.aot_output, p.runtime_output, p.match, p.runtime_handle) for p in report.pairs}
        assert set(got) == {(1,), (3,)}  # each reported under its own node's handle: no repeated op set
        for handle, (aot_value, runtime_value, match, runtime_handle) in got.items():
            assert torch.equal(aot_value, runtime_value), handle
            assert match is MatchKind.DELEGATE_OUTPUT
            assert runtime_handle == (1, 2, 3, 4)
        assert report.notes == ()


def test_delegate_output_ids_from_a_graph_and_unknown_order_is_noted() -> None:
    gm = _graph()
    x = torch.ones(3)
    runtime: dict[DebugHandle, RuntimeOutput] = {
        (1, 2): _delegate((1, 2), [x, x], [x]),
        (3,): RuntimeOutput((3,), 6, "native_call_sub.out", [x], 1),
        (4,): _delegate((4,), [x], [x]),  # one output: nothing to order
    }
    assert delegate_output_ids(gm, runtime) == {(1, 2): (1, 2)}
    # Three outputs logged but the graph shows two: the order is unknown, and pairing says so.
    runtime3: dict[DebugHandle, RuntimeOutput] = {(1, 2): _delegate((1, 2), [x, x, x], [x])}
    assert delegate_output_ids(gm, runtime3) == {}
    report = align_intermediate_outputs({(1,): x, (2,): x}, runtime3, delegate_outputs={})
    assert NoteKind.DELEGATE_ORDER_UNKNOWN in {n.kind for n in report.notes}
    assert all(p.match is not MatchKind.DELEGATE_OUTPUT for p in report.pairs)


def test_delegate_outputs_logged_in_another_order_than_the_graph_are_paired_by_shape() -> None:
    """T5 block on XNNPACK (scripts/_zoo_models.py, held-out ``t5_gated_gelu``): lowering re-sorts the
    graph after each partition is cut out, so a later delegate returns the relative position bias
    (handle 19, its input computed outside) before the RMSNorm output (handle 6). Paired in graph
    order, every output met another op's value: a transpose and a permute were "broken" at -7 dB on a
    clean run. The logged shapes show the order; outputs of one shape keep the graph's order."""
    norm, q, k, bias = torch.randn(1, 8, 16), torch.randn(1, 2, 8, 8), torch.randn(1, 2, 8, 8), torch.randn(2, 8, 8)
    aot: dict[DebugHandle, Any] = {(6,): norm, (9,): q, (16,): k, (19,): bias}
    handle = (6, 9, 16, 19)
    runtime = {handle: _delegate(handle, [bias.clone(), norm.clone(), q.clone(), k.clone()], [torch.ones(1, 8)])}
    report = align_intermediate_outputs(aot, runtime, delegate_outputs={handle: (6, 9, 16, 19)})
    got = {p.aot_handle: p.runtime_output for p in report.pairs}
    assert set(got) == set(aot) and all(torch.equal(got[h], aot[h]) for h in aot)
    (note,) = report.notes
    assert note.kind is NoteKind.DELEGATE_ORDER_BY_SHAPE and "[6, 9, 16, 19] -> [19, 6, 9, 16]" in note.detail
    # The graph's order fits the shapes: kept, no note (same-shaped outputs cannot be told apart).
    in_order = {handle: _delegate(handle, [norm, q, k, bias], [torch.ones(1, 8)])}
    report = align_intermediate_outputs(aot, in_order, delegate_outputs={handle: (6, 9, 16, 19)})
    assert report.notes == () and all(torch.equal(p.runtime_output, aot[p.aot_handle]) for p in report.pairs)
    # Shapes that are not the outputs' in any order decide nothing: the graph's order, as before.
    odd = {handle: _delegate(handle, [bias, norm, q, torch.zeros(3)], [torch.ones(1, 8)])}
    report = align_intermediate_outputs(aot, odd, delegate_outputs={handle: (6, 9, 16, 19)})
    assert NoteKind.DELEGATE_ORDER_BY_SHAPE not in {n.kind for n in report.notes}
    assert {p.aot_handle: p.runtime_output for p in report.pairs}[(9,)] is norm  # by position, as before


_REPORTS: dict[str, Any] = {}


def _report(name: str) -> Any:
    if name not in _REPORTS:
        from numdiff.inspector import Inspector

        root = REALISTIC / name
        files = json.loads(gzip.decompress((root / "expected.json.gz").read_bytes()))["files"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            insp = Inspector(etdump_path=str(root / files["etdump"]), etrecord=str(root / files["etrecord"]),
                             debug_buffer_path=str(root / files["debug_buffer"]))
            _REPORTS[name] = insp.numeric_gap_report("SNR").to_dataframe()
    return _REPORTS[name]


def _numel(value: Any) -> int | None:
    return value.numel() if isinstance(value, torch.Tensor) else None


def test_real_llama_xnn_report_pairs_every_delegate_output_with_its_node() -> None:
    df = _report("real_llama_xnn")
    delegate_rows = df[df["match"] == MatchKind.DELEGATE_OUTPUT.value]
    # 12 multi-output delegate calls with 2, 2, 3, 2, 2, 2, 2, 2, 3, 2, 2, 2 outputs.
    assert len(delegate_rows) == 26
    assert all(tuple(r["aot_intermediate_output"].shape) == tuple(r["runtime_intermediate_output"].shape)
               for _, r in delegate_rows.iterrows())
    op_sets = [tuple(ops) for ops in df["aot_ops"]]
    assert len(op_sets) == len(set(op_sets)), "an AOT op set appears on two rows"


@pytest.mark.parametrize("name", ["real_llama_xnn", "real_llama"])
def test_real_fp32_llama_report_scores_only_corresponding_pairs(name: str) -> None:
    df = _report(name)
    scored = 0
    for _, row in df.iterrows():
        aot, runtime = row["aot_intermediate_output"], row["runtime_intermediate_output"]
        gap = row["gap"][0] if len(row["gap"]) == 1 else math.nan
        if math.isnan(gap):
            continue
        scored += 1
        assert _numel(aot) == _numel(runtime), (list(row["aot_ops"]), row["note"])
        assert gap > 40.0, (list(row["aot_ops"]), gap)  # fp32: the runtime agrees to ~1e-6
    assert scored > 20


def test_getitems_of_a_multi_output_op_belong_to_it() -> None:
    """Dynamic quantization's ``choose_qparams`` returns (scale, zero point), unpacked by ``getitem``
    nodes (which carry some handle of their own, 0 in ExecuTorch's ATen graph) and read inside the
    partition: it is no output of the partition. Counting it made a 2-output XNNPACK delegate of a
    ConvNeXt block look like 4 outputs, its order unknown, its outputs paired by position: a false
    culprit at -6 dB on a clean int8 dynamic-quantization run (scripts/_zoo_models.py, convnext_stage_224)."""

    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        std, mean = torch.std_mean(x)  # one op, two outputs: two getitem nodes
        y = (x - mean) / std
        return y * 2, y + 1

    gm = torch.fx.symbolic_trace(f)
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    handles = iter(range(1, 100))
    for node in ops:
        node.meta["debug_handle"] = 0 if "getitem" in node.name else next(handles)
    by_name = {n.name: n.meta["debug_handle"] for n in ops}
    partition = tuple(h for name, h in by_name.items() if h)  # std_mean, sub, truediv, mul, add
    outputs = (by_name["mul"], by_name["add"])
    assert partition_output_ids(gm, [partition]) == {partition: outputs}
    # A getitem read outside the partition makes its op an output.
    assert partition_output_ids(gm, [(by_name["std_mean"],)]) == {(by_name["std_mean"],): (by_name["std_mean"],)}
