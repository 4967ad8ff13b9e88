"""Debug-handle back-propagation from an Edge program to its ATen program."""

from __future__ import annotations

import pytest
import torch
from capture_helpers import assign_debug_handles, handles_by_name, make_pair, mlp_pair, multi_output_pair

from numdiff.capture.handles import ancestor_node_ids, plan_debug_handle_propagation, propagate_back_debug_handle


def test_mlp_handles_follow_from_node() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    assert propagate_back_debug_handle(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    got = handles_by_name(pair.exported_program)
    assert {k: v for k, v in got.items() if v is not None} == {"linear": 1, "relu": 2, "linear_1": 3, "softmax": 4}
    assert got["x"] is None and got["output"] is None  # placeholders/output untouched


def test_aten_nodes_without_edge_descendant_get_unset_zero() -> None:
    pair = multi_output_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    assert propagate_back_debug_handle(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    got = handles_by_name(pair.exported_program)
    assert got["max_1"] == 1 and got["topk"] == 2
    assert got["getitem"] == 0 and got["getitem_1"] == 0  # Edge getitems descend from max_1, not getitem


def test_graph_id_as_text_matches_too() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None
    assert propagate_back_debug_handle(pair.exported_program, str(pair.export_graph_id), pair.edge_dialect_program)


def test_wrong_graph_id_fails_validation_and_changes_nothing() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None
    before = handles_by_name(pair.exported_program)
    assert not propagate_back_debug_handle(pair.exported_program, 12345, pair.edge_dialect_program)
    assert handles_by_name(pair.exported_program) == before


def _orphan_one_edge_node(pair: object) -> str:
    """Drop the provenance of the Edge relu, as a re-export of symbolic-shape ops does."""
    edge = pair.edge_dialect_program  # type: ignore[attr-defined]
    relu = next(n for n in edge.graph.nodes if n.name == "relu")
    del relu.meta["from_node"]
    return relu.name


def test_validation_failure_and_opt_out() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    _orphan_one_edge_node(pair)
    plan = plan_debug_handle_propagation(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert not plan.validated
    assert plan.unmatched_edge_nodes == (("relu", 2),)
    assert "relu (handle 2)" in plan.describe_failure()
    assert not propagate_back_debug_handle(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert handles_by_name(pair.exported_program)["linear"] is None
    assert propagate_back_debug_handle(
        pair.exported_program, pair.export_graph_id, pair.edge_dialect_program, disable_debug_handle_validation=True
    )
    got = handles_by_name(pair.exported_program)
    assert (got["linear"], got["relu"], got["linear_1"], got["softmax"]) == (1, 0, 3, 4)


def test_second_call_gives_same_answer_and_meta() -> None:
    pair = multi_output_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    args = (pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert propagate_back_debug_handle(*args)
    first = handles_by_name(pair.exported_program)
    assert propagate_back_debug_handle(*args)
    assert handles_by_name(pair.exported_program) == first


def test_plan_does_not_mutate() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    before = handles_by_name(pair.exported_program)
    plan = plan_debug_handle_propagation(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert plan.validated and plan.matched_handles == {1, 2, 3, 4}
    assert handles_by_name(pair.exported_program) == before
    plan.apply()
    assert handles_by_name(pair.exported_program)["softmax"] == 4


def test_edge_node_without_handle_fails_validation_instead_of_crashing() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    relu = next(n for n in pair.edge_dialect_program.graph.nodes if n.name == "relu")
    del relu.meta["debug_handle"]
    plan = plan_debug_handle_propagation(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert plan.unmatched_edge_nodes == (("relu", None),)


def test_conflicting_ancestor_fails_validation_instead_of_crashing() -> None:
    pair = mlp_pair()
    assert pair.exported_program is not None and pair.export_graph_id is not None
    addmm = next(n for n in pair.edge_dialect_program.graph.nodes if n.name == "addmm")
    addmm.meta["debug_handle"] = 99  # permute (same ancestor "linear") keeps 1
    plan = plan_debug_handle_propagation(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert not plan.validated
    assert plan.conflicts and plan.conflicts[0][0][0] == "linear" and plan.conflicts[0][1:] == (1, 99)
    assert "map to several handles" in plan.describe_failure()
    # Validation off: the first handle seen for an ancestor wins.
    assert propagate_back_debug_handle(
        pair.exported_program, pair.export_graph_id, pair.edge_dialect_program, disable_debug_handle_validation=True
    )
    assert handles_by_name(pair.exported_program)["linear"] == 1


def test_control_flow_branches_are_walked_but_not_matched_like_the_reference() -> None:
    class C(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(torch.cond(x.sum() > 0, lambda x: torch.sin(x), lambda x: torch.cos(x), (x,)))

    pair = make_pair(C(), (torch.randn(3),))
    assert pair.exported_program is not None and pair.export_graph_id is not None
    # Branch nodes descend from the branch graphs, whose ids are not export_graph_id.
    plan = plan_debug_handle_propagation(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
    assert {name for name, _ in plan.unmatched_edge_nodes} == {"sin", "cos"}
    branch_nodes = {n.name: h for n, h in plan.assignments.items() if n.name in ("sin", "cos")}
    assert branch_nodes == {"sin": 0, "cos": 0}


def test_ancestor_ids_follow_the_last_source() -> None:
    pair = mlp_pair()
    addmm = next(n for n in pair.edge_dialect_program.graph.nodes if n.name == "addmm")
    ids = ancestor_node_ids(addmm)
    assert ids[-1] == ("linear", str(pair.export_graph_id))
    x = next(n for n in pair.edge_dialect_program.graph.nodes if n.name == "x")
    assert ancestor_node_ids(x) == []  # user input: no provenance


def test_assign_helper_matches_executorch_numbering() -> None:
    pair = mlp_pair()
    assign_debug_handles(pair.edge_dialect_program)  # idempotent helper
    got = handles_by_name(pair.edge_dialect_program)
    assert [got[n] for n in ("permute", "addmm", "relu", "permute_1", "addmm_1", "_softmax")] == [1, 1, 2, 3, 3, 4]


def test_empty_from_node_list_means_no_ancestors() -> None:
    # The reference raises IndexError on an empty provenance list; numdiff treats it as none.
    pair = mlp_pair()
    relu = next(n for n in pair.edge_dialect_program.graph.nodes if n.name == "relu")
    relu.meta["from_node"] = []
    assert ancestor_node_ids(relu) == []
    assert pair.exported_program is not None and pair.export_graph_id is not None
    assert not propagate_back_debug_handle(pair.exported_program, pair.export_graph_id, pair.edge_dialect_program)
