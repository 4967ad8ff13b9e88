"""numdiff batch on a local Ray (skipped when Ray is not installed: it is the optional 'ray' extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from numdiff.batch import load_manifest, run_batch


def test_ray_backend_matches_the_pool(fleet: dict[str, Any], tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    specs = load_manifest(fleet["manifest"])[:6]  # the truncated ETDump, the missing buffer, 4 good runs
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    assert context.address_info["node_ip_address"] == "127.0.0.1"  # loopback only (tests/batch/conftest.py)
    try:
        result = run_batch(specs, tmp_path / "out", backend="ray", workers=2)
    finally:
        ray.shutdown()
    assert (result.ok, result.failed, result.reused) == (4, 2, 0)
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet")
    assert runs["status"].tolist() == ["failed", "failed", "ok", "ok", "ok", "ok"]
    assert runs.loc[0, "error_type"] == "ETDumpError"
    pool = pd.read_parquet(fleet["out"] / "ops.parquet")
    ray_ops = pd.read_parquet(tmp_path / "out" / "ops.parquet")
    cols = ["run", "device", "aot_ops", "snr_db", "verdict", "latency_p50_ms"]
    expected = pool[pool["run"].isin(ray_ops["run"])][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(ray_ops[cols], expected)


def test_queryable_with_duckdb_and_pandas(fleet: dict[str, Any]) -> None:
    ops = pd.read_parquet(fleet["out"] / "ops.parquet")
    by_pandas = (ops[ops["verdict"].isin(["suspicious", "broken"])].groupby(["aot_ops", "device"]).size()
                 .rename("runs").reset_index().sort_values(["aot_ops", "device"]).reset_index(drop=True))
    assert ("relu", "rpi5") in set(zip(by_pandas["aot_ops"], by_pandas["device"]))
    duckdb = pytest.importorskip("duckdb")
    path = str(fleet["out"] / "ops.parquet")
    by_duckdb = duckdb.sql(
        f"SELECT aot_ops, device, count(*) AS runs FROM '{path}' "
        "WHERE verdict IN ('suspicious', 'broken') GROUP BY aot_ops, device ORDER BY aot_ops, device").df()
    pd.testing.assert_frame_equal(by_duckdb, by_pandas, check_dtype=False)


def test_numdiff_starts_a_local_ray_on_loopback(tmp_path: Path) -> None:
    """Issue 22: a local Ray started by `numdiff batch --backend ray` listened on the external address."""
    import os
    import subprocess
    import sys

    pytest.importorskip("ray")
    script = ("import operator, sys\n"
              "from numdiff.batch.executors import run_tasks\n"
              "for task, result in run_tasks(operator.neg, [1], backend='ray', workers=1):\n"
              "    node = sys.modules['ray']._private.worker.global_worker.node\n"
              "    print(result, node.node_ip_address, node.gcs_address)\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result, node_ip, gcs = done.stdout.split()
    assert result == "-1" and node_ip == "127.0.0.1" and gcs.startswith("127.0.0.1:")
