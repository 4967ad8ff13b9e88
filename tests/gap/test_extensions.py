"""Beyond the drop-in table: custom comparators through the Inspector, program outputs, the full report."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff import Inspector, NumericalComparatorBase, compare_results
from tests.conftest import artifact, fixture_names, load_expected


def _inspector(name: str) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=artifact(name, "etdump"), etrecord=artifact(name, "etrecord"),
                         debug_buffer_path=artifact(name, "debug_buffer"))


class DequantizingMaxAbs(NumericalComparatorBase):
    """Max abs error after turning int8 runtime outputs into floats with a fixed scale."""

    def __init__(self) -> None:
        super().__init__()
        self.seen_pairs = 0

    def preprocessing(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
        self.seen_pairs += len(mapping)

        def fix(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.dtype == torch.int8:
                return value.double() * 0.05
            return value

        return {aot: (handle, fix(out)) for aot, (handle, out) in mapping.items()}

    def element_compare(self, a: Any, b: Any) -> float:
        return float((torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max())


def test_a_user_comparator_plugs_into_the_inspector() -> None:
    insp = _inspector("pt2e_quant_portable")
    comparator = DequantizingMaxAbs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = insp.calculate_numeric_gap(comparator)
    assert comparator.inspector is insp
    assert comparator.seen_pairs == len(df) == len(load_expected("pt2e_quant_portable")["gap"]["default/SNR"]["rows"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        builtin = insp.calculate_numeric_gap("max_abs")
    # the runtime side is already dequantized at these handles, so the custom metric equals max-abs
    assert [g[0] for g in df["gap"]] == pytest.approx([g[0] for g in builtin["gap"]])


def test_full_report_includes_multi_output_ops_and_says_how_they_matched() -> None:
    insp = _inspector("multi_output")
    report = insp.numeric_gap_report("SNR")
    df = report.to_dataframe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drop_in = insp.calculate_numeric_gap("SNR")
    assert len(df) > len(drop_in)
    multi = df[df["aot_ops"].map(lambda ops: any("topk" in op or "var_mean" in op for op in ops))]
    assert len(multi) >= 2 and set(multi["match"]) <= {"element_position", "element_shape_dtype"}
    assert {"stacktraces", "matched", "match", "note"} <= set(df.columns)


def test_full_report_answers_where_the_reference_aborts() -> None:
    report = _inspector("attention_view").numeric_gap_report("SNR")
    notes = [n for n in report.to_dataframe()["note"] if isinstance(n, str)]
    assert any("reshape" in n for n in notes)


@pytest.mark.parametrize("name", [n for n in fixture_names() if "compare_results" in load_expected(n)])
def test_compare_results_matches_the_reference_on_program_outputs(name: str) -> None:
    insp = _inspector(name)
    for index, expected in load_expected(name)["compare_results"].items():
        block = insp.event_blocks[int(index)]
        assert block.name == expected["block_name"]
        got = compare_results(block.reference_output, block.run_output)
        for metric, values in expected["result"].items():
            assert len(got[metric]) == len(values)
            for a, b in zip(got[metric], values, strict=True):
                assert (math.isinf(a) and a == b) or a == pytest.approx(b, abs=0.011), (metric, a, b)


def test_compare_results_plots_only_to_the_given_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    a = torch.tensor([1.0, 2.0, 3.0])
    out = tmp_path / "plots" / "metrics.png"
    out.parent.mkdir()
    compare_results([a], [a + 0.1], plot_path=out)
    assert out.is_file() and out.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots"]
