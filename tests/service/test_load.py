"""A bounded load test on loopback (the full one: ``python benchmarks/service_load.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.service._server import Server

BENCH = Path(__file__).parents[2] / "benchmarks" / "service_load.py"


def test_concurrent_uploads_and_status_requests_all_analysed_correctly(sqlite_server: Server) -> None:
    spec = importlib.util.spec_from_file_location("service_load", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = bench.run_load(sqlite_server.url, sqlite_server.token("load"), uploads=16, requests=200,
                             concurrency=32, timeout=240)
    assert figures["problems"] == []
    assert figures["uploads_ok"] == 16
    assert sum(f["n"] for f in figures["latency_ms"].values()) == 16 + 200
