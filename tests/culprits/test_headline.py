"""One headline (issue 20, item 6, the culprits part): the first line of ``numdiff culprits`` and of
``str(report)`` sums up every view that ran, so that no view below contradicts it.

Real oracle fixtures: ``culprit_two`` (two planted linears), ``culprit_xnnpack`` (a delegate
culprit), ``culprit_clean_fp32`` (clean), ``deeper_taps`` (the culprit inside the delegate is
fc2; before, the first line said only "1 culprit" while the taps view named linear_1),
``deeper_decode`` (step 0 is clean, step 4 diverges; before, the first line said "0 culprits"),
``deeper_quant`` (the quantization view's suggestion).
"""

from __future__ import annotations

import pytest

from numdiff.cli import main
from numdiff.culprits.report import headline
from tests.culprits.helpers import ON_REPRESENTATIVE, folder, report

DECODE = ("find_culprits (SNRComparator on exported_program): 61 rows, 0 culprits in step 0; decode diverges at "
          "step 4 (culprit index_select; index_select_1)")
TAPS = ("find_culprits (SNRComparator on exported_program): 1 row, 1 culprit: delegate XnnpackBackend #1; 1 row "
        "broken; inside delegates (taps): culprit linear_1 (fc2)")
FIRST_LINES = {
    "culprit_two": ("find_culprits (SNRComparator on exported_program): 6 rows, 2 culprits: linear (left), "
                    "linear_1 (right); 2 rows broken"),
    "culprit_xnnpack": ("find_culprits (SNRComparator on exported_program): 3 rows, 1 culprit: delegate "
                        "XnnpackBackend #2; 1 row broken"),
    "culprit_clean_fp32": ("find_culprits (SNRComparator on exported_program): 5 rows, 0 culprits: every local "
                           "error is within its expected noise"),
}


def _cli(name: str, *extra: str) -> list[str]:
    d = folder(name)
    return ["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin"), *extra]


@pytest.mark.parametrize("name", sorted(FIRST_LINES))
def test_first_line_of_the_report_and_the_cli(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    rep = report(name)
    assert headline(rep) == str(rep).splitlines()[0] == FIRST_LINES[name]
    flag = ["--inputs-are-representative"] if name in ON_REPRESENTATIVE else []
    assert main(_cli(name, *flag)) == (1 if rep.culprits else 0)
    assert capsys.readouterr().out.splitlines()[0] == FIRST_LINES[name]


def test_decode_headline_names_the_divergent_step_never_no_culprit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_cli("deeper_decode", "--step-inputs", str(folder("deeper_decode") / "step_inputs.pt"))) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == DECODE
    assert "within its expected noise" not in out.splitlines()[0]


def test_taps_headline_names_the_op_inside_the_delegate(capsys: pytest.CaptureFixture[str]) -> None:
    d = folder("deeper_taps")
    assert main(_cli("deeper_taps", "--taps", str(d / "taps.json"), "--tap-outputs", str(d / "tap_outputs.pt"))) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == TAPS
    assert "culprit(s): linear_1 (fc2)" in out  # the view below says the same


def test_quantization_headline_says_what_to_keep(capsys: pytest.CaptureFixture[str]) -> None:
    d = folder("deeper_quant")
    assert main(_cli("deeper_quant", "--float-program", str(d / "float_etrecord.bin"))) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "find_culprits (SNRComparator on exported_program): 10 rows, 0 culprits: every local error is within its "
        "expected noise; quantization: estimated output SNR 9.07 dB (target 30 dB), keep fc2/linear in higher precision")


def test_json_carries_the_headline(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(_cli("culprit_two", "--format", "json", "--inputs-are-representative")) == 1
    assert json.loads(capsys.readouterr().out)["headline"] == FIRST_LINES["culprit_two"]


def test_the_worst_rows_reason_matches_its_numbers() -> None:
    """A new user read "its error is inherited" under cumsum at 150.9 dB local and accumulated alike:
    the reason says inherited only when the replay is clearly better than the table's number."""
    import warnings

    from numdiff import Inspector
    from numdiff.examples import example_files

    lines = {}
    for name in ("planted_culprit", "quantized_mlp"):
        files = example_files(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = Inspector(etdump_path=files.etdump, etrecord=files.etrecord,
                               debug_buffer_path=files.debug_buffer).find_culprits("SNR")
        lines[name] = next(line for line in str(report).splitlines() if line.startswith("worst accumulated row"))
    assert lines["planted_culprit"].endswith("linear_2 (6.513), verdict ok: its error is inherited from its inputs")
    assert lines["quantized_mlp"].endswith("verdict ok: its local error is within its expected noise")
