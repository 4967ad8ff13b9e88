"""``numdiff culprits`` and ``assert_no_culprits``."""

from __future__ import annotations

import json

import pytest

from numdiff._core.advice import INPUTS_HINT
from numdiff.cli import main
from numdiff.testing import assert_no_culprits
from tests.culprits.helpers import folder, inspector


def _args(name: str) -> list[str]:
    d = folder(name)
    return ["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin")]


def test_cli_table_names_the_culprit_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args("culprit_two") + ["--inputs-are-representative"]) == 1
    out = capsys.readouterr().out
    assert "2 culprits" in out and out.count("CULPRIT") == 2 and "_culprit_models.py:70" in out


def test_ops_reading_the_input_all_badly_wrong_are_not_judged_unless_the_run_used_the_representative_inputs(
        capsys: pytest.CaptureFixture[str]) -> None:
    """culprit_two: both ops that read the graph input are planted and unrelated to their replays. That is
    also what a run on another input looks like, so without --inputs-are-representative neither is judged,
    the first line says so, and the exit status is 0 (no culprit) while assert_no_culprits fails."""
    assert main(_args("culprit_two")) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("find_culprits (SNRComparator on exported_program): 6 rows, 0 culprits: every "
                                   "judged local error is within its expected noise; 2 rows not judged (inputs not "
                                   "logged)")
    assert "CULPRIT" not in out
    rep = inspector("culprit_two").find_culprits("SNR")
    judged = {r.node: r for r in rep.rows}
    for node in ("linear", "linear_1"):
        assert judged[node].verdict.value == "not-judged"
        assert judged[node].note.startswith("not judged: this op reads graph input(s) x, which the runtime did not log, "
                                            "and its output is unrelated to its replay")
        assert INPUTS_HINT in judged[node].note  # the one wording every tool uses
    assert any("this run may have used other inputs" in n for n in rep.notes) and rep.inputs_in_doubt == ("x",)
    with pytest.raises(AssertionError, match=r"2 op\(s\) not judged: they read graph inputs"):
        assert_no_culprits(inspector("culprit_two"))


def test_cli_exits_0_on_a_clean_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args("culprit_clean_int8") + ["--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("aot_debug_handle,aot_ops") and len(lines) == 2


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args("culprit_softmax") + ["--format", "json", "--metric", "mse"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["metric"] == "MSEComparator" and doc["culprits"] == [0]
    assert doc["rows"][0]["verdict"] in ("suspicious", "broken") and doc["rows"][0]["aot_ops"] == ["linear"]


def test_cli_threshold_override(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args("culprit_mlp") + ["--threshold", "linear:expected=1e7", "--threshold", "linear:broken=1e8"]) == 0


def test_cli_bad_threshold_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args("culprit_mlp") + ["--threshold", "linear-expected"]) != 0
    assert "OP:FIELD=VALUE" in capsys.readouterr().err


def test_assert_no_culprits_lists_each_culprit() -> None:
    with pytest.raises(AssertionError) as info:
        assert_no_culprits(inspector("culprit_two"), inputs_are_representative=True)
    text = str(info.value)
    assert text.startswith("2 culprit op(s)")
    assert "- linear [broken] local" in text and "accumulated" in text and "_culprit_models.py:70" in text
    assert "- linear_1 [broken]" in text and "_culprit_models.py:71" in text


def test_assert_no_culprits_passes_and_ignores() -> None:
    assert len(assert_no_culprits(inspector("culprit_clean_fp32"))) == 5
    assert_no_culprits(inspector("culprit_mlp"), ignore_ops=["linear_1"])
