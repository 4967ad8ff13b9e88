"""numdiff diff: per-op deltas, roll-ups, coverage, thresholds and the CI exit status."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from numdiff.cli import main
from numdiff.report import Analysis
from numdiff.analysis.diff import GateThresholds, categorize, diff_analyses
from numdiff.report.diff_render import render_diff


def _changed(a: Analysis, *, snr_drop: float = 0.0, slower: dict[str, float] | None = None) -> Analysis:
    """``a`` with the cumsum layer's SNR lowered and some events' durations scaled."""
    assert a.gap is not None
    rows = [r.model_copy(update={"snr": [v - snr_drop for v in r.snr]}) if r.aot_ops == ["cumsum"] else r
            for r in a.gap.rows]
    blocks = []
    for b in a.profile.blocks:
        events = []
        for e in b.events:
            k = (slower or {}).get(e.name)
            events.append(e if k is None or e.p50 is None else e.model_copy(update={"p50": e.p50 * k}))
        blocks.append(b.model_copy(update={"events": events}))
    return a.model_copy(update={"gap": a.gap.model_copy(update={"rows": rows}),
                                "profile": a.profile.model_copy(update={"blocks": blocks})})


@pytest.mark.parametrize(("names", "category"), [
    ("Convolution (NHWC, F32) IGEMM #1", "convolution"), ("aten.convolution.default", "convolution"),
    ("Fully Connected (NC, QS8) GEMM #1", "matmul/GEMM"), ("aten.bmm.default", "matmul/GEMM"),
    (["dequantize_per_tensor", "linear", "relu"], "matmul/GEMM"), ("aten.native_layer_norm.default", "normalization"),
    ("aten._softmax.default", "normalization"), ("Convert (NC) #1", "elementwise"), ("native_call_add.out", "elementwise"),
    ("aten.expand_copy.default", "data movement"), ("Static Reshape (NC) #1", "data movement"),
    ("aten.cumsum.default", "other"), ("aten.max_pool2d.default", "other"),
])
def test_categories(names: str | list[str], category: str) -> None:
    assert categorize(names) == category


def test_same_run_has_no_regression(example_analysis: Analysis) -> None:
    report = diff_analyses(example_analysis, example_analysis)
    assert report and report.regressions == []
    assert {d.kind for d in report.ops} == {"error", "latency"}
    assert all(d.delta == 0 for d in report.ops)
    delegates = {d["delegate"]: d for d in report.delegates}
    assert 0.5 < delegates["XnnpackBackend"]["base_op_share"] < 1  # cumsum runs outside the delegate
    assert 0 < delegates["XnnpackBackend"]["base_time_share"] < 1


def test_snr_drop_is_a_regression(example_analysis: Analysis) -> None:
    report = diff_analyses(example_analysis, _changed(example_analysis, snr_drop=20))
    assert [(d.kind, d.key) for d in report.regressions] == [("error", "cumsum")]
    assert example_analysis.gap is not None
    snr = next(r.snr[0] for r in example_analysis.gap.rows if r.aot_ops == ["cumsum"])
    assert snr > 140  # so the cap shortens the drop: min(snr - 20, 140) - 140
    assert report.regressions[0].delta == pytest.approx(snr - 20 - 140)
    assert diff_analyses(example_analysis, _changed(example_analysis, snr_drop=20), GateThresholds(max_snr_drop_db=25))  # passes


def test_latency_thresholds_need_percent_and_microseconds(example_analysis: Analysis) -> None:
    # cumsum (6 µs) twice as slow: +100 % and +6 µs: a regression, and so is the run's total
    report = diff_analyses(example_analysis, _changed(example_analysis, slower={"native_call_cumsum.out": 2.0}))
    keys = [d.key for d in report.regressions]
    assert "Execute/native_call_cumsum.out" in keys
    # a 1 µs delegate op twice as slow: +100 % but +1 µs: not a regression
    report = diff_analyses(example_analysis, _changed(example_analysis, slower={"Convert (NC) #1": 2.0}))
    assert report.regressions == []
    grew = [d for d in report.ops if d.key == "Execute/Convert (NC) #1"][0]
    assert grew.delta_pct == pytest.approx(100)


def _in_unit(a: Analysis, unit: str, per_old_unit: float = 1.0) -> Analysis:
    """``a`` with its profile's time unit relabelled ``unit`` and every p50 multiplied by ``per_old_unit``."""
    blocks = [b.model_copy(update={"events": [e if e.p50 is None else e.model_copy(update={"p50": e.p50 * per_old_unit})
                                              for e in b.events]}) for b in a.profile.blocks]
    return a.model_copy(update={"profile": a.profile.model_copy(update={"time_unit": unit, "blocks": blocks})})


def test_latencies_in_different_units_are_compared_in_microseconds(example_analysis: Analysis) -> None:
    unit = example_analysis.profile.time_unit
    assert unit == "ms"
    same_in_us = _in_unit(example_analysis, "us", 1000.0)
    report = diff_analyses(example_analysis, same_in_us)
    latency = [d for d in report.ops if d.kind == "latency"]
    assert latency and report.regressions == [] and report.notes == []
    assert all(d.delta == pytest.approx(0, abs=1e-6) for d in latency)
    assert report.totals["base_us"] == pytest.approx(report.totals["new_us"])


@pytest.mark.parametrize("sides", [("cycles", "cycles"), ("ms", "cycles"), ("cycles", "ms")])
def test_cycles_are_not_compared_as_time(example_analysis: Analysis, sides: tuple[str, str]) -> None:
    # a profile in cycles has no fixed duration: 1000x the "time" in cycles is no latency regression
    base = example_analysis if sides[0] == "ms" else _in_unit(example_analysis, "cycles")
    new = _in_unit(example_analysis, sides[1], 1000.0) if sides[1] == "cycles" else example_analysis
    report = diff_analyses(base, new)
    assert report and report.regressions == []
    assert not [d for d in report.ops if d.kind == "latency"]
    assert [d for d in report.ops if d.kind == "error"]  # the error rows are still compared
    assert report.totals["base_us"] is None and report.totals["regression"] is False
    assert len(report.notes) == 1 and "latencies not compared" in report.notes[0] and "cycles" in report.notes[0]
    assert all(d["base_us"] is None and d["base_time_share"] is None for d in report.delegates)
    text = render_diff(report)
    assert "latencies not compared" in text
    assert json.loads(render_diff(report, "json"))["notes"] == report.notes


def test_real_xnnpack_rollup(xnnpack_analysis: Analysis) -> None:
    report = diff_analyses(xnnpack_analysis, xnnpack_analysis)
    cats = {c["category"] for c in report.categories}
    assert {"convolution", "matmul/GEMM", "data movement"} <= cats
    assert [d["delegate"] for d in report.delegates] == ["XnnpackBackend"]


def test_cli_gate_and_formats(example_analysis: Analysis, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    example_analysis.save(base)
    _changed(example_analysis, snr_drop=20, slower={"native_call_cumsum.out": 3.0}).save(new)

    assert main(["diff", str(base), str(base)]) == 0
    assert "no regression" in capsys.readouterr().out

    assert main(["diff", str(base), str(new), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("### numdiff diff: ❌ 3 regressions") and "| error   | cumsum" in md
    assert "#### By op category" in md and "#### By delegate" in md

    assert main(["diff", str(base), str(new), "--format", "json", "--max-snr-drop-db", "50",
                 "--max-latency-increase-pct", "500"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == 0 and data["thresholds"]["max_snr_drop_db"] == 50


def test_cli_rejects_bad_thresholds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "a.json", "b.json", "--max-snr-drop-db", "-1"]) == 2
    assert "--max-snr-drop-db is -1.0, not a finite number >= 0" in capsys.readouterr().err


def test_cli_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").write_text("[]")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 3
    assert "holds a JSON list" in capsys.readouterr().err


def test_table_as_a_person_reads_it(example_analysis: Analysis, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Whole text of the first sections: every column has a header (the regressions table had a blank last
    one), the totals say their verdict in a column of their own, and a change carries its sign."""
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    example_analysis.save(base)
    _changed(example_analysis, snr_drop=20, slower={"native_call_cumsum.out": 3.0}).save(new)
    assert main(["diff", str(base), str(new)]) == 1
    out = capsys.readouterr().out
    assert out[:out.index("By op category")] == """\
numdiff diff: 3 regressions (3 layers and 8 timed ops compared)
base: device=host, build=1 · new: device=host, build=1
thresholds: SNR drop > 3 dB (SNR capped at 140 dB); latency +10% and at least +5 µs; at least 50% of the base's ops matched

Total time in top-level events
base      new       change              verdict
--------  --------  ------------------  ----------
33.49 µs  45.83 µs  +12.34 µs (+36.8%)  REGRESSION

Regressions
kind     op                              category    base     new       change
-------  ------------------------------  ----------  -------  --------  -------------------
error    cumsum                          other       140 dB   130.9 dB  -9.09 dB
latency  Execute/native_call_cumsum.out  other       6.17 µs  18.51 µs  +12.34 µs (+200.0%)

"""
    lines = out.splitlines()
    for header, rule in zip(lines, lines[1:]):  # no table has an empty header cell
        if rule.startswith("---"):
            runs = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
            assert all(header[a:b].strip() for a, b in runs), (header, rule)
    assert main(["diff", str(base), str(new), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "| kind    | op " in md and "| verdict    |" in md and "|  |" not in md and "| ok         |" in md


def test_report_read_back_from_json_prints_the_same(example_analysis: Analysis) -> None:
    """numdiff runs compare prints the server's JSON answer as numdiff diff prints the report itself:
    reading the JSON back gives the same table and Markdown, infinite and missing figures included."""
    from numdiff.report.diff_render import report_from_json

    report = diff_analyses(example_analysis, _changed(example_analysis, snr_drop=20,
                                                      slower={"native_call_cumsum.out": 3.0}))
    data = json.loads(render_diff(report, "json"))
    assert report_from_json(data) == report
    back = report_from_json(data)
    for fmt in ("table", "markdown"):
        assert render_diff(back, fmt, title="numdiff runs compare: run 2 against run 1") == render_diff(
            report, fmt).replace("numdiff diff", "numdiff runs compare: run 2 against run 1", 1)
    # a server writes null where the report had inf or nan; the table shows a dash there
    nulls = json.loads(json.dumps(data).replace('"inf"', "null").replace('"nan"', "null"))
    assert render_diff(report_from_json(nulls)).startswith("numdiff diff: 3 regressions")


def _on_other_inputs(a: Analysis) -> Analysis:
    return a.model_copy(update={"culprits": a.culprits.model_copy(update={"inputs_in_doubt": ["x"]})})


def test_a_run_that_may_have_used_other_inputs_gates_no_error(example_analysis: Analysis, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Its gaps compare the device with a reference run on other inputs: a regression of 20 dB in one op
    drowns in that, so the error rows are not compared and the gate fails saying why (latency still is)."""
    new = _on_other_inputs(_changed(example_analysis, snr_drop=20))
    report = diff_analyses(example_analysis, new)
    assert not report and {d.kind for d in report.ops} == {"latency"}
    assert report.error_not_compared is not None and report.error_not_compared.startswith(
        "error not compared: the new run's graph input(s) x may not be the ETRecord's representative inputs")
    assert "--inputs-are-representative" in report.error_not_compared
    assert report.coverage_failures == []  # the timed ops were all matched: nothing else to say
    both = diff_analyses(_on_other_inputs(example_analysis), _on_other_inputs(example_analysis))
    assert not both and both.error_not_compared is not None
    assert "the base run's graph input(s) x and the new run's graph input(s) x" in both.error_not_compared
    assert render_diff(report).splitlines()[0] == ("numdiff diff: FAILED, layers not compared: a run may have used "
                                                   "other inputs (0 layers and 8 timed ops compared)")
    assert "error_not_compared" in json.loads(render_diff(report, "json"))
    base_path, new_path = tmp_path / "base.json", tmp_path / "new.json"
    example_analysis.save(base_path)
    new.save(new_path)
    assert main(["diff", str(base_path), str(new_path)]) == 1
    assert "error not compared: the new run's graph input(s) x" in " ".join(capsys.readouterr().out.split())


def test_in_a_program_of_several_methods_only_the_doubted_methods_layers_are_left_out(
        example_analysis: Analysis) -> None:
    """A run whose decode method may have used other inputs: its encode layers are still gated."""
    assert example_analysis.gap is not None
    rows = [r.model_copy(update={"method": "encode" if r.index == 0 else "decode"}) for r in example_analysis.gap.rows]
    two = example_analysis.model_copy(update={"gap": example_analysis.gap.model_copy(update={"rows": rows})})
    doubted = two.model_copy(update={"culprits": two.culprits.model_copy(update={
        "inputs_in_doubt": ["x (method decode)"], "methods_in_doubt": ["decode"]})})
    report = diff_analyses(two, doubted)
    assert [d.key.split(":")[0] for d in report.ops if d.kind == "error"] == ["encode"]
    assert report.error_not_compared is not None and report.error_not_compared.startswith(
        "error of method(s) decode not compared: the new run's graph input(s) x (method decode)")
    assert not report and report.coverage_failures == []


def test_gaps_on_different_reference_inputs_are_compared_with_a_note() -> None:
    """A run analysed on its own inputs against one declared to have used the representative ones: each gap
    is its device's distance from the model on the inputs named; the diff says which, as a note."""
    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    files = (d / "etdump.etdp", d / "etrecord.bin", d / "debug_buffer.bin")
    own = Analysis.from_files(*files, culprit_options={"step_inputs": d / "run_inputs.pt"})
    declared = Analysis.from_files(*files, culprit_options={"inputs_are_representative": True})
    report = diff_analyses(own, declared)
    assert ("the base's gap ran the reference graph on the run's own inputs (step_inputs), the new's on the "
            "ETRecord's representative inputs: each layer's error is its device's distance from the model on the "
            "inputs named, which holds only if the run did use them") in report.notes
    assert report.notes[-1] in render_diff(report)
    assert not any("reference graph" in n for n in diff_analyses(own, own).notes)
