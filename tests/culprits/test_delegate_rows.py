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


def test_a_rows_title_is_one_short_line_whatever_the_group_size() -> None:
    """The real-size Llama on int8 XNNPACK printed 592 lines, most of them one row's 326 op names."""
    from dataclasses import replace

    rep = report("culprit_clean_int8")
    (row,) = rep.rows
    assert row.delegate_call == "XnnpackBackend #1"
    # its 18 ops: the linears, relu and sigmoid between 13 quantize and dequantize ops
    assert row.title == "XnnpackBackend #1: linear … linear_2 (18 ops)"
    group = replace(row, delegate=None, aot_ops=[f"op_{i}" for i in range(326)])
    assert group.title == "op_0 … op_325 (326 ops)" and group.delegate_call is None
    assert replace(group, aot_ops=["add", "relu"]).title == "add, relu"
    assert replace(group, aot_ops=row.aot_ops[:10]).title == "linear, relu, linear_1 (+7 q/dq)"
    assert len(row.aot_ops) > 4 and row.aot_ops == rep.to_dataframe()["aot_ops"][0]  # the API keeps every name


def test_the_cli_table_names_a_delegate_row_by_its_call(capsys: object) -> None:
    from numdiff.cli import main
    from tests.culprits.helpers import folder

    d = folder("culprit_clean_int8")
    main(["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
          "--debug-buffer", str(d / "debug_buffer.bin"), "--width", "200"])
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    (row,) = report("culprit_clean_int8").rows
    assert any(line.startswith("XnnpackBackend #1: ") for line in out.splitlines())
    assert f"({len(row.aot_ops)} ops)" in " ".join(out.split()) and ", ".join(row.aot_ops[:2]) not in out
