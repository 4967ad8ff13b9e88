"""numdiff.align: runtime collection, overlap merge, reference pairing and the fuller alignment."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from numdiff.align import (
    MatchKind,
    NoteKind,
    RuntimeOutput,
    ShapeRelation,
    align_intermediate_outputs,
    collect_runtime_outputs,
    find_op_names,
    map_runtime_aot_intermediate_outputs,
    merge_overlapping_outputs,
    merge_runtime_overlapping_debug_handles,
    own_delegate_ids,
    pair_outputs,
    shape_relation,
)


def _codec() -> ModuleType:
    name = "numdiff_tests_oracle_codec"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "comparators" / "oracle_codec.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


codec = _codec()
ORACLE = codec.ORACLE


def event(name: str, handles: Any, iid: int | None, data: Any, *, op_types: list[str] | None = None,
          num_outputs: int = 1, delegated: bool = False, backend: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        name=name, op_types=["op"] if op_types is None else op_types, debug_handles=handles,
        _instruction_id=iid, debug_data=data, num_outputs=num_outputs,
        is_delegated_op=delegated, delegate_backend_name=backend,
    )


def runtime(handle: tuple[int, ...], data: Any, num_outputs: int = 1, iid: int = 0) -> dict[tuple[int, ...], RuntimeOutput]:
    return {handle: RuntimeOutput(handle, iid, "op", data, num_outputs)}


# ----------------------------------------------------------------------------- oracle replay
@pytest.mark.parametrize("case", ORACLE["merge"], ids=lambda c: str(len(c["input"])))
def test_merge_matches_reference(case: dict[str, Any]) -> None:
    given = {tuple(h): (iid, label, num) for h, iid, label, num in case["input"]}
    got = merge_runtime_overlapping_debug_handles(given)
    assert [[list(h), *v] for h, v in got.items()] == case["result"]


_MAP_RAISES_TO_NOTE = {
    "TypeError": NoteKind.RUNTIME_NOT_SEQUENCE,
    "IndexError": NoteKind.RUNTIME_TOO_SHORT,
    "ValueError": NoteKind.AMBIGUOUS_COMPONENT,
}


@pytest.mark.parametrize("case", ORACLE["map"], ids=lambda c: c["name"])
def test_map_matches_reference(case: dict[str, Any]) -> None:
    aot = codec.handles(case["aot"])
    rt = {tuple(h): (codec.dec(d), n) for h, d, n in case["runtime"]}
    if "raises" in case:
        # The reference raises for the whole mapping; numdiff skips the pair with a note.
        report = pair_outputs(aot, {h: RuntimeOutput(h, None, None, d, n) for h, (d, n) in rt.items()})
        assert _MAP_RAISES_TO_NOTE[case["raises"]] in {note.kind for note in report.notes}
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = map_runtime_aot_intermediate_outputs(aot, rt)
    encoded = [[list(k[0]), codec.enc(k[1]), list(v[0]), codec.enc(v[1])] for k, v in got.items()]
    assert encoded == case["result"]


@pytest.mark.parametrize("case", ORACLE["collect"], ids=lambda c: c["name"])
def test_collect_matches_reference(case: dict[str, Any]) -> None:
    events = [SimpleNamespace(**{**e, "debug_data": codec.dec(e["debug_data"])}) for e in case["events"]]
    outputs, op_names = collect_runtime_outputs(events)
    assert [[list(h), codec.enc(o.data), o.num_outputs] for h, o in outputs.items()] == case["result"]["outputs"]
    assert [[list(h), v] for h, v in op_names.items()] == case["result"]["op_names"]


# ----------------------------------------------------------------------------- collection
def test_collect_skips_operator_call_and_events_without_op_types() -> None:
    outputs, names = collect_runtime_outputs([
        event("OPERATOR_CALL", 0, 0, [torch.ones(1)]),
        event("no_types", 1, 1, [torch.ones(1)], op_types=[]),
        event("add", 2, 2, [torch.ones(1)]),
    ])
    assert list(outputs) == [(2,)] and names == {(2,): ["add"]}


def test_collect_largest_instruction_id_wins_even_when_seen_first() -> None:
    outputs, names = collect_runtime_outputs([event("late", 3, 9, ["late"]), event("early", 3, 2, ["early"])])
    assert outputs[(3,)].data == ["late"] and outputs[(3,)].instruction_id == 9 and names[(3,)] == ["late"]


def test_collect_merges_overlapping_handles_but_keeps_op_names_unmerged() -> None:
    outputs, names = collect_runtime_outputs([event("a", [1, 2], 1, ["a"]), event("b", [2, 3], 2, ["b"])])
    assert list(outputs) == [(1, 2, 3)] and outputs[(1, 2, 3)].data == ["b"]
    assert names == {(1, 2): ["a"], (2, 3): ["b"]}


def test_collect_drops_delegate_call_covered_by_inner_events_of_same_backend() -> None:
    outputs, _ = collect_runtime_outputs([
        event("DELEGATE_CALL", [1, 2], 4, ["whole"], backend="X"),
        event("inner", 2, 4, ["inner"], delegated=True, backend="X"),
        event("DELEGATE_CALL", [5, 6], 5, ["other"], backend="Y"),
    ])
    assert {h: o.data for h, o in outputs.items()} == {(2,): ["inner"], (5, 6): ["other"]}


def _convnext_calls() -> list[SimpleNamespace]:
    """Three XNNPACK calls of an int8 ConvNeXt stage (handles as its ETDump logs them, shortened): the
    second and third also hold the id of the residual the previous one computed (31, 42), logged by the
    dequantize the partitioner copied into them; a layer norm runs between the calls."""
    return [
        event("DELEGATE_CALL", [2, 4, 20, 24, 24, 31, 31, 31], 3, ["first"], backend="X", num_outputs=1),
        event("ln", 34, 4, ["ln"]),
        event("DELEGATE_CALL", [6, 8, 31, 35, 35, 42, 42, 42], 6, ["second"], backend="X", num_outputs=1),
        event("DELEGATE_CALL", [10, 12, 42, 46, 46, 53], 8, ["third"], backend="X", num_outputs=1),
    ]


def test_collect_merges_delegate_calls_sharing_a_duplicated_id_as_the_reference_does() -> None:
    outputs, _ = collect_runtime_outputs(_convnext_calls())
    assert {o.data[0] for o in outputs.values()} == {"ln", "third"}  # the first two calls' data is lost


def test_split_delegates_keeps_each_call_under_its_own_ids() -> None:
    calls = _convnext_calls()
    assert own_delegate_ids(calls) == {(6, 8, 31, 35, 35, 42, 42, 42): (6, 8, 35, 35, 42, 42, 42),
                                       (10, 12, 42, 46, 46, 53): (10, 12, 46, 46, 53)}
    # another run of the same calls changes nothing; a call with no id of its own keeps its handle
    again = calls + [event("DELEGATE_CALL", [2, 4, 20, 24, 24, 31, 31, 31], 3, ["first"], backend="X")]
    assert own_delegate_ids(again) == own_delegate_ids(calls)
    assert own_delegate_ids([event("DELEGATE_CALL", [1, 2], 1, ["a"]), event("DELEGATE_CALL", [2], 2, ["b"])]) == {}
    # One source op decomposed across partitions (SDPA: each call holds its id for several nodes): kept merged
    sdpa = [event("DELEGATE_CALL", [1, 4, 10], 1, ["a"]), event("DELEGATE_CALL", [7, 10, 10, 10], 2, ["b"]),
            event("DELEGATE_CALL", [10, 10, 11, 12], 3, ["c"])]
    assert own_delegate_ids(sdpa) == {}
    # A call that shares an id with a kernel's event is merged with it anyway: it and the calls reading
    # what it computes are left as the reference has them (splitting those paired an attention block wrongly)
    shared = [event("DELEGATE_CALL", [5, 27, 27, 27], 1, ["a"]), event("expand", 5, 2, ["e"]),
              event("DELEGATE_CALL", [3, 27, 29, 29], 3, ["b"])]
    assert own_delegate_ids(shared) == {}
    outputs, names = collect_runtime_outputs(calls, split_delegates=True)
    assert {h: o.data for h, o in outputs.items()} == {
        (2, 4, 20, 24, 24, 31, 31, 31): ["first"], (34,): ["ln"], (6, 8, 35, 35, 42, 42, 42): ["second"],
        (10, 12, 46, 46, 53): ["third"]}
    assert names[(10, 12, 46, 46, 53)] == ["DELEGATE_CALL"]


def test_collect_warns_and_skips_event_without_handle() -> None:
    with pytest.warns(UserWarning, match=r"skipped 1 event\(s\) .* \['broken'\]"):
        outputs, _ = collect_runtime_outputs([event("broken", None, 1, ["x"]), event("ok", 1, 2, ["y"])])
    assert list(outputs) == [(1,)]


# ----------------------------------------------------------------------------- merge
def test_merge_keeps_last_newer_overlap_and_notes_it() -> None:
    outputs = [RuntimeOutput((1,), 10, "a", "v10"), RuntimeOutput((2,), 5, "b", "v5"), RuntimeOutput((1, 2), 3, "c", "v3")]
    merged, notes = merge_overlapping_outputs(outputs)
    # The reference keeps the last overlapping newer value (instruction 5), not the newest (10).
    assert [(m.handle, m.data) for m in merged] == [((1, 2), "v5")]
    assert [n.kind for n in notes] == [NoteKind.MERGED_VALUE_NOT_LATEST]


def test_merge_handle_order_older_first() -> None:
    merged, notes = merge_overlapping_outputs([RuntimeOutput((5, 1), 2, "a", 0), RuntimeOutput((1, 7), 1, "b", 1)])
    assert merged[0].handle == (7, 5, 1) and merged[0].data == 0 and notes == []


# ----------------------------------------------------------------------------- pairing
def test_sole_value_list_pairs_directly() -> None:
    aot = torch.ones(2)
    report = pair_outputs({(0,): aot}, runtime((0,), [torch.zeros(2)]))
    (pair,) = report.pairs
    assert pair.match is MatchKind.SOLE and pair.aot_output is aot and report.notes == ()


def test_delegate_debug_data_holds_inputs_then_output_shape_picks_output() -> None:
    out = torch.zeros(2, 2)
    report = pair_outputs({(5,): torch.ones(2, 2)}, runtime((4, 5), [torch.ones(4), out]))
    (pair,) = report.pairs
    assert pair.runtime_output is out and pair.match is MatchKind.SHAPE and pair.aot_handle == (4, 5)


def test_dtype_breaks_shape_tie() -> None:
    out = torch.zeros(2, 3)
    report = pair_outputs({(7,): torch.ones(2, 3)}, runtime((7,), [torch.zeros(2, 3, dtype=torch.bool), out]))
    assert report.pairs[0].runtime_output is out and report.pairs[0].match is MatchKind.SHAPE_DTYPE


def test_fallback_to_last_is_noted_and_warned() -> None:
    last = torch.zeros(2, 2)
    aot = {(5,): torch.ones(2, 2)}
    report = pair_outputs(aot, runtime((4, 5), [torch.ones(2, 2), last]))
    assert report.pairs[0].match is MatchKind.FALLBACK_LAST and report.pairs[0].runtime_output is last
    assert report.counts() == {"fallback_match": 1}
    with pytest.warns(UserWarning, match="1 fallback_match"):
        map_runtime_aot_intermediate_outputs(aot, {(4, 5): ([torch.ones(2, 2), last], 1)})


def test_multi_output_delegate_pairs_by_position_from_end() -> None:
    a, b = torch.ones(3), torch.ones(2)
    ra, rb = torch.zeros(3), torch.zeros(2)
    report = pair_outputs({(1,): a, (2,): b}, runtime((1, 2), [ra, rb], num_outputs=2))
    got = [(p.aot_output is x, p.runtime_output is y, p.match, p.output_index) for p, x, y in zip(report.pairs, [b, a], [rb, ra])]
    assert got == [(True, True, MatchKind.POSITION, 0), (True, True, MatchKind.POSITION, 1)]


def test_num_outputs_larger_than_handle_is_noted_not_raised() -> None:
    report = pair_outputs({(5,): torch.ones(2)}, runtime((5,), [torch.ones(2), torch.ones(2)], num_outputs=2))
    assert len(report.pairs) == 1 and report.counts() == {"runtime_too_short": 1}


def test_two_runtime_handles_in_one_group_is_noted_not_raised() -> None:
    rt = {(1,): RuntimeOutput((1,), 1, "a", [torch.ones(1)]), (2,): RuntimeOutput((2,), 2, "b", [torch.ones(1)])}
    report = pair_outputs({(1, 2): torch.ones(1), (3,): torch.ones(1)}, rt)
    assert report.pairs == () and report.counts() == {"ambiguous_component": 1}


def test_aot_handles_not_inside_runtime_handle_are_noted() -> None:
    report = pair_outputs({(7, 1): torch.ones(1), (2,): torch.ones(1)}, runtime((1, 2), [torch.ones(1)]))
    assert report.pairs == () and report.counts() == {"handles_not_subset": 1}


def test_reference_mode_keeps_sequences_whole() -> None:
    values, indices = torch.ones(2), torch.zeros(2, dtype=torch.long)
    report = pair_outputs({(3,): (values, indices)}, runtime((3,), [values + 1, indices]))
    (pair,) = report.pairs
    assert pair.match is MatchKind.SEQUENCE and isinstance(pair.aot_output, tuple) and len(pair.runtime_output) == 2


# ----------------------------------------------------------------------------- fuller alignment
def test_full_alignment_splits_sequence_by_position() -> None:
    values, indices = torch.ones(2), torch.zeros(2, dtype=torch.long)
    rv, ri = values + 1, indices + 1
    report = align_intermediate_outputs({(3,): (values, indices)}, runtime((3,), [rv, ri]))
    assert [(p.element_index, p.match, p.runtime_output is r) for p, r in zip(report.pairs, [rv, ri])] == [
        (0, MatchKind.ELEMENT_POSITION, True),
        (1, MatchKind.ELEMENT_POSITION, True),
    ]


def test_full_alignment_matches_elements_by_shape_and_dtype_and_notes_the_rest() -> None:
    mean, var = torch.ones(3), torch.ones(3, dtype=torch.float64)
    only = torch.zeros(3)
    report = align_intermediate_outputs({(3,): (var, mean)}, runtime((3,), [only]))
    (pair,) = report.pairs
    assert pair.element_index == 1 and pair.runtime_output is only and pair.match is MatchKind.ELEMENT_SHAPE_DTYPE
    assert report.counts() == {"element_unmatched": 1}


def test_full_alignment_leaves_elements_of_one_shape_unpaired_when_the_runtime_logged_one_value() -> None:
    # unbind lowered to one squeeze_copy per element: the handle keeps only the last one's value
    # (v); q and k have its shape and dtype too, so none of the three can be told to be it.
    q, k, v = torch.zeros(2, 4), torch.ones(2, 4), torch.full((2, 4), 2.0)
    report = align_intermediate_outputs({(11,): (q, k, v)}, runtime((11,), [v.clone()]))
    assert report.pairs == () and report.counts() == {"element_unmatched": 3}
    assert "3 elements have its shape and dtype" in report.notes[0].detail


def test_full_alignment_accepts_single_runtime_value_for_sequence() -> None:
    report = align_intermediate_outputs({(3,): [torch.ones(2)]}, runtime((3,), torch.zeros(2)))
    assert len(report.pairs) == 1 and report.pairs[0].match is MatchKind.ELEMENT_POSITION


def test_full_alignment_reports_view_only_shape_difference() -> None:
    report = align_intermediate_outputs({(5,): torch.ones(1, 8, 32)}, runtime((5,), [torch.ones(1, 8, 2, 16)]))
    assert report.pairs[0].shape_relation is ShapeRelation.RESHAPE


@pytest.mark.parametrize(
    ("a", "b", "relation"),
    [
        (torch.ones(2, 3), torch.ones(2, 3), ShapeRelation.SAME),
        (torch.ones(2, 3), torch.ones(6), ShapeRelation.RESHAPE),
        (3.0, torch.ones(1), ShapeRelation.RESHAPE),
        (torch.ones(2), torch.ones(3), ShapeRelation.MISMATCH),
    ],
)
def test_shape_relation(a: Any, b: Any, relation: ShapeRelation) -> None:
    assert shape_relation(a, b) is relation


def test_find_op_names_subset_semantics() -> None:
    names = {(1,): ["conv"], (1, 2): ["linear"], (3,): ["relu"]}
    assert find_op_names((1, 2), names) == ["conv", "linear"]
    assert find_op_names((), names) == []


# ----------------------------------------------------------------------------- real artifacts
REAL = torch.load(Path(__file__).parents[1] / "data" / "align_real.pt", weights_only=True)


@pytest.mark.parametrize("fixture", sorted(REAL))
def test_real_fixture_alignment_and_gaps_match_reference(fixture: str) -> None:
    from numdiff.comparators import get_comparator

    case = REAL[fixture]
    outputs, names = collect_runtime_outputs(SimpleNamespace(**e) for e in case["events"])
    assert list(outputs) == case["runtime_keys"] and names == case["runtime_names"]
    report = pair_outputs(case["aot"], outputs)
    if isinstance(case["mapping_handles"], str):
        # The reference raises IndexError: the runtime logged no intermediate values.
        assert report.pairs == () and set(report.counts()) == {"no_runtime_data"}
        return
    mapping = report.to_reference_mapping()
    assert [(k[0], v[0]) for k, v in mapping.items()] == case["mapping_handles"]
    for metric, expected in case["gaps"].items():
        table = get_comparator(metric).compare_to_table(mapping, case["aot_names"], names)
        if "raises" in expected:
            # attention_view: the reference raises for the whole table on a view-only shape change.
            assert all(row.matched for row in table.rows) and table.counts().get("reshaped", 0) > 0
            continue
        got = [(r.aot_handle, r.aot_ops, r.runtime_ops, r.runtime_handle, r.gap) for r in table.rows]
        assert got == expected["rows"]


def test_real_multi_output_ops_get_element_rows_in_full_alignment() -> None:
    from numdiff.comparators import MSEComparator

    case = REAL["multi_output"]
    outputs, names = collect_runtime_outputs(SimpleNamespace(**e) for e in case["events"])
    reference_rows = MSEComparator().compare_to_table(pair_outputs(case["aot"], outputs).to_reference_mapping(), case["aot_names"], names)
    full = MSEComparator().compare_aligned(align_intermediate_outputs(case["aot"], outputs), case["aot_names"], names)
    assert reference_rows.counts() == {"sequence_skipped": 5}
    assert len(full) == len(reference_rows) + 10 and full.notes == ()
    multi = {tuple(r.aot_ops) for r in full.rows if r.match is MatchKind.ELEMENT_POSITION}
    assert {("topk",), ("var_mean",), ("max_pool2d_with_indices",)} <= multi


def test_runtime_output_without_aot_counterpart_is_noted() -> None:
    rt = {(1,): RuntimeOutput((1,), 1, "add", [torch.ones(1)]), (9,): RuntimeOutput((9,), 2, "_to_dim_order_copy", [torch.ones(1)])}
    report = pair_outputs({(1,): torch.ones(1), (4,): torch.ones(1)}, rt)
    assert len(report.pairs) == 1 and report.counts() == {"no_aot_output": 1}
    assert "_to_dim_order_copy" in report.notes[0].detail and report.notes[0].runtime_handle == (9,)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.lists(st.integers(0, 6), max_size=3).map(tuple), st.lists(st.sampled_from("abc"), max_size=2),
                       max_size=8),
       st.lists(st.integers(0, 7), max_size=4).map(tuple))
def test_op_name_index_answers_as_the_scan(names: dict[tuple[int, ...], list[str]], target: tuple[int, ...]) -> None:
    """find_op_names over an OpNameIndex: the same names in the same order, without scanning every handle."""
    from numdiff.align import OpNameIndex

    index = OpNameIndex(names)
    assert find_op_names(target, index) == find_op_names(target, names)
    assert dict(index) == names and len(index) == len(names)
