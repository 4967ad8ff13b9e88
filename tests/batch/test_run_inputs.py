"""numdiff batch told which graph inputs each run used: a ``step_inputs`` column (or ``step_inputs.pt``
beside the ETDump), or ``--inputs-are-representative`` for the whole batch (``culprit_near_inputs``:
the ops reading the graph input ``x`` are all unrelated to their replays on the representative inputs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from numdiff.batch import load_manifest, run_batch
from numdiff.cli import main
from tests.culprits.helpers import folder


def _layout(root: Path) -> Path:
    """A directory manifest: run ``own`` with its step_inputs.pt, run ``plain`` without."""
    src = folder("culprit_near_inputs")
    for run in ("own", "plain"):
        (root / run).mkdir(parents=True)
        for name in ("etrecord.bin", "etdump.etdp", "debug_buffer.bin"):
            shutil.copy(src / name, root / run / name)
    shutil.copy(src / "run_inputs.pt", root / "own" / "step_inputs.pt")
    return root


def test_runs_are_judged_on_their_own_inputs_or_the_declared_ones(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    specs = load_manifest(_layout(tmp_path / "fleet"))
    assert {s.run: s.step_inputs is not None for s in specs} == {"own": True, "plain": False}
    result = run_batch(specs, tmp_path / "out", backend="pool", workers=1)
    assert (result.ok, result.failed) == (2, 0)
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet").set_index("run")
    assert runs.loc["own", "step_inputs"].endswith("own/step_inputs.pt")
    assert pd.isna(runs.loc["own", "inputs_in_doubt"]) and runs.loc["plain", "inputs_in_doubt"] == "x"

    # declared for the batch: the run without its own inputs is judged on the representative ones, analysed
    # again (its saved analysis is keyed by the declaration); the run with its own inputs is reused as it was
    code = main(["batch", str(tmp_path / "fleet"), "-o", str(tmp_path / "out"), "--workers", "1",
                 "--inputs-are-representative"])
    assert code == 0 and "2 runs: 1 analysed, 1 already done, 0 failed" in capsys.readouterr().err
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet").set_index("run")
    assert runs["inputs_in_doubt"].isna().all() and bool(runs.loc["own", "reused"])


def test_a_csv_manifest_names_the_step_inputs_and_a_missing_one_fails_its_run(tmp_path: Path) -> None:
    _layout(tmp_path)
    (tmp_path / "runs.csv").write_text("run,etdump,etrecord,debug_buffer,step_inputs,device\n"
                                       "a,own/etdump.etdp,own/etrecord.bin,own/debug_buffer.bin,own/step_inputs.pt,p8\n"
                                       "b,own/etdump.etdp,own/etrecord.bin,own/debug_buffer.bin,nowhere.pt,p9\n")
    specs = load_manifest(tmp_path / "runs.csv")
    assert [s.labels for s in specs] == [{"device": "p8"}, {"device": "p9"}]  # step_inputs is no label
    result = run_batch(specs, tmp_path / "out", backend="pool", workers=1)
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet").set_index("run")
    assert (result.ok, result.failed) == (1, 1) and runs.loc["a", "culprits"] == 0
    assert runs.loc["b", "error_type"] == "FileNotFoundError"
    assert runs.loc["b", "error"].startswith("step_inputs file ") and "nowhere.pt' does not exist" in runs.loc["b", "error"]


def test_the_fleet_summary_leaves_out_the_snrs_of_runs_on_other_inputs(tmp_path: Path) -> None:
    """Two devices: one's run is judged on its own inputs, the other's may have used other inputs. Its SNRs
    (device against a reference on other inputs) say nothing about the device: left out, and said."""
    from numdiff.batch.fleet import load_tables, render_fleet_html, summarize, text_summary

    root = _layout(tmp_path / "fleet")
    (root / "own").rename(root / "device=p8")
    (root / "plain").rename(root / "device=p9")
    run_batch(load_manifest(root), tmp_path / "out", backend="pool", workers=1)
    summary = summarize(*load_tables(tmp_path / "out"))
    assert summary.runs_in_doubt == {"p9": 1} and summary.runs_ok == {"p8": 1, "p9": 1}
    ops = pd.read_parquet(tmp_path / "out" / "ops.parquet")
    assert ops.groupby("device")["snr_in_doubt"].all().to_dict() == {"p8": False, "p9": True}
    assert all(c.snr_median_db is None for (_op, g), c in summary.cells.items() if g == "p9")
    assert any(c.snr_median_db is not None for (_op, g), c in summary.cells.items() if g == "p8")
    text = text_summary(summary)
    assert "1 ok, 1 other inputs?" in text and "  none: no device stands alone on any op" in text
    assert ("1 run(s) may have used other graph inputs than the ETRecord's representative ones (p9: 1; "
            "runs.parquet's inputs_in_doubt)") in text
    page = render_fleet_html(summary)
    assert 'id="inputs-in-doubt"' in page and "step_inputs" in page


def test_a_gap_only_batch_runs_the_reference_on_the_run_s_own_inputs(tmp_path: Path) -> None:
    from numdiff.report import Analysis

    specs = load_manifest(_layout(tmp_path / "fleet"))
    result = run_batch(specs, tmp_path / "out", backend="pool", workers=1, analyses=("profile", "gap"))
    assert (result.ok, result.failed) == (2, 0)
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet").set_index("run")
    gaps = {run: Analysis.load(tmp_path / "out" / runs.loc[run, "analysis"]).gap for run in ("own", "plain")}
    assert {run: g.reference_inputs for run, g in gaps.items() if g is not None} == {"own": "own",
                                                                                      "plain": "representative"}
    assert runs.loc["own", "worst_snr_db"] > 130 > 45 > runs.loc["plain", "worst_snr_db"]
