"""IntermediateOutputCapturer: differential checks against plain execution and the reference's rules."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import torch
from capture_helpers import Pair, mlp_pair, multi_output_pair

from numdiff.capture.handles import propagate_back_debug_handle
from numdiff.capture.interpreter import IntermediateOutputCapturer, capture_intermediate_outputs
from numdiff.capture.nodes import handle_key, is_captured_node
from numdiff.errors import CaptureError, ComparatorError


def _reference_semantics(gm: torch.fx.GraphModule, *args: Any) -> dict[tuple[int, ...], Any]:
    """What the reference's capturer returns: every selected node writes its handle, last one wins."""
    captured: dict[tuple[int, ...], Any] = {}

    class Everything(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            out = super().run_node(n)
            if is_captured_node(n):
                key = handle_key(n.meta["debug_handle"])
                if isinstance(out, torch.Tensor):
                    captured[key] = out.detach().clone()
                elif isinstance(out, (list, tuple)):
                    captured[key] = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in out]
                else:
                    captured[key] = out
            return out

    Everything(gm).run(*args)
    return captured


def _assert_same(a: Any, b: Any) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    else:
        assert a == b


def _pairs() -> list[tuple[str, Pair]]:
    return [("mlp", mlp_pair()), ("multi_output", multi_output_pair())]


@pytest.mark.parametrize("graph", ["exported_program", "edge"])
@pytest.mark.parametrize(("name", "pair"), _pairs())
def test_graph_output_equals_normal_run(name: str, pair: Pair, graph: str) -> None:
    assert pair.exported_program is not None
    assert propagate_back_debug_handle(pair.exported_program, pair.export_graph_id or 0, pair.edge_dialect_program)
    program = pair.exported_program if graph == "exported_program" else pair.edge_dialect_program
    gm = program.module()
    inputs = pair._representative_inputs
    result = capture_intermediate_outputs(gm, inputs)
    _assert_same(result.graph_output, gm(*inputs[0]))
    # ... and the captured intermediates are exactly the reference's, in the reference's order.
    expected = _reference_semantics(gm, *inputs)
    assert list(result.outputs) == list(expected)
    for handle, value in expected.items():
        _assert_same(result.outputs[handle], value)
    assert set(result.op_names) == set(result.outputs) == set(result.kept_nodes)


def test_inputs_as_flat_list_or_nested_tuple_are_the_same() -> None:
    pair = mlp_pair()
    gm = pair.edge_dialect_program.module()
    (x,) = pair._representative_inputs[0]
    a = capture_intermediate_outputs(gm, [x]).outputs
    b = capture_intermediate_outputs(gm, [(x,)]).outputs
    assert list(a) == list(b)
    for h in a:
        _assert_same(a[h], b[h])


def _chain(handles: list[object]) -> torch.fx.GraphModule:
    gm = torch.fx.symbolic_trace(lambda x: torch.exp(torch.sin(torch.neg(torch.relu(x)))))
    for node, h in zip([n for n in gm.graph.nodes if n.op == "call_function"], handles, strict=True):
        node.meta["debug_handle"] = h
    return gm


def test_shared_handle_keeps_last_in_first_position_and_is_reported() -> None:
    gm = _chain([1, 2, 1, 3])  # relu:1 neg:2 sin:1 exp:3
    x = torch.tensor([-1.0, 2.0])
    result = capture_intermediate_outputs(gm, [x])
    assert list(result.outputs) == [(1,), (2,), (3,)]  # (1,) where relu put it, as a dict overwrite does
    assert torch.equal(result.outputs[(1,)], torch.sin(torch.neg(torch.relu(x))))
    assert result.kept_nodes == {(1,): "sin", (2,): "neg", (3,): "exp"}
    assert result.shared_handles == {(1,): ("relu", "sin")}
    assert result.op_names == {(1,): ["relu", "sin"], (2,): ["neg"], (3,): ["exp"]}
    assert any("kept sin" in note for note in result.notes)
    assert list(_reference_semantics(gm, x)) == list(result.outputs)


def test_unset_handle_is_noted() -> None:
    result = capture_intermediate_outputs(_chain([0, 0, 1, 2]), [torch.ones(1)])
    assert (0,) in result.outputs
    assert any("unset debug handle 0" in note for note in result.notes)


def test_sequence_outputs_become_lists_of_clones() -> None:
    gm = torch.fx.symbolic_trace(lambda x: torch.topk(x, 2))
    next(n for n in gm.graph.nodes if n.op == "call_function").meta["debug_handle"] = [4, 5]
    out = capture_intermediate_outputs(gm, [torch.tensor([3.0, 1.0, 2.0])]).outputs
    assert list(out) == [(4, 5)]
    values, indices = out[(4, 5)]
    assert isinstance(out[(4, 5)], list)
    assert torch.equal(values, torch.tensor([3.0, 2.0])) and torch.equal(indices, torch.tensor([0, 2]))


def test_captured_value_is_a_copy_not_changed_by_later_inplace_op() -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    relu.meta["debug_handle"] = 1
    added = graph.call_function(torch.ops.aten.add_.Tensor, (relu, 1.0))
    graph.output(added)
    out = capture_intermediate_outputs(torch.fx.GraphModule({}, graph), [torch.tensor([1.0, -1.0])])
    assert torch.equal(out.outputs[(1,)], torch.tensor([1.0, 0.0]))
    assert torch.equal(out.graph_output, torch.tensor([2.0, 1.0]))


def test_outputs_are_detached() -> None:
    pair = mlp_pair()
    result = capture_intermediate_outputs(pair.edge_dialect_program.module(), pair._representative_inputs)
    assert all(not v.requires_grad for v in result.outputs.values())


def test_streaming_calls_back_once_per_handle_with_the_kept_node() -> None:
    gm = _chain([1, 2, 1, 3])
    calls: list[tuple[tuple[int, ...], str]] = []
    result = capture_intermediate_outputs(gm, [torch.ones(2)], on_output=lambda h, n, v: calls.append((h, n.name)))
    assert calls == [((2,), "neg"), ((1,), "sin"), ((3,), "exp")]
    assert result.outputs == {}
    assert len(result) == 3
    kept = capture_intermediate_outputs(gm, [torch.ones(2)], on_output=lambda h, n, v: None, keep_outputs=True)
    assert list(kept.outputs) == [(1,), (2,), (3,)]


def test_streaming_does_not_hold_outputs() -> None:
    pair = mlp_pair()
    refs: list[weakref.ref[torch.Tensor]] = []
    sizes: list[int] = []

    def on_output(handle: tuple[int, ...], node: torch.fx.Node, value: Any) -> None:
        refs.append(weakref.ref(value))
        sizes.append(value.numel())

    capturer = IntermediateOutputCapturer(pair.edge_dialect_program.module(), on_output=on_output)
    result = capturer.capture(*pair._representative_inputs)
    gc.collect()
    assert len(refs) == len(result) == 4
    assert all(r() is None for r in refs), "a streamed output is still referenced after the run"


def test_streamed_values_equal_held_values() -> None:
    pair = multi_output_pair()
    gm = pair.edge_dialect_program.module()
    streamed: dict[tuple[int, ...], Any] = {}
    capture_intermediate_outputs(gm, pair._representative_inputs, on_output=lambda h, n, v: streamed.__setitem__(h, v))
    held = capture_intermediate_outputs(gm, pair._representative_inputs).outputs
    assert set(streamed) == set(held)
    for h in held:
        _assert_same(streamed[h], held[h])


def test_failing_node_raises_capture_error_with_context_and_capturer_stays_usable() -> None:
    gm = torch.fx.symbolic_trace(lambda x: torch.mm(x, x))
    mm = next(n for n in gm.graph.nodes if n.op == "call_function")
    mm.meta.update(debug_handle=7, stack_trace='File "model.py", line 3, in forward\n    return x @ x')
    capturer = IntermediateOutputCapturer(gm)
    with pytest.raises(CaptureError, match=r"node 'mm' \(target mm, debug handle 7\) failed: RuntimeError") as info:
        capturer.run_and_capture(torch.ones(2, 3))
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "model.py" in str(info.value)
    assert list(capturer.run_and_capture(torch.ones(2, 2))) == [(7,)]


def test_missing_input_raises_capture_error() -> None:
    gm = torch.fx.symbolic_trace(lambda x, y: torch.add(x, y))
    with pytest.raises(CaptureError, match=r"node 'y'.*\n.*placeholders"):
        capture_intermediate_outputs(gm, [torch.ones(1)])


def test_callback_errors() -> None:
    gm = _chain([1, 2, 3, 4])

    def broken(h: tuple[int, ...], n: torch.fx.Node, v: Any) -> None:
        raise KeyError("oops")

    with pytest.raises(CaptureError, match=r"on_output callback failed for debug handle \(1,\) at node 'relu'"):
        capture_intermediate_outputs(gm, [torch.ones(1)], on_output=broken)

    def numdiff_error(h: tuple[int, ...], n: torch.fx.Node, v: Any) -> None:
        raise ComparatorError("bad metric")

    with pytest.raises(ComparatorError, match="bad metric"):
        capture_intermediate_outputs(gm, [torch.ones(1)], on_output=numdiff_error)


def test_run_node_is_not_patched_on_the_instance() -> None:
    capturer = IntermediateOutputCapturer(_chain([1, 2, 3, 4]))
    capturer.run_and_capture(torch.ones(1))
    assert "run_node" not in vars(capturer)
