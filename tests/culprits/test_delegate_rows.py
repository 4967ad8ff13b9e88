"""A delegate row is named by backend, call index and the compute ops inside (issue 20, item 5)."""

from __future__ import annotations

from tests.culprits.helpers import report


def test_delegate_culprit_names_its_backend_index_and_linears() -> None:
    rep = report("culprit_xnnpack")
    (culprit,) = rep.culprits
    assert culprit.delegate == ("XnnpackBackend #2: linear_2 (fc3, _culprit_models.py:152 forward: "
                                "return self.fc3(torch.cumsum(h, dim=-1)))")
    assert rep.rows[0].delegate is not None and rep.rows[0].delegate.startswith(
        "XnnpackBackend #1: linear (fc1, _culprit_models.py:151 forward:")
    assert "; linear_1 (fc2, " in rep.rows[0].delegate and rep.rows[1].delegate is None  # cumsum: portable
    text = str(rep)
    assert "culprit: delegate XnnpackBackend #2: linear_2 (fc3, " in text
    assert "taps localize the op inside it: find_culprits(taps=...)" in text


def test_an_int8_delegate_row_is_named_after_its_linears_not_its_last_dequantize() -> None:
    (row,) = report("culprit_clean_int8").rows
    assert row.node.startswith("dequantize_per_tensor")
    assert row.delegate is not None and row.delegate.startswith("XnnpackBackend #1: linear (fc1, ")
    assert [p.split(" ")[0] for p in row.delegate.split(": ", 1)[1].split("; ")] == ["linear", "linear_1", "linear_2"]
    assert "dequantize" not in row.delegate
    assert "delegate" in report("culprit_clean_int8").to_dataframe().columns
