"""numdiff batch with the local pool: statuses, the tables' contract and values, re-runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from numdiff.batch import load_manifest, run_batch
from numdiff.cli import main
from numdiff.inspector import Inspector
from numdiff.report import Analysis

CONTRACT_RUNS = ["run", "device", "build", "input_set", "status", "error"]
CONTRACT_OPS = ["run", "device", "build", "input_set", "aot_ops", "snr_db", "verdict", "latency_p50_ms"]


def _tables(out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(out / "runs.parquet"), pd.read_parquet(out / "ops.parquet")


def test_statuses_and_errors(fleet: dict[str, Any]) -> None:
    result = fleet["result"]
    assert (result.total, result.ok, result.failed, result.reused) == (12, 10, 2, 0)
    runs, _ = _tables(fleet["out"])
    assert runs["run"].tolist() == [f"run-{i:05d}" for i in range(12)]
    by_run = runs.set_index("run")
    assert by_run.loc["run-00000", "status"] == "failed"
    assert by_run.loc["run-00000", "error_type"] == "ETDumpError"
    assert "truncated" in by_run.loc["run-00000", "error"]
    assert by_run.loc["run-00001", "status"] == "failed"
    assert by_run.loc["run-00001", "error_type"] == "FileNotFoundError"
    assert "missing_debug_buffer.bin' does not exist" in by_run.loc["run-00001", "error"]
    ok = runs[runs["status"] == "ok"]
    assert ok["error"].isna().all() and (ok["gap_rows"] == 5).all() and (ok["culprits"] >= 1).all()
    for rel in ok["analysis"]:
        assert Analysis.load(fleet["out"] / rel).gap is not None


def test_contract_columns(fleet: dict[str, Any]) -> None:
    runs, ops = _tables(fleet["out"])
    assert list(runs.columns[:len(CONTRACT_RUNS) - 2]) == CONTRACT_RUNS[:-2]
    assert set(CONTRACT_RUNS) <= set(runs.columns)
    assert set(CONTRACT_OPS) <= set(ops.columns)
    assert len(ops) == 10 * 5
    assert ops["snr_db"].dtype == np.float64 and ops["latency_p50_ms"].dtype == np.float64
    assert set(ops["aot_ops"]) == {"linear", "relu", "linear_1", "tanh", "linear_2"}


def _spec(fleet: dict[str, Any], run: str) -> Any:
    return next(s for s in load_manifest(fleet["manifest"]) if s.run == run)


@pytest.mark.parametrize("run", ["run-00002", "run-00003", "run-00011"])
def test_values_equal_the_inspector(fleet: dict[str, Any], run: str) -> None:
    spec = _spec(fleet, run)
    _, ops = _tables(fleet["out"])
    mine = ops[ops["run"] == run].sort_values("row")
    inspector = Inspector(etdump_path=spec.etdump, etrecord=spec.etrecord, debug_buffer_path=spec.debug_buffer)
    gap = inspector.calculate_numeric_gap("SNR")
    assert mine["aot_ops"].tolist() == [", ".join(ops) for ops in gap["aot_ops"]]
    expected = [min(float(v) for v in g) for g in gap["gap"]]
    assert mine["snr_db"].tolist() == pytest.approx(expected, rel=1e-12)
    verdicts = {", ".join(r.aot_ops): r.verdict.value for r in inspector.find_culprits().rows}
    assert mine.set_index("aot_ops")["verdict"].to_dict() == verdicts
    # latency of the linear row: its runtime events (permute_copy + addmm) added per execution, then the median
    handles = set(mine.iloc[0]["aot_debug_handle"].split(","))
    per_run = np.sum([ev.perf_data.raw for block in inspector.event_blocks for ev in block.events
                      if ev.perf_data is not None and ev.name.startswith("native_call")
                      and handles & {str(h) for h in np.atleast_1d(ev.debug_handles)}], axis=0)
    assert mine.iloc[0]["latency_p50_ms"] == pytest.approx(float(np.median(per_run)), rel=1e-9)
    assert mine.iloc[0]["latency_runs"] == 3


def test_planted_and_device_divergence(fleet: dict[str, Any]) -> None:
    _, ops = _tables(fleet["out"])
    culprit = ops[ops["aot_ops"] == "linear_1"]
    assert (culprit["verdict"] == "broken").all()  # planted in the model: every device
    relu = ops[ops["aot_ops"] == "relu"].set_index("device")
    assert (relu.loc["rpi5", "snr_db"] < 40).all()  # the generator's rpi5 noise on relu
    assert (relu.drop(index="rpi5")["snr_db"] > 120).all()


def test_rerun_skips_finished_runs(fleet: dict[str, Any]) -> None:
    out = fleet["out"]
    stored = sorted((out / "analyses").glob("*.json"))
    stamps = {p: p.stat().st_mtime_ns for p in stored}
    runs_before, ops_before = _tables(out)
    result = run_batch(load_manifest(fleet["manifest"]), out, workers=2)
    assert (result.ok, result.reused, result.failed) == (10, 10, 2)
    assert {p: p.stat().st_mtime_ns for p in sorted((out / "analyses").glob("*.json"))} == stamps
    runs_after, ops_after = _tables(out)
    assert runs_after["reused"].tolist() == [False, False] + [True] * 10
    pd.testing.assert_frame_equal(ops_after, ops_before)
    cols = ["run", "status", "key", "analysis", "worst_snr_db"]
    pd.testing.assert_frame_equal(runs_after[cols], runs_before[cols])


def test_cli_batch_exit_status_and_fleet_summary(fleet: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    out = fleet["out"]
    assert main(["batch", str(fleet["manifest"]), "-o", str(out)]) == 3  # two runs failed: bad input
    err = capsys.readouterr().err
    assert "12 runs: 0 analysed, 10 already done, 2 failed" in err
    html = fleet["root"] / "fleet.html"
    assert main(["fleet", "summary", str(out), "-o", str(html)]) == 0
    text = capsys.readouterr().out
    assert "relu on device=rpi5: 2/2 runs" in text
    assert "linear_1 on device=pixel8" in text
    assert "2 run(s) failed" in text and "run-00001 (device=pixel7)" in text
    page = html.read_text()
    assert page.count("<svg") == 2 and 'id="heat-divergence"' in page and "rpi5" in page
    assert "<code>relu</code> on <b>device=rpi5</b>: 2/2 runs" in page
    assert main(["fleet", "summary", str(out), "--by", "build"]) == 0
    assert "b100" in capsys.readouterr().out


def test_fleet_summary_errors(fleet: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "summary", str(fleet["out"]), "--by", "colour"]) == 2
    assert "--by 'colour' is not a label of this fleet" in capsys.readouterr().err
    assert main(["fleet", "summary", str(tmp_path)]) == 3
    assert "runs.parquet' does not exist" in capsys.readouterr().err
    (tmp_path / "runs.parquet").write_bytes(b"not parquet")
    (tmp_path / "ops.parquet").write_bytes(b"not parquet")
    assert main(["fleet", "summary", str(tmp_path)]) == 3
    assert "is not a readable Parquet table" in capsys.readouterr().err


def test_profile_and_gap_only(fleet: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subset = fleet["root"] / "subset.csv"
    lines = Path(fleet["manifest"]).read_text().splitlines()
    subset.write_text("\n".join([lines[0], lines[4], lines[5]]) + "\n")  # run-00003 (rpi5), run-00004
    assert main(["batch", str(subset), "-o", str(tmp_path / "o"), "--workers", "1", "--analyses", "profile,gap"]) == 0
    runs, ops = _tables(tmp_path / "o")
    assert runs["status"].tolist() == ["ok", "ok"] and runs["culprits"].isna().all()
    assert ops["verdict"].isna().all() and len(ops) == 10
    relu = ops[(ops["aot_ops"] == "relu") & (ops["run"] == "run-00003")].iloc[0]
    assert relu["below_floor"]  # divergence without culprits: the noise floor
    assert main(["batch", str(subset), "-o", str(tmp_path / "p"), "--workers", "1", "--analyses", "profile"]) == 0
    runs, ops = _tables(tmp_path / "p")
    assert len(ops) == 0 and runs["gap_unavailable"].str.startswith("not asked").all()
    assert main(["batch", str(subset), "-o", str(tmp_path / "q"), "--analyses", "culprits"]) == 2
    assert "culprits need the gap" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "q")
