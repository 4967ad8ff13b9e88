"""A bounded load test on loopback (the full one: ``python benchmarks/service_load.py``; the comparison with the
code before issue 22's defences: ``--baseline-tree``, see the README's security model)."""

from __future__ import annotations

import json
import math

import pytest

from tests.dev_scripts import ROOT, load_script
from tests.service._server import Server


def _sane(figures: dict[str, object], uploads: int, requests: int) -> None:
    """Figures a person could act on: every analysis done, throughput and latencies finite and in order."""
    latency = figures["latency_ms"]
    api = figures["api_ms"]
    assert isinstance(latency, dict) and isinstance(api, dict)
    assert figures["problems"] == [] and figures["uploads_ok"] == uploads
    assert sum(f["n"] for f in latency.values()) == api["n"] == uploads + requests
    assert 0 < api["p50"] <= api["p99"] < 120_000  # milliseconds
    per_min = figures["analyses_per_min"]
    assert isinstance(per_min, float) and math.isfinite(per_min) and 0 < per_min < 60_000


def test_concurrent_uploads_and_status_requests_all_analysed_correctly(sqlite_server: Server) -> None:
    bench = load_script("benchmarks/service_load.py", "service_load")
    figures = bench.run_load(sqlite_server.url, sqlite_server.token("load"), uploads=16, requests=200,
                             concurrency=32, timeout=240)
    assert sqlite_server.log is not None
    assert figures["problems"] == [], (figures["problems"], sqlite_server.log.read_text()[-4000:])
    _sane(figures, 16, 200)


def test_the_comparison_command_prints_both_sides_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """``--baseline-tree``, tiny: this tree against itself as the baseline (its server, workers and token from
    ``PYTHONPATH=tree``), one round each; both sides' figures are there and sane."""
    bench = load_script("benchmarks/service_load.py", "service_load")
    code = bench.main(["--uploads", "3", "--requests", "12", "--concurrency", "4", "--workers", "1",
                       "--baseline-tree", str(ROOT), "--rounds", "1", "--timeout", "240", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary
    assert set(summary["sides"]) == {"current", "baseline"} and summary["rounds"] == 1
    for side in summary["sides"].values():
        assert side["problems"] == []
        assert len(side["analyses_per_min"]) == len(side["api_p99_ms"]) == 1
        assert 0 < side["median_analyses_per_min"] < 60_000 and 0 < side["median_api_p99_ms"] < 120_000
    assert math.isfinite(summary["analyses_per_min_change_pct"]) and math.isfinite(summary["api_p99_change_ms"])
