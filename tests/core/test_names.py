"""Short row names for tables and summary lines (numdiff._core.names): one definition for every view."""

from __future__ import annotations

from numdiff._core.names import delegate_call, row_title
from numdiff.analysis.records import CulpritRow as SavedRow


def test_a_delegate_call_is_its_backend_and_index_whatever_its_description_holds() -> None:
    assert delegate_call("XnnpackBackend #12: linear (fc1, model.py:3 forward: return a #2: b)") == "XnnpackBackend #12"
    assert delegate_call("odd text") == "delegate" and delegate_call(None) is None


def test_a_long_group_is_its_first_and_last_ops_with_the_count() -> None:
    ops = [f"op_{i}" for i in range(326)]
    assert row_title(ops) == "op_0 … op_325 (326 ops)"
    assert row_title(ops[:4]) == "op_0, op_1, op_2, op_3"
    assert row_title(ops[:1], "VulkanBackend #3: no convolution, matmul or linear inside") == "VulkanBackend #3: op_0"


def test_a_saved_row_and_the_service_summary_use_the_same_title() -> None:
    from numdiff.report.verdicts import run_summary
    from tests.report._synthetic import synthetic_analysis

    analysis = synthetic_analysis(n=8)
    rows = [SavedRow(aot_ops=[f"op_{k}" for k in range(9)], is_culprit=True, delegate="XnnpackBackend #1: linear (fc1)"),
            SavedRow(aot_ops=["add"], is_culprit=True)]
    analysis = analysis.model_copy(update={"culprits": analysis.culprits.model_copy(update={"available": True,
                                                                                          "rows": rows})})
    assert rows[0].title == "XnnpackBackend #1: op_0 … op_8 (9 ops)"
    assert run_summary(analysis).culprit == rows[0].title and run_summary(analysis).culprits == 2


def test_a_long_list_of_modules_is_shortened_like_ops() -> None:
    from numdiff._core.names import abbreviated

    modules = ["stem.0"] + [f"layers.{i}.conv1.0" for i in range(19)] + ["fc"]
    assert abbreviated(modules, "modules") == "stem.0 … fc (21 modules)"
    assert abbreviated(modules[:3], "modules") == "stem.0, layers.0.conv1.0, layers.1.conv1.0"
