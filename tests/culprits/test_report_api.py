"""The find_culprits report: columns, order, consistency with the gap, roll-ups, matching, summary."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from numdiff.comparators import NumericalComparatorBase
from numdiff.culprits import Thresholds
from numdiff.errors import UsageError
from tests.culprits.helpers import inspector, report

COLUMNS = {"aot_ops", "runtime_ops", "local_gap", "accumulated_gap", "amplification", "verdict", "is_culprit",
           "stack_traces", "module_path", "source_line", "input_source", "latency"}


def test_dataframe_has_the_issue_columns_one_row_per_pair_in_execution_order() -> None:
    rep = report("culprit_mlp")
    df = rep.to_dataframe()
    assert COLUMNS <= set(df.columns)
    assert list(df["aot_ops"]) == [["linear"], ["relu"], ["linear_1"], ["tanh"], ["linear_2"]]
    assert list(df["is_culprit"]) == [False, False, True, False, False]
    assert df.loc[2, "verdict"] == "broken" and df.loc[4, "verdict"] == "ok"
    assert all(isinstance(t, dict) and t for t in df["stack_traces"])
    assert df.loc[0, "input_source"] == "aot" and df.loc[1, "input_source"] == "runtime"
    assert all(lat is not None and lat >= 0 for lat in df["latency"])


def test_accumulated_gap_is_what_the_gap_report_says() -> None:
    ins = inspector("culprit_residual")
    gap = ins.numeric_gap_report("SNR").to_dataframe()
    rep = report("culprit_residual")
    by_ops = {tuple(ops): g[0] for ops, g in zip(gap["aot_ops"], gap["gap"])}
    for row in rep.rows:
        assert row.accumulated_gap == pytest.approx(by_ops[tuple(row.aot_ops)], rel=1e-9)


def test_local_equals_accumulated_at_the_culprit_and_downstream_local_is_clean() -> None:
    rep = report("culprit_mlp")
    culprit = rep.culprits[0]
    assert culprit.local_gap == pytest.approx(culprit.accumulated_gap, abs=0.01)  # its inputs were clean
    after = rep.rows[culprit.index + 1:]
    assert all(r.local_gap > 100 and r.accumulated_gap < 20 for r in after)
    assert rep.rows[culprit.index + 1].producers == (culprit.index,)


def test_summary_names_the_culprit_with_its_source_line() -> None:
    text = str(report("culprit_residual"))
    assert "1 culprit" in text and "linear_2" in text
    assert "_culprit_models.py:58" in text and "self.branch2(" in text


def test_by_module_rolls_up_to_enclosing_paths() -> None:
    roll = report("culprit_attention").by_module().set_index("module_path")
    assert roll.loc["proj", "culprits"] == 1 and roll.loc["qkv", "culprits"] == 0
    assert roll.loc["proj", "worst_local_noise_units"] > 1000


def test_matching_accounts_for_every_aot_node_and_runtime_output() -> None:
    rep = report("culprit_xnnpack")
    m = rep.matching_dataframe()
    aot = m[m["side"] == "aot"]
    assert set(aot["status"]) <= {"matched", "replayed", "unmatched"}
    assert {"linear", "relu", "linear_1", "cumsum", "linear_2"} <= set(aot["name"])
    assert (aot.set_index("name").loc["linear", "status"]) == "replayed"
    runtime = m[m["side"] == "runtime"]
    assert len(runtime) == 3 and set(runtime["status"]) == {"matched"}


def test_multi_output_rows_are_element_wise() -> None:
    rep = report("multi_output")
    assert any(r.element is not None for r in rep.rows)
    assert not rep.culprits


class _HalfMaxAbs(NumericalComparatorBase):
    """A custom comparator: half the largest absolute difference."""

    def element_compare(self, a: Any, b: Any) -> float:
        return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max()) / 2


def test_custom_comparator_scores_both_columns() -> None:
    rep = inspector("culprit_mlp").find_culprits(_HalfMaxAbs())
    assert rep.metric == "_HalfMaxAbs" and not rep.higher_is_better
    culprit = rep.culprits[0]
    assert culprit.local_gap > 0.01 and rep.rows[culprit.index + 1].local_gap < 1e-5
    worst = rep.worst_accumulated()
    assert worst is not None and worst.index >= culprit.index


def test_thresholds_per_op_type_change_the_verdict() -> None:
    rep = inspector("culprit_mlp").find_culprits("SNR", thresholds={"linear": {"expected": 1e7, "broken": 1e8}})
    assert rep.culprits == []
    assert rep.rows[2].verdict.value == "expected-noise"
    strict = inspector("culprit_clean_fp32").find_culprits("SNR", thresholds=Thresholds(0.0, 0.0, 0.0))
    assert any(r.is_culprit for r in strict.rows)  # nothing is exact enough for zero tolerance


@pytest.mark.parametrize("bad, match", [
    ({"linear": {"bogus": 1}}, "unknown field"),
    ({"linear": 3}, "must be a Thresholds or a dict"),
    ("strict", "must be a Thresholds or a mapping"),
    ({"default": {"ok": 10, "expected": 1}}, "ok <= expected <= broken"),
])
def test_bad_thresholds_are_usage_errors(bad: Any, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        inspector("culprit_mlp").find_culprits("SNR", thresholds=bad)


def test_amplification_is_nan_with_a_reason_when_inputs_are_graph_inputs() -> None:
    first = report("culprit_mlp").rows[0]
    assert math.isnan(first.amplification) and first.note is not None and "graph inputs" in first.note


def test_runs_with_different_inputs_get_per_run_figures() -> None:
    rep = report("different_inputs")
    assert [f.run for f in rep.runs] == [0, 1] and rep.culprits == []
    df = rep.per_run_dataframe()
    assert len(df) == 2 * len(rep) and set(df["run"]) == {0, 1}
    run1 = df[df["run"] == 1].reset_index(drop=True)
    assert math.isnan(run1.loc[0, "local_noise_units"])  # consumes the graph input: not logged for run 1
    assert "graph inputs" in run1.loc[0, "note"]
    assert run1.loc[2, "local_noise_units"] < 1  # linear_1 replayed on run 1's own relu output
    assert "2 runs logged different values" in str(rep)
    assert report("culprit_mlp").runs == ()


def test_the_collector_is_paused_during_the_replay_and_restored_after(monkeypatch: pytest.MonkeyPatch) -> None:
    # full collections walking torch's objects cost ~0.1 s on the benchmark case; the replay makes no cycles
    import gc

    from numdiff.culprits import _scorer

    seen: list[bool] = []
    original = _scorer.Scorer.on_paired

    def watched(self: _scorer.Scorer, *args: Any, **kwargs: Any) -> object:
        seen.append(gc.isenabled())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(_scorer.Scorer, "on_paired", watched)
    assert gc.isenabled()
    inspector("culprit_mlp").find_culprits("SNR")
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:  # a caller who disabled it keeps it disabled
        inspector("culprit_mlp").find_culprits("SNR")
        assert not gc.isenabled()
    finally:
        gc.enable()
