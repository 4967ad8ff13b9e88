"""Strings torch's export deserializer would evaluate, import or resolve are neutralised first.

In torch 2.13 ``torch/_export/serde/serialize.py`` the deserializer turns these JSON strings into
objects: node targets and ``as_operator`` arguments (attribute walks from ``torch``/``math``/
``_operator``, or the ``#namespace:`` extension registry — see test_op_targets), symbolic
expressions (``sympy.sympify``, which evaluates Python), ``source_fn_stack`` types (attribute
walks), ``from_node`` and ``custom`` metadata (JSON), subgraphs (recursively), pytree specs and
forward argument names (pasted into generated code — see test_names). Each vector has a test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numdiff.schema.etrecord import parse_etrecord
from tests.security.hostile import ATEN, EDGE, Program, assert_refused, canary_payload, craft, first_op, user_input_name

ENTRIES = pytest.mark.parametrize("entry", [ATEN, EDGE], ids=["aten", "edge"])


def _symbolic_first_dim(expr: str) -> Any:
    def mutate(program: Program) -> None:
        meta = program["graph_module"]["graph"]["tensor_values"][user_input_name(program)]
        meta["sizes"][0] = {"as_expr": {"expr_str": expr, "hint": {"as_int": 1}}}

    return mutate


@ENTRIES
def test_symbolic_expression_with_code_is_refused(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"
    path = craft(tmp_path, entry, _symbolic_first_dim(canary_payload(canary)))
    assert_refused(path, entry, canary, match=r"symbolic expression .*__import__")


@pytest.mark.parametrize(
    "expr", ["s0.__class__", "s0 + open", "(" * 80 + "s0" + ")" * 80, "s0; 1", "'s0'", "9**9**9", "2**(9**9)", "9" * 40]
)
def test_symbolic_expression_grammar(tmp_path: Path, expr: str) -> None:
    canary = tmp_path / "CANARY"
    path = craft(tmp_path, ATEN, _symbolic_first_dim(expr))
    assert_refused(path, ATEN, canary, match=r"symbolic expression")


def test_well_formed_symbolic_expressions_pass_the_guard() -> None:
    from numdiff.program.guard import _check_expr

    for expr in ("s0", "2*s0 + 1", "Max(1, s77)", "FloorDiv(s0, 2) - u1", "s0**2 >= 4", "1.5e-3*s0", "2**s0"):
        _check_expr(expr)


@ENTRIES
def test_range_constraint_symbol_with_code_is_refused(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        program["range_constraints"] = {canary_payload(canary): {"min_val": 1, "max_val": 8}}

    path = craft(tmp_path, entry, mutate)
    assert_refused(path, entry, canary, match=r"range constraint for .*__import__.* not a shape symbol")


@ENTRIES
def test_subgraph_targets_are_checked(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        inner = {"nodes": [{"name": "boom", "target": "os.system", "inputs": [
            {"name": "command", "arg": {"as_string": f"touch {canary}"}}], "outputs": [], "metadata": {}}]}
        for _ in range(2):
            inner = {"nodes": [{"name": "c", "target": "torch.ops.higher_order.cond", "inputs": [
                {"name": "true_fn", "arg": {"as_graph": {"name": "g", "graph": inner}}}], "outputs": [], "metadata": {}}]}
        first_op(program)["inputs"].append({"name": "true_fn", "arg": {"as_graph": {"name": "g", "graph": inner}}})

    path = craft(tmp_path, entry, mutate)
    assert_refused(path, entry, canary, match=r"refused 1 operator name.*'os\.system'")


def test_subgraph_nesting_is_bounded(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        inner: dict[str, Any] = {"nodes": []}
        for _ in range(18):  # deeper than the guard allows, shallower than the JSON nesting limit
            inner = {"nodes": [{"name": "c", "target": "torch.ops.higher_order.cond", "inputs": [
                {"name": "true_fn", "arg": {"as_graph": {"name": "g", "graph": inner}}}], "outputs": [], "metadata": {}}]}
        first_op(program)["inputs"].append({"name": "true_fn", "arg": {"as_graph": {"name": "g", "graph": inner}}})

    path = craft(tmp_path, ATEN, mutate)
    assert_refused(path, ATEN, canary, match=r"subgraphs nest deeper than 16 levels")


def _metadata(**values: str) -> Any:
    def mutate(program: Program) -> None:
        first_op(program)["metadata"].update(values)

    return mutate


def test_source_fn_stack_stays_a_string(tmp_path: Path) -> None:
    path = craft(tmp_path, EDGE, _metadata(source_fn_stack="linear,torch.ops.load_library;x,torch._dynamo.reset"))
    node = next(n for n in parse_etrecord(path).edge_dialect_program.graph.nodes if n.op == "call_function")
    assert node.meta["source_fn_stack"] == [("linear", "torch.ops.load_library"), ("x", "torch._dynamo.reset")]


@ENTRIES
def test_module_stack_types_and_custom_metadata_stay_data(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"
    payload = canary_payload(canary)
    path = craft(tmp_path, entry, _metadata(
        nn_module_stack=f"L__self__,fc1,{payload}",
        custom=json.dumps({"note": payload}),
        stack_trace=f'File "a.py", line 1, in f\n    x = 1\r{payload}\n',
        from_node=json.dumps([{"name": payload, "target": payload, "graph_id": 1, "pass_name": "", "action": "",
                               "from_node": []}]),
    ))
    program = getattr(parse_etrecord(path), "exported_program" if entry == ATEN else "edge_dialect_program")
    node = next(n for n in program.graph.nodes if n.op == "call_function")
    assert node.meta["nn_module_stack"]["L__self__"] == ("fc1", payload)
    assert node.meta["from_node"][0].name == payload
    program.module()
    program.graph_module.print_readable(print_output=False)
    assert not canary.exists()


@ENTRIES
def test_range_constraints_that_are_not_an_object_are_a_named_error(tmp_path: Path, entry: str) -> None:
    # third 100k campaign: a float here escaped as TypeError from the guard
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        program["range_constraints"] = 2.5

    path = craft(tmp_path, entry, mutate)
    assert_refused(path, entry, canary, match=r"field range_constraints is a float, not an object\n"
                                              r"The program is damaged or was edited")
