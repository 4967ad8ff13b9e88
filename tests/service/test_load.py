"""A bounded load test on loopback (the full one: ``python benchmarks/service_load.py``)."""

from __future__ import annotations

from tests.dev_scripts import load_script
from tests.service._server import Server


def test_concurrent_uploads_and_status_requests_all_analysed_correctly(sqlite_server: Server) -> None:
    bench = load_script("benchmarks/service_load.py", "service_load")
    figures = bench.run_load(sqlite_server.url, sqlite_server.token("load"), uploads=16, requests=200,
                             concurrency=32, timeout=240)
    assert figures["problems"] == []
    assert figures["uploads_ok"] == 16
    assert sum(f["n"] for f in figures["latency_ms"].values()) == 16 + 200
