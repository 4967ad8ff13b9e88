"""Model Explorer node data: numdiff's files read back with Model Explorer's own classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numdiff.report import Analysis
from numdiff.report.explorer import INFINITE_SNR_DB, node_data, write_node_data


def test_overlays_from_the_example(example_analysis: Analysis, tmp_path: Path) -> None:
    data = node_data(example_analysis)
    assert example_analysis.gap is not None
    assert set(data) >= {"accumulated_error", "latency"}
    acc = data["accumulated_error"]["results"]
    assert acc["cumsum"]["value"] == pytest.approx(example_analysis.gap.rows[2].snr[0])
    assert acc["dequantize_per_tensor_5"]["value"] == INFINITE_SNR_DB  # identical delegate output
    lat = data["latency"]["results"]
    cumsum_event = next(e for b in example_analysis.profile.blocks for e in b.events if e.name == "native_call_cumsum.out")
    assert lat["cumsum"]["value"] == pytest.approx((cumsum_event.p50 or 0) * 1000)  # ms → µs
    paths = write_node_data(example_analysis, tmp_path / "overlays")
    assert sorted(Path(p).name for p in paths) == sorted(f"{k}.json" for k in data)


def test_files_load_with_model_explorer_classes(example_analysis: Analysis, tmp_path: Path) -> None:
    nd = pytest.importorskip("model_explorer.node_data_builder")
    for path in write_node_data(example_analysis, tmp_path):
        raw = json.loads(Path(path).read_text())
        graph = nd.GraphNodeData(
            name=raw["name"],
            results={k: nd.NodeDataResult(**v) for k, v in raw["results"].items()},
            thresholds=[nd.ThresholdItem(**t) for t in raw.get("thresholds", [])],
            gradient=[nd.GradientItem(**g) for g in raw.get("gradient", [])])
        theirs = json.loads(graph.to_json_string())
        assert {k: theirs[k] for k in raw} == raw  # every field of ours, as their classes write it
        model = nd.ModelNodeData(graphsData={"graph": graph})
        assert json.loads(model.to_json_string())["graph"]["results"] == raw["results"]


def test_cli_writes_overlays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import main
    from tests.conftest import SAVED_ANALYSES as DATA

    assert main(["explore", str(DATA / "analysis_v1.json"), "-o", str(tmp_path / "o")]) == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["accumulated_error.json", "latency.json"]
    assert "wrote 2 node-data file(s)" in capsys.readouterr().err


def test_cli_open_needs_the_etrecord(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import main
    from tests.conftest import SAVED_ANALYSES as DATA

    assert main(["explore", str(DATA / "analysis_v1.json"), "-o", str(tmp_path / "o"), "--open"]) == 2
    assert "--open needs --etrecord" in capsys.readouterr().err
