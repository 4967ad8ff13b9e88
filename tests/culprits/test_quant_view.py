"""The quantization view (``find_culprits(float_program=...)``) on a real PT2E int8 oracle artifact.

``tests/fixtures/deeper_quant`` (scripts/make_deeper_fixtures.py): fc2 has an outlier weight column
that only multiplies a dead unit, so the float function is unchanged but fc2's int8 weight step is
~30/127: fc2's quantization costs most.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from numdiff.cli import main
from numdiff.culprits.quant_view import QuantLayer, load_float_program, rank
from numdiff.errors import ProgramArchiveError, UsageError
from numdiff.report import Analysis
from numdiff.analysis.storage import load_analysis
from tests.culprits.helpers import folder, inspector, truth

NAME = "deeper_quant"
FLOAT = folder(NAME) / "float_etrecord.bin"


@pytest.fixture(scope="module")
def view():  # type: ignore[no-untyped-def]
    report = inspector(NAME).find_culprits(float_program=str(FLOAT))
    assert report.quantization is not None
    return report.quantization


def test_sensitive_layer_ranks_first_and_is_the_one_to_keep(view) -> None:  # type: ignore[no-untyped-def]
    sensitive = truth(NAME)["sensitive_layer"]
    first = view.layers[0]
    assert first.module_path == sensitive["module"] and first.layer == f"{sensitive['module']}/{sensitive['op']}"
    assert first.from_runtime and first.deployed_node.startswith("dequantize_per_tensor")
    assert first.snr_db < 20 and all(r.snr_db > 40 for r in view.layers[1:])
    assert view.suggested_keep == [first.layer]
    assert view.estimated_snr_db < view.target_snr_db <= view.suggested_snr_db
    assert {r.layer for r in view.layers} == {"fc1/linear", "fc2/linear", "fc3/linear", "SensitiveMLP/relu",
                                               "SensitiveMLP/sigmoid"}
    assert not view.unmatched
    frame = view.to_dataframe()
    assert list(frame["layer"])[0] == first.layer and bool(frame["keep_in_float"][0])
    assert "keep in higher precision: fc2/linear" in str(view)


def test_exported_program_object_gives_the_same_ranking(view) -> None:  # type: ignore[no-untyped-def]
    program = load_float_program(str(FLOAT))
    again = inspector(NAME).find_culprits(float_program=program).quantization
    assert again is not None
    assert [(r.layer, r.snr_db) for r in again.layers] == [(r.layer, r.snr_db) for r in view.layers]


def test_culprit_rows_are_unchanged_by_the_view() -> None:
    ins = inspector(NAME)
    plain, with_view = ins.find_culprits(), ins.find_culprits(float_program=str(FLOAT))
    assert plain.quantization is None
    assert [(r.node, r.local_gap, r.verdict) for r in plain.rows] == \
        [(r.node, r.local_gap, r.verdict) for r in with_view.rows]


def test_pt2_archive_gives_the_same_ranking(view) -> None:  # type: ignore[no-untyped-def]
    # float_program.pt2: the same float export saved by torch.export.save (read by numdiff.schema.pt2)
    again = inspector(NAME).find_culprits(float_program=str(folder(NAME) / "float_program.pt2")).quantization
    assert again is not None
    assert [r.layer for r in again.layers] == [r.layer for r in view.layers]
    assert [r.snr_db for r in again.layers] == pytest.approx([r.snr_db for r in view.layers], rel=1e-6)
    assert again.suggested_keep == view.suggested_keep


def test_other_objects_and_broken_archives_are_refused(tmp_path: Path) -> None:
    pt2 = tmp_path / "model.pt2"
    pt2.write_bytes(b"PK")
    with pytest.raises(ProgramArchiveError, match=r"model\.pt2.*not a readable zip archive"):
        load_float_program(str(pt2))
    with pytest.raises(UsageError, match="must be an ExportedProgram, a .pt2 archive or the path of an ETRecord, not int"):
        load_float_program(3)


def _layer(name: str, snr: float) -> QuantLayer:
    rel = 10 ** (-snr / 10) if not math.isnan(snr) else math.nan
    return QuantLayer(name, name, name, name, "", snr, rel, True)


def test_greedy_suggestion_rule() -> None:
    layers = [_layer("a", 40.0), _layer("b", 20.0), _layer("c", 25.0), _layer("d", math.nan)]
    view = rank(layers, target_snr_db=30.0)
    assert [r.layer for r in view.layers] == ["b", "c", "a", "d"]
    assert view.suggested_keep == ["b", "c"]  # b alone leaves c (25 dB) below 30 dB
    assert view.suggested_snr_db == pytest.approx(40.0)
    assert view.notes and "without a figure" in view.notes[0]
    assert rank(layers, target_snr_db=10.0).suggested_keep == []


def test_cli_quantization_view(capsys: pytest.CaptureFixture[str]) -> None:
    d = folder(NAME)
    args = ["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin")]
    assert main(args + ["--float-program", str(FLOAT)]) == 0
    out = capsys.readouterr().out
    assert "keep in higher precision: fc2/linear" in out and "keep_in_float" in out
    assert main(args + ["--float-program", str(FLOAT), "--target-snr", "5", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["quantization"]["layers"][0]["layer"] == "fc2/linear" and doc["quantization"]["suggested_keep"] == []
    assert main(args + ["--target-snr", "5"]) == 2
    assert "--target-snr needs --float-program" in capsys.readouterr().err


def test_saved_analysis_keeps_the_view(tmp_path: Path) -> None:
    analysis = Analysis.from_inspector(inspector(NAME), culprit_options={"float_program": str(FLOAT)})
    path = tmp_path / "a.json"
    analysis.save(path)
    loaded = load_analysis(path)
    section = loaded.culprits.quantization
    assert section is not None and section.suggested_keep == ["fc2/linear"]
    assert section.layers[0].layer == "fc2/linear" and section.layers[0].snr_db is not None
    assert Analysis.from_inspector(inspector(NAME)).culprits.quantization is None
