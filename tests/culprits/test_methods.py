"""find_culprits on a multi-method program (real oracle artifact: tests/fixtures/realistic/real_two_methods).

encode = tanh(Linear(8,4)) on (2,8), forward = sigmoid(Linear(4,8)) on (2,4); the ETDump ran encode
then forward on portable kernels. The ETRecord's representative inputs are encode's; forward ran on
its export example inputs. Before, find_culprits replayed every event on forward's ATen graph with
encode's inputs and raised CaptureError "mat1 and mat2 shapes cannot be multiplied (2x8 and 4x8)
... Check that the inputs match the graph's placeholders", a false hint. Now each method is
replayed on its own graph and the inputs that fit it (numdiff.gap.methods.plan_methods, as
calculate_numeric_gap does), rows numbered on and tagged with their method.
"""

from __future__ import annotations

import math
import warnings

import pytest

from numdiff import Inspector
from numdiff.cli import main
from numdiff.culprits import CulpritReport
from numdiff.errors import MissingDataError, UsageError
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "realistic" / "real_two_methods"
ARGS = ["culprits", "--etdump", str(FOLDER / "etdump.etdp"), "--etrecord", str(FOLDER / "etrecord.bin"),
        "--debug-buffer", str(FOLDER / "debug_buffer.bin")]
FORWARD_NOTE = ("method 'forward': 2 rows on 'exported_program', inputs from the method's example inputs (no "
                "representative input fits it)")
ENCODE_NOTE = ("method 'encode': 2 rows on 'edge_dialect_exported_program/encode', inputs from the ETRecord's "
               "representative inputs")
HEADLINE = ("find_culprits (SNRComparator on exported_program (forward), edge_dialect_exported_program/encode "
            "(encode)): 4 rows, 0 culprits: every local error is within its expected noise")


def _inspector() -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=FOLDER / "etdump.etdp", etrecord=FOLDER / "etrecord.bin",
                         debug_buffer_path=FOLDER / "debug_buffer.bin")


@pytest.fixture(scope="module")
def report() -> CulpritReport:
    return _inspector().find_culprits("SNR")


def test_each_method_is_replayed_on_its_own_graph_and_inputs(report: CulpritReport) -> None:
    assert [(r.index, r.method, r.node, r.runtime_ops[0]) for r in report.rows] == [
        (0, "forward", "linear", "native_call_addmm.out"), (1, "forward", "sigmoid", "native_call_sigmoid.out"),
        (2, "encode", "aten_addmm_default", "native_call_addmm.out"), (3, "encode", "aten_tanh_default",
                                                                        "native_call_tanh.out")]
    # encode's rows are numbered on from forward's, and each consumes its own method's row
    assert [r.producers for r in report.rows] == [(), (0,), (), (2,)]
    assert report.rows[1].input_sources == ("linear: runtime output (row 0)",)
    assert report.rows[3].input_sources == ("aten_addmm_default: runtime output (row 2)",)
    # graph inputs come from the inputs that fit each method, and the notes say which
    assert report.rows[0].input_sources == ("code: the method's example inputs (no representative input fits it)",)
    assert report.rows[2].input_sources == ("x: the ETRecord's representative inputs",)
    assert report.rows[2].note is not None and report.rows[2].note.startswith(
        "graph inputs x taken from the ETRecord's representative inputs (input_source=aot")
    # fp32 portable kernels: rounding only, so no culprit and every verdict ok
    assert not report.culprits and {r.verdict.value for r in report.rows} == {"ok"}
    assert all(r.local_noise_units < 1 for r in report.rows)
    assert report.graph_name == "exported_program (forward), edge_dialect_exported_program/encode (encode)"
    assert report.notes[:2] == (FORWARD_NOTE, ENCODE_NOTE)
    assert report.notes[2].startswith("[encode] 1 debug handle(s) are shared by several nodes")


def test_accumulated_error_is_the_gaps_on_the_same_inputs(report: CulpritReport) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gap = _inspector().calculate_numeric_gap("SNR")
    assert list(gap["method"]) == [r.method for r in report.rows]
    for row, value in zip(report.rows, gap["gap"]):
        assert row.accumulated_gap == value[0] or (math.isinf(value[0]) and math.isinf(row.accumulated_gap))


def test_tables_carry_the_method(report: CulpritReport) -> None:
    frame = report.to_dataframe()
    assert list(frame.columns)[-1] == "method" and list(frame["method"]) == ["forward"] * 2 + ["encode"] * 2
    matching = report.matching_dataframe()
    assert set(matching["method"]) == {"forward", "encode"}
    assert list(matching[matching["status"] == "matched"]["detail"])[:2] == ["row 0; transform identity",
                                                                             "row 1; transform identity"]
    assert "row 2; transform identity" in list(matching[matching["method"] == "encode"]["detail"])
    lines = str(report).splitlines()
    assert lines[:3] == [HEADLINE, FORWARD_NOTE, ENCODE_NOTE]
    assert lines[3].startswith("worst accumulated row: aten_tanh_default in method encode (142.2), verdict ok")


def test_single_method_rows_have_no_method() -> None:
    from tests.culprits.helpers import report as single

    rep = single("culprit_clean_fp32")
    assert {r.method for r in rep.rows} == {None} and "method" not in rep.to_dataframe().columns
    assert "method" not in rep.matching_dataframe().columns


def test_a_method_left_out_gets_a_note_and_the_headline_says_so() -> None:
    rep = _inspector().find_culprits("SNR", reference_graph="exported_program")
    assert [r.method for r in rep.rows] == ["forward", "forward"]
    assert rep.notes[:2] == (FORWARD_NOTE, "method 'encode': not compared (the ETRecord's ATen exported_program is "
                             "forward's; pass reference_graph='edge_dialect_exported_program' to compare every "
                             "method)")
    assert str(rep).splitlines()[0] == (
        "find_culprits (SNRComparator on exported_program (forward)): 2 rows, 0 culprits: every local error is "
        "within its expected noise; not compared: method encode (see the notes)")


def test_a_method_with_no_fitting_inputs_is_said_never_a_crash() -> None:
    import torch

    inspector = _inspector()
    etrecord = inspector._etrecord
    assert etrecord is not None
    etrecord._representative_inputs = [(torch.zeros(3, 3),)]  # fits neither method
    etrecord.edge_dialect_program["encode"].example_inputs = None  # type: ignore[attr-defined]
    rep = inspector.find_culprits("SNR")
    assert [r.method for r in rep.rows] == ["forward", "forward"]
    assert rep.notes[0] == "method 'encode': not compared (no representative or example input fits its program)"
    assert "not compared: method encode" in str(rep).splitlines()[0]
    etrecord.edge_dialect_program["forward"].example_inputs = None  # type: ignore[attr-defined]
    with pytest.raises(MissingDataError, match=r"none of the ETRecord's methods \['encode', 'forward'\] could be "
                       r"compared: .*\nRecord representative inputs for the methods you run"):
        inspector.find_culprits("SNR")


@pytest.mark.parametrize(("options", "what"), [
    ({"float_program": FOLDER / "etrecord.bin"}, "the quantization view (float_program=, CLI --float-program)"),
    ({"decode_steps": True}, "decode steps (decode_steps=, CLI --decode-steps)"),
    ({"step_inputs": [()]}, "the run's own inputs (step_inputs=, CLI --step-inputs; declare "
                            "inputs_are_representative=True instead if it used the representative ones)"),
    ({"taps": FOLDER / "taps.json", "tap_outputs": []}, "taps (taps=, CLI --taps)"),
])
def test_views_of_one_method_say_so(options: dict[str, object], what: str) -> None:
    with pytest.raises(UsageError) as info:
        _inspector().find_culprits("SNR", **options)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"{what}: supported on a program of one method only, and this ETRecord holds several (the ETDump ran "
        "encode, forward)\nLeave that option out to compare every method, or export the method to examine as a "
        "program of its own and pass its ETRecord, ETDump and debug buffer.")


def test_cli_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ARGS) == 0
    assert capsys.readouterr().out == f"""\
{HEADLINE}

method    aot_ops                       local_gap    accumulated_gap  verdict    is_culprit
--------  --------------------------  -----------  -----------------  ---------  ------------
forward   linear                            146.6              146.6  ok
forward   sigmoid                           inf                inf    ok
encode    aten_permute_copy_default,        151.2              151.2  ok
          aten_addmm_default
encode    aten_tanh_default                 143.1              142.2  ok
(input_source, amplification, runtime_ops, module_path and source_line left out to fit 100 columns:
a wider terminal, --width or --format csv shows them)

{_wrapped(FORWARD_NOTE)}
{_wrapped(ENCODE_NOTE)}
{_wrapped("worst accumulated row: aten_tanh_default in method encode (142.2), verdict ok: its local error is "
          "within its expected noise")}
"""


def _wrapped(sentence: str) -> str:
    """A sentence after the table as the CLI prints it at 100 columns: wrapped, continuations indented."""
    import textwrap

    return "\n".join(textwrap.wrap(sentence, 100, subsequent_indent="  ", break_on_hyphens=False,
                                   break_long_words=False))


def test_cli_json_and_csv_rows_name_their_method(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main([*ARGS, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["headline"] == HEADLINE and [r["method"] for r in doc["rows"]] == ["forward"] * 2 + ["encode"] * 2
    assert main([*ARGS, "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(",note,method") and [line.rsplit(",", 1)[1] for line in lines[1:]] == \
        ["forward", "forward", "encode", "encode"]


def test_cli_view_on_several_methods_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--decode-steps"]) == 2
    err = capsys.readouterr().err
    assert "decode steps (decode_steps=, CLI --decode-steps): supported on a program " \
           "of one method only" in err and "Leave that option out to compare every method" in err


def test_per_run_figures_cover_every_methods_rows(report: CulpritReport) -> None:
    """A method that ran twice with its own values gets run 1's figures; a method that ran once has
    none for run 1 (NaN, noted), never another method's numbers in its place."""
    from dataclasses import replace

    from numdiff.culprits.find import _runs_of_every_method
    from numdiff.culprits.report import RunFigures

    forward = replace(report, rows=report.rows[:2], runs=())
    encode_rows = report.rows[2:]
    encode = replace(report, rows=encode_rows, runs=(
        RunFigures(0, tuple(r.local_gap for r in encode_rows), tuple(r.local_noise_units for r in encode_rows), ()),
        RunFigures(1, (math.nan, 120.0), (math.nan, 0.5), (3,), "1 row(s) consume graph inputs, ...")))
    runs = _runs_of_every_method([("forward", forward), ("encode", encode)])
    assert [f.run for f in runs] == [0, 1]
    assert runs[0].local_gap == tuple(r.local_gap for r in report.rows) and runs[0].note is None
    assert all(math.isnan(v) for v in runs[1].local_gap[:3]) and runs[1].local_gap[3] == 120.0
    assert runs[1].culprits == (3,)
    assert runs[1].note == ("method 'forward' logged no values of its own in run 1; method 'encode': 1 row(s) "
                            "consume graph inputs, ...")
    assert _runs_of_every_method([("forward", forward), ("encode", replace(encode, runs=()))]) == ()


def test_culprits_are_named_with_their_method_and_judged_within_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Limits below these rounding-only rows make every op beyond noise: each method's first op is
    its own culprit (its producers are in its method, none in the other), the ops after it inherit."""
    from numdiff.testing import assert_no_culprits

    tight = ["--threshold", "default:ok=0.001", "--threshold", "default:expected=0.002", "--threshold",
             "default:broken=0.01"]
    assert main([*ARGS, *tight]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("find_culprits (SNRComparator on exported_program (forward), edge_dialect_exported_program/"
                      "encode (encode)): 4 rows, 2 culprits: linear (dec) in method forward, aten_permute_copy_default, "
                      "aten_addmm_default (model.enc) in method encode; 3 rows broken; assuming the run's x (method "
                      "encode) = the representative one(s)")
    assert "culprit: linear (handle (1,), broken) module dec in method forward" in out
    assert "culprit: aten_permute_copy_default, aten_addmm_default (handle (1,), broken) module model.enc in" in out
    assert "  method encode" in out  # wrapped at the width, indented under its line
    with pytest.raises(AssertionError) as info:
        assert_no_culprits(_inspector(), thresholds={"default": {"ok": 0.001, "expected": 0.002, "broken": 0.01}})
    lines = str(info.value).splitlines()
    assert lines[0].startswith("2 culprit op(s)")
    assert lines[1].startswith("- linear in method forward [broken] local 146.6")
    assert lines[2].startswith("- aten_permute_copy_default, aten_addmm_default in method encode [broken] local 151.2")


def test_graph_inputs_in_doubt_in_one_method_reach_the_headline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A method whose run may have used other inputs than the representative ones: the report of the
    whole program names the input with its method and prints the note under the first line (the
    notes of each method are prefixed with ``[method]``, so the headline must not look for them by text)."""
    import dataclasses

    from numdiff.culprits import find

    analyse = find._analyse

    def doubting(*args: object, **kwargs: object) -> CulpritReport:
        report = analyse(*args, **kwargs)  # type: ignore[arg-type]
        return dataclasses.replace(report, inputs_in_doubt=("x",)) if report.graph_name.endswith("/encode") else report

    monkeypatch.setattr(find, "_analyse", doubting)
    rep = _inspector().find_culprits("SNR")
    assert rep.inputs_in_doubt == ("x (method encode)",)
    lines = str(rep).splitlines()
    assert any(line.startswith("graph input(s) x (method encode): no op that reads them agrees") for line in lines)
