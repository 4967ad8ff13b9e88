"""Inside delegates (``find_culprits(taps=..., tap_outputs=...)``) on a real oracle artifact.

``tests/fixtures/deeper_taps`` (scripts/make_deeper_fixtures.py): an fp32 MLP lowered entirely
into one XNNPACK delegate; the program that ran is a twin (fc2 weights changed) exported with
FULL_TENSOR taps on every op, its tap specs saved by numdiff.export_helpers.taps. Without taps the
delegate is one row; with them the planted op inside it is named.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff import Inspector
from numdiff.cli import main
from numdiff.comparators import get_comparator
from numdiff.culprits import CulpritReport, find_culprits
from numdiff.culprits.taps import load_sidecar
from numdiff.errors import InputError, MismatchedArtifactsError, UsageError
from numdiff.export_helpers.taps import write_tap_sidecar
from numdiff.report import Analysis
from numdiff.analysis.storage import load_analysis
from tests.culprits.helpers import folder, inspector, truth

NAME = "deeper_taps"
TAPS = folder(NAME) / "taps.json"
OUTPUTS = folder(NAME) / "tap_outputs.pt"


def test_culprit_inside_the_delegate_is_named() -> None:
    report = inspector(NAME).find_culprits(taps=str(TAPS), tap_outputs=str(OUTPUTS))
    assert len(report.rows) == 1 and len(report.rows[0].aot_ops) == truth(NAME)["taps"]  # one delegate row
    view = report.inside_delegates
    assert view is not None and len(view.rows) == truth(NAME)["taps"]
    assert [r.node for r in view.culprits] == truth(NAME)["planted_aot_ops"]
    culprit = view.culprits[0]
    assert culprit.module_path == "fc2" and culprit.verdict.beyond_noise and culprit.producers == ("relu",)
    assert all(r.verdict.value == "ok" for r in view.rows if r.node != culprit.node)
    assert "inside delegates: 5 tapped ops, culprit(s): linear_1 (fc2)" in str(report)
    assert list(view.to_dataframe()["is_culprit"]) == [r.node == culprit.node for r in view.rows]


def _library_call(ins: Inspector, **kwargs: Any) -> CulpritReport:
    events = [ev for block in ins.event_blocks for ev in block.events]
    return find_culprits(ins._etrecord, events, get_comparator("SNR"), **kwargs)


def test_tapped_values_default_to_the_program_outputs_the_etdump_logged() -> None:
    # The 1.5.1 runtime logged the tapped method's outputs (run_output): they are the tap values.
    ins = inspector(NAME)
    logged = next(b.run_output for b in ins.event_blocks if b.run_output)
    given = torch.load(OUTPUTS, weights_only=True)
    assert len(logged) == len(given) and all(torch.equal(a, b) for a, b in zip(logged, given))
    through_inspector = ins.find_culprits(taps=str(TAPS)).inside_delegates
    assert through_inspector is not None and [r.node for r in through_inspector.culprits] == truth(NAME)["planted_aot_ops"]
    view = _library_call(ins, taps=str(TAPS), run_outputs=logged).inside_delegates
    assert view is not None and view.source.startswith("the ETDump's logged program outputs")
    assert [r.node for r in view.culprits] == truth(NAME)["planted_aot_ops"]
    with pytest.raises(UsageError, match=r"ETDump holds no program outputs.*\n.*tap_outputs \(CLI: --tap-outputs\)"):
        _library_call(ins, taps=str(TAPS), run_outputs=[])
    with pytest.raises(MismatchedArtifactsError, match=r"but the ETDump's logged program outputs .* holds 1 values"):
        _library_call(ins, taps=str(TAPS), run_outputs=logged[:1])


def test_outputs_as_a_list_and_mismatches(tmp_path: Path) -> None:
    outputs = torch.load(OUTPUTS, weights_only=True)
    ins = inspector(NAME)
    assert ins.find_culprits(taps=str(TAPS), tap_outputs=outputs).inside_delegates is not None
    with pytest.raises(UsageError, match=r"tap_outputs needs taps.*\n.*--taps"):
        ins.find_culprits(tap_outputs=outputs)
    with pytest.raises(MismatchedArtifactsError, match=r"lands at output \d+, but tap_outputs holds 1 values"):
        ins.find_culprits(taps=str(TAPS), tap_outputs=outputs[:1])
    with pytest.raises(UsageError, match="tap_outputs must be the method's flat output list.*not dict"):
        ins.find_culprits(taps=str(TAPS), tap_outputs={"a": 1})
    doc = json.loads(TAPS.read_text())
    for tap in doc["taps"]:
        tap["node_name"] = "elsewhere_" + tap["node_name"]
    other = tmp_path / "taps.json"
    other.write_text(json.dumps(doc))
    with pytest.raises(MismatchedArtifactsError, match="no FULL_TENSOR tap .* names a node of the ETRecord"):
        ins.find_culprits(taps=str(other), tap_outputs=outputs)


@pytest.mark.parametrize(("text", "message"), [
    ("{", r"is not JSON"),
    ('{"format": "other", "version": 1, "user_outputs": 1, "taps": []}', r"not valid: format: Input should be"),
    ('{"format": "numdiff-tap-sidecar", "version": 2, "user_outputs": 1, "taps": []}', r"not valid: version"),
    ('{"format": "numdiff-tap-sidecar", "version": 1, "user_outputs": 1, "taps": [{"node_name": "a"}]}',
     r"not valid: taps\.0\.op_target: Field required"),
    ('{"format": "numdiff-tap-sidecar", "version": 1, "user_outputs": 1, "taps": [], "code": "x"}',
     r"not valid: code: Extra inputs"),
])
def test_bad_sidecar_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "taps.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message + r".*\n.*write_tap_sidecar"):
        load_sidecar(path)
    with pytest.raises(InputError, match="cannot be read"):
        load_sidecar(tmp_path / "missing.json")


def test_writer_round_trip_without_executorch(tmp_path: Path) -> None:
    class Spec:  # what ExecuTorch's TapSpec offers, by attribute
        node_name, op_target, output_index, reducer_name = "linear", "aten.linear.default", 1, "STATS"
        fields, module_path, module_class = ("min", "max"), "fc1", "Linear"

    path = tmp_path / "taps.json"
    write_tap_sidecar([Spec()], path, user_outputs=1)
    sidecar = load_sidecar(path)
    assert sidecar.taps[0].fields == ["min", "max"] and sidecar.taps[0].reducer == "STATS"
    import numdiff.culprits.taps as reader
    import numdiff.export_helpers.taps as writer

    for module in (reader, writer):  # neither side imports ExecuTorch
        tree = ast.parse(Path(str(module.__file__)).read_text())
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert imported and not [m for m in imported if m.split(".")[0] == "executorch"]


def test_cli_and_saved_analysis(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = folder(NAME)
    args = ["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
            "--debug-buffer", str(d / "debug_buffer.bin"), "--taps", str(TAPS), "--tap-outputs", str(OUTPUTS)]
    assert main(args + ["--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["inside_delegates"]["culprits"] == ["linear_1"]
    assert main(args) == 1
    assert "culprit(s): linear_1 (fc2)" in capsys.readouterr().out
    analysis = Analysis.from_inspector(inspector(NAME), culprit_options={"taps": str(TAPS), "tap_outputs": str(OUTPUTS)})
    analysis.save(tmp_path / "a.json")
    rows = load_analysis(tmp_path / "a.json").culprits.inside_delegates
    assert rows is not None and [r.node for r in rows if r.is_culprit] == ["linear_1"]
