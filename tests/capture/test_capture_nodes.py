"""Node selection and the handle → op-name / stack-trace mappings."""

from __future__ import annotations

import logging
import operator

import pytest
import torch

from numdiff.capture.nodes import (
    aot_debug_handle_to_op_names,
    aot_debug_handle_to_stack_traces,
    handle_key,
    is_captured_node,
    iter_nodes_with_control_flow,
)


def _graph(*handles: object) -> torch.fx.GraphModule:
    """x -> relu -> neg -> sin, with the given handles on the three call_function nodes."""
    gm = torch.fx.symbolic_trace(lambda x: torch.sin(torch.neg(torch.relu(x))))
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    for node, handle in zip(ops, handles, strict=True):
        if handle is not ...:
            node.meta["debug_handle"] = handle
    return gm


@pytest.mark.parametrize(("value", "key"), [(3, (3,)), (0, (0,)), ([3, 4], (3, 4)), ((5,), (5,))])
def test_handle_key(value: object, key: tuple[int, ...]) -> None:
    assert handle_key(value) == key


def test_selection_rule() -> None:
    gm = _graph(1, None, ...)
    relu, neg, sin = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert is_captured_node(relu)
    assert not is_captured_node(neg)  # handle None
    assert not is_captured_node(sin)  # no handle
    placeholder = next(iter(gm.graph.nodes))
    placeholder.meta["debug_handle"] = 9
    assert not is_captured_node(placeholder)


def test_unset_handle_zero_is_selected_like_the_reference() -> None:
    gm = _graph(0, 0, 1)
    assert aot_debug_handle_to_op_names(gm) == {(0,): ["relu", "neg"], (1,): ["sin"]}


def test_getitem_excluded_by_name_substring() -> None:
    gm = torch.fx.symbolic_trace(lambda x: torch.topk(x, 1)[0] + 1)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.meta["debug_handle"] = 1
    getitem = next(n for n in gm.graph.nodes if n.target is operator.getitem)
    assert not is_captured_node(getitem)
    # The reference tests the *name*: a node called "my_getitem_x" is excluded whatever its target.
    add = next(n for n in gm.graph.nodes if n.target is operator.add)
    add.name = "my_getitem_x"
    assert not is_captured_node(add)
    assert aot_debug_handle_to_op_names(gm) == {(1,): ["topk"]}


def test_call_method_is_not_captured() -> None:
    gm = torch.fx.symbolic_trace(lambda x: x.relu())
    node = next(n for n in gm.graph.nodes if n.op == "call_method")
    node.meta["debug_handle"] = 1
    assert not is_captured_node(node)
    assert aot_debug_handle_to_op_names(gm) == {}


def test_op_names_shared_and_list_handles() -> None:
    gm = _graph(2, [3, 4], 2)
    assert aot_debug_handle_to_op_names(gm) == {(2,): ["relu", "sin"], (3, 4): ["neg"]}


def test_stack_traces_mapping_and_missing_ones(caplog: pytest.LogCaptureFixture) -> None:
    gm = _graph(1, 1, 2)
    relu, neg, sin = [n for n in gm.graph.nodes if n.op == "call_function"]
    relu.meta["stack_trace"] = "trace relu"
    with caplog.at_level(logging.WARNING):
        got = aot_debug_handle_to_stack_traces(gm, "edge")
    assert got == {(1,): {"relu": "trace relu", "neg": None}, (2,): {"sin": None}}
    assert not caplog.records


def test_stack_traces_warns_when_none_present(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        got = aot_debug_handle_to_stack_traces(_graph(1, 2, 3), "exported_program")
    assert got == {(1,): {"relu": None}, (2,): {"neg": None}, (3,): {"sin": None}}
    assert "No stack traces in reference graph 'exported_program'" in caplog.text


def test_stack_traces_no_warning_for_graph_without_captured_nodes(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert aot_debug_handle_to_stack_traces(_graph(..., ..., ...)) == {}
    assert not caplog.records


def test_walk_descends_into_cond_branches() -> None:
    class C(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda x: torch.sin(x), lambda x: torch.cos(x), (x,))

    ep = torch.export.export(C(), (torch.randn(3),))
    names = [n.name for n in iter_nodes_with_control_flow(ep.graph_module) if n.op == "call_function"]
    assert names[-2:] == ["sin", "cos"]
    assert "cond" in names
