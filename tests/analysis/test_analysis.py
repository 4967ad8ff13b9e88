"""The saved analysis: what it holds, save/load, migrations and bad files."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import pytest

from numdiff.cli import main
from numdiff.errors import AnalysisFileError, InputError
from numdiff.examples import example_files
from numdiff.inspector import Inspector
from numdiff.report import FORMAT_VERSION, Analysis
from numdiff.analysis.migrations import migrate
from numdiff.analysis.storage import load_analysis
from tests.conftest import SAVED_ANALYSES as DATA, artifact_args


def test_gap_rows_hold_the_library_numbers(example_analysis: Analysis) -> None:
    f = example_files()
    inspector = Inspector(etdump_path=f.etdump, etrecord=f.etrecord, debug_buffer_path=f.debug_buffer)
    assert example_analysis.gap is not None
    rows = {tuple(r.aot_debug_handle): r for r in example_analysis.gap.rows}
    for metric, field in (("MSE", "mse"), ("L1", "l1"), ("SNR", "snr")):
        df = inspector.calculate_numeric_gap(metric)
        assert len(df) == len(rows)
        for handle, gap in zip(df["aot_debug_handle"], df["gap"]):
            saved = getattr(rows[tuple(handle)], field)
            assert saved == pytest.approx(list(gap))


def test_rows_explain_matching_and_point_at_source(example_analysis: Analysis) -> None:
    gap = example_analysis.gap
    assert gap is not None and gap.graph_name == "exported_program"
    assert [r.index for r in gap.rows] == list(range(len(gap.rows)))
    for row in gap.rows:
        assert row.match in gap.match_explanation and row.match_explanation == gap.match_explanation[row.match]
    cumsum = next(r for r in gap.rows if r.aot_ops == ["cumsum"])
    assert cumsum.source_line is not None and "_fixture_models.py" in cumsum.source_line
    assert cumsum.aot_stats is not None and cumsum.aot_stats.shape == [[2, 16]]
    assert cumsum.error_histogram is not None and sum(cumsum.error_histogram.counts) == 32
    assert cumsum.max_abs_error is not None and cumsum.max_abs_error > 0
    assert math.isinf(gap.rows[0].snr[0])  # identical outputs


def test_profile_summary_matches_the_inspector(example_analysis: Analysis) -> None:
    f = example_files()
    inspector = Inspector(etdump_path=f.etdump, etrecord=f.etrecord, debug_buffer_path=f.debug_buffer)
    assert example_analysis.profile.time_unit == "ms"
    assert [b.name for b in example_analysis.profile.blocks] == [b.name for b in inspector.event_blocks]
    for saved, block in zip(example_analysis.profile.blocks, inspector.event_blocks):
        assert [e.name for e in saved.events] == [e.name for e in block.events]
        for s, ev in zip(saved.events, block.events):
            assert ev.perf_data is not None and s.p50 == ev.perf_data.p50 and s.durations == list(ev.perf_data.raw)
    cumsum = next(e for b in example_analysis.profile.blocks for e in b.events if e.name == "native_call_cumsum.out")
    assert cumsum.op_types == ["aten.cumsum.default"] and cumsum.module is not None


def test_artifacts_are_hashed_and_labels_kept(example_analysis: Analysis) -> None:
    f = example_files()
    by_role = {a.role: a for a in example_analysis.artifacts}
    assert by_role["etdump"].sha256 == hashlib.sha256(f.etdump.read_bytes()).hexdigest()
    assert by_role["debug_buffer"].size == f.debug_buffer.stat().st_size
    assert example_analysis.labels == {"device": "host", "build": "1"}


def test_save_load_round_trip_keeps_infinities(example_analysis: Analysis, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    example_analysis.save(path)
    text = path.read_text()
    json.loads(text)  # strict JSON
    assert "Infinity" in text and "NaN" not in text.replace('"NaN"', "")
    assert Analysis.load(path).model_dump_json() == example_analysis.model_dump_json()  # NaN != NaN for ==


def test_culprits_not_available_is_recorded_and_progress_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numdiff.culprits", None)  # import fails
    args = artifact_args("example")
    steps: list[tuple[str, int, int]] = []
    a = Analysis.from_files(args[1], args[3], args[5], progress=lambda s, d, t: steps.append((s, d, t)))
    assert not a.culprits.available and a.culprits.reason is not None
    assert a.culprits.reason.startswith("not available: ")
    names = [s for s, _, _ in steps]
    assert names[:3] == ["reading the artifacts", "hashing the artifacts", "running the reference graph"]
    assert {"comparing (SNR)", "comparing (MSE)", "comparing (L1)", "tensor statistics", "finding culprits"} <= set(names)
    assert all(0 <= d <= t for _, d, t in steps)


def test_profile_only_without_etrecord() -> None:
    with pytest.warns(UserWarning, match="no debug buffer was given"):
        a = Analysis.from_files(example_files().etdump)
    assert a.gap is None and a.gap_unavailable is not None and "ETRecord" in a.gap_unavailable
    assert [x.role for x in a.artifacts] == ["etdump"]
    assert a.profile.blocks


def test_committed_v1_file_still_loads() -> None:
    a = load_analysis(DATA / "analysis_v1.json")
    assert a.format_version == FORMAT_VERSION
    assert a.labels["model"] == "quantized_mlp"
    assert a.gap is not None and {r.aot_ops[-1] for r in a.gap.rows} >= {"cumsum"}


def test_committed_v2_file_still_loads() -> None:
    """Written by numdiff's version-2 code (before the culprit headline and row provenance)."""
    raw = json.loads((DATA / "analysis_v2.json").read_text())
    assert raw["format_version"] == 2 and "headline" not in raw["culprits"]
    a = Analysis.load(DATA / "analysis_v2.json")
    assert a.format_version == FORMAT_VERSION
    assert a.labels == {"device": "host", "build": "1"}
    assert a.culprits.headline is None and all(not r.input_sources for r in a.culprits.rows)


def test_committed_v3_file_still_loads() -> None:
    """Written by numdiff's version-3 code (before the note on the run's inputs)."""
    raw = json.loads((DATA / "analysis_v3.json").read_text())
    assert raw["format_version"] == 3 and "inputs_note" not in raw["culprits"]
    a = Analysis.load(DATA / "analysis_v3.json")
    assert a.format_version == FORMAT_VERSION
    assert a.culprits.headline == raw["culprits"]["headline"]
    assert a.culprits.inputs_in_doubt == [] and a.culprits.inputs_note is None


def test_committed_v4_file_still_loads() -> None:
    """Written by numdiff's version-4 code (before gap.reference_inputs); a version-4 gap made on the run's
    own inputs said so only in a note, from which the migration reads it."""
    raw = json.loads((DATA / "analysis_v4.json").read_text())
    assert raw["format_version"] == 4 and "reference_inputs" not in raw["gap"]
    a = Analysis.load(DATA / "analysis_v4.json")
    assert a.format_version == FORMAT_VERSION and a.gap is not None and a.gap.reference_inputs == "representative"
    assert a.culprits.inputs_in_doubt == ["x"]
    raw["gap"]["notes"].insert(0, "the reference graph ran on the run's own inputs (step_inputs), not the ETRecord's "
                                  "representative inputs")
    assert migrate(raw)["gap"]["reference_inputs"] == "own"


def test_migrations_run_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from numdiff.analysis import migrations

    monkeypatch.setattr(migrations, "FORMAT_VERSION", 3)
    steps = {1: lambda d: {**d, "seen": [1]}, 2: lambda d: {**d, "seen": d["seen"] + [2]}}
    assert migrate({"format_version": 1}, migrations=steps) == {"format_version": 3, "seen": [1, 2]}
    assert migrate({"format_version": 2, "seen": []}, migrations=steps) == {"format_version": 3, "seen": [2]}
    with pytest.raises(AnalysisFileError, match="'f.json': no migration from format version 2"):
        migrate({"format_version": 2}, "f.json", migrations={1: steps[1]})


def _write(tmp_path: Path, content: str | bytes) -> Path:
    p = tmp_path / "bad.json"
    p.write_bytes(content.encode() if isinstance(content, str) else content)
    return p


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", r"is not valid JSON"),
    (b"\xff\xfe\x00", r"is not valid JSON"),
    ("[1, 2]", r"holds a JSON list, not an object"),
    ('{"format_version": "1"}', r"format_version is '1', not a positive integer"),
    ('{"format_version": 99, "numdiff_version": "9.0"}', r"format version 99 \(written by numdiff 9.0\) is newer.*\n.*Update numdiff to a version that reads it \(git pull in numdiff.s clone\)"),
    ('{"format_version": 1, "numdiff_version": "0.1.0"}', r"is not a valid analysis: created_utc: Field required"),
    ("[" * 100000, r"is not valid JSON"),
])
def test_bad_files_are_named_errors(tmp_path: Path, content: str | bytes, message: str) -> None:
    with pytest.raises(AnalysisFileError, match=message) as info:
        Analysis.load(_write(tmp_path, content))
    assert isinstance(info.value, InputError) and "bad.json" in str(info.value)


def test_damaged_field_is_named(tmp_path: Path) -> None:
    data = json.loads((DATA / "analysis_v1.json").read_text())
    data["artifacts"][0]["sha256"] = "xyz"
    with pytest.raises(AnalysisFileError, match=r"artifacts\.0\.sha256: String should match pattern"):
        Analysis.load(_write(tmp_path, json.dumps(data)))


def test_file_over_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMDIFF_MAX_ENTRY_BYTES", "100")
    with pytest.raises(AnalysisFileError, match=r"analysis_v1.json': is \d+ bytes, over the 100-byte limit.*\n.*NUMDIFF_MAX_ENTRY_BYTES"):
        Analysis.load(DATA / "analysis_v1.json")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AnalysisFileError, match="cannot be read"):
        Analysis.load(tmp_path / "nope.json")


def test_cli_analyze_writes_a_loadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["analyze", *artifact_args("xnnpack"), "--label", "device=x86", "--label", "build = 7", "-o", str(out)]) == 0
    a = Analysis.load(out)
    assert a.labels == {"device": "x86", "build": "7"} and a.gap is not None and a.gap.rows
    assert "gap rows" in capsys.readouterr().err


def test_cli_analyze_rejects_a_bad_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", *artifact_args("xnnpack"), "--label", "device", "-o", str(tmp_path / "r.json")]) != 0
    assert "--label 'device' is not KEY=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_from_inspector_matches_from_files(example_analysis: Analysis) -> None:
    f = example_files()
    inspector = Inspector(etdump_path=f.etdump, etrecord=f.etrecord, debug_buffer_path=f.debug_buffer)
    a = Analysis.from_inspector(inspector, labels={"device": "host", "build": "1"},
                                artifact_paths={"etdump": f.etdump, "etrecord": f.etrecord, "debug_buffer": f.debug_buffer})
    strip = {"created_utc"}
    assert a.model_dump_json(exclude=strip) == example_analysis.model_dump_json(exclude=strip)


def test_the_run_s_own_inputs_are_the_gap_s_reference_inputs_too() -> None:
    """culprit_near_inputs ran on other inputs than the representative ones: against a reference on those,
    every layer looks ~38 dB off; on the run's own inputs (step_inputs) the device is within float noise."""
    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    files = (d / "etdump.etdp", d / "etrecord.bin", d / "debug_buffer.bin")
    plain = Analysis.from_files(*files)
    own = Analysis.from_files(*files, culprit_options={"step_inputs": d / "run_inputs.pt"})
    assert plain.gap is not None and own.gap is not None
    assert [r.aot_ops for r in plain.gap.rows] == [r.aot_ops for r in own.gap.rows]
    assert max(min(r.snr) for r in plain.gap.rows) < 45 < 130 < min(min(r.snr) for r in own.gap.rows)
    assert (plain.gap.reference_inputs, own.gap.reference_inputs) == ("representative", "own")
    assert own.gap.notes[0] == ("the reference graph ran on the run's own inputs (step_inputs), not the ETRecord's "
                                "representative inputs")
    assert not any("own inputs" in n for n in plain.gap.notes)
    assert plain.culprits.inputs_in_doubt == ["x"] and own.culprits.inputs_in_doubt == []
