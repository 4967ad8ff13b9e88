"""The analysis, its diff and numdiff doctor on a multi-method program (real oracle artifact:
tests/fixtures/realistic/real_two_methods: encode = tanh(Linear(8,4)), forward = sigmoid(Linear(4,8)),
the ETDump ran both). Before, building the analysis replayed both methods' events on forward's graph
with encode's inputs and stopped with a CaptureError ("mat1 and mat2 shapes cannot be multiplied")."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from numdiff.analysis.diff import diff_analyses
from numdiff.analysis.doctor import diagnose_files
from numdiff.cli import main
from numdiff.report import Analysis
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "realistic" / "real_two_methods"
FILES = (FOLDER / "etdump.etdp", FOLDER / "etrecord.bin", FOLDER / "debug_buffer.bin")


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Analysis.from_files(*FILES)


def test_gap_rows_are_each_methods_with_the_gaps_numbers(analysis: Analysis) -> None:
    from numdiff import Inspector

    gap = analysis.gap
    assert gap is not None
    assert [(r.index, r.method, r.aot_ops[-1]) for r in gap.rows] == [
        (0, "forward", "linear"), (1, "forward", "sigmoid"), (2, "encode", "aten_addmm_default"),
        (3, "encode", "aten_tanh_default")]
    assert gap.graph_name == "exported_program (forward), edge_dialect_exported_program/encode (encode)"
    assert gap.notes[:2] == [
        "method 'forward': 2 rows on 'exported_program', inputs from the method's example inputs (no representative "
        "input fits it)",
        "method 'encode': 2 rows on 'edge_dialect_exported_program/encode', inputs from the ETRecord's representative "
        "inputs"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = Inspector(etdump_path=FILES[0], etrecord=FILES[1], debug_buffer_path=FILES[2]).calculate_numeric_gap("MSE")
    assert [r.mse for r in gap.rows] == [list(g) for g in df["gap"]]


def test_culprit_rows_carry_their_method(analysis: Analysis) -> None:
    culprits = analysis.culprits
    assert culprits.available and culprits.headline is not None
    assert culprits.headline.startswith("find_culprits (SNRComparator on exported_program (forward), "
                                        "edge_dialect_exported_program/encode (encode)): 4 rows, 0 culprits")
    assert [(r.method, r.aot_ops[-1], r.verdict) for r in culprits.rows] == [
        ("forward", "linear", "ok"), ("forward", "sigmoid", "ok"), ("encode", "aten_addmm_default", "ok"),
        ("encode", "aten_tanh_default", "ok")]


def test_saved_and_loaded(analysis: Analysis, tmp_path: Path) -> None:
    analysis.save(tmp_path / "a.json")
    again = Analysis.load(tmp_path / "a.json")
    assert again.gap is not None and [r.method for r in again.gap.rows] == ["forward", "forward", "encode", "encode"]


def test_diff_keys_ops_by_method(analysis: Analysis) -> None:
    result = diff_analyses(analysis, analysis)
    keys = sorted(d.key for d in result.ops if d.kind == "error")
    assert keys == ["encode: aten_permute_copy_default + aten_addmm_default", "encode: aten_tanh_default",
                    "forward: linear", "forward: sigmoid"]
    assert not result.regressions


def test_doctor_checks_every_method(capsys: pytest.CaptureFixture[str]) -> None:
    found = {f.check: f for f in diagnose_files(*FILES)}
    assert {c: f.level for c, f in found.items() if f.level != "ok"} == {}
    assert found["runs"].detail == "Default: 2 run(s), Execute (encode): 1 run(s), Execute (forward): 1 run(s)"
    assert found["files belong together"].detail.startswith("4 compared ops replayed on the runtime's logged inputs")
    assert main(["doctor", "--etdump", str(FILES[0]), "--etrecord", str(FILES[1]), "--debug-buffer",
                 str(FILES[2])]) == 0
    assert "OK    files belong together: 4 compared ops" in capsys.readouterr().out
