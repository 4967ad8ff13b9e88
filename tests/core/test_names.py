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


def test_every_view_names_a_delegate_rows_modules_the_same_way() -> None:
    """numdiff gap, the saved analysis (the HTML report and the service) and numdiff culprits: the
    modules of the delegate's linears, never the model's root module its dequantizes belong to."""
    import warnings

    from numdiff import Inspector
    from numdiff.examples import example_files
    from numdiff.report import Analysis
    from numdiff.report.gap_table import gap_summary

    files = example_files("quantized_mlp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = Analysis.from_files(files.etdump, str(files.etrecord), files.debug_buffer)
        inspector = Inspector(etdump_path=files.etdump, etrecord=str(files.etrecord), debug_buffer_path=files.debug_buffer)
        gap = inspector.numeric_gap_report("SNR")
        culprits = inspector.find_culprits("SNR")
    assert analysis.gap is not None
    assert [r.module for r in analysis.gap.rows] == ["fc1, fc2", "fc3", "SplitQuantMLP"]
    assert list(gap_summary(gap.to_dataframe(), gap.module_paths)["module"]) == ["fc1, fc2", "fc3", "SplitQuantMLP"]
    assert [r.module_path for r in culprits.rows if r.delegate is not None] == ["fc1, fc2", "fc3"]


def test_edge_cases_of_titles() -> None:
    from numdiff._core.names import group_modules, is_qdq_name, without_qdq

    assert row_title([], "XnnpackBackend #3: no convolution, matmul or linear inside") == "XnnpackBackend #3"
    only_qdq = ["dequantize_per_tensor", "quantize_per_tensor_1", "dequantize_per_tensor_2", "quantize_per_tensor_3",
                "dequantize_per_tensor_4"]
    assert row_title(only_qdq) == "dequantize_per_tensor … dequantize_per_tensor_4 (5 ops)"
    assert without_qdq(only_qdq) == only_qdq and group_modules(only_qdq, {}) is None
    assert is_qdq_name("dequantize_per_channel_group_2") and is_qdq_name("aten_quantize_affine_default")
    assert not is_qdq_name("embedding") and not is_qdq_name("linear_3")
