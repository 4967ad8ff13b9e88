"""ops.parquet is written as runs finish, in manifest order, without holding the fleet's rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from numdiff.batch.tables import OpsWriter


def _rows(run: str, n: int) -> list[dict[str, object]]:
    return [{"run": run, "device": "d", "row": i, "op": f"op{i}", "snr_db": float(i)} for i in range(n)]


def test_rows_go_out_in_manifest_order_as_soon_as_their_turn_comes(tmp_path: Path) -> None:
    order = [f"r{i}" for i in range(6)]
    w = OpsWriter(str(tmp_path), order, ["device"], batch_rows=4)
    w.put("r1", _rows("r1", 3))
    w.put("r2", _rows("r2", 3))
    assert w.waiting == 2 and w.rows_written == 0  # r0 not finished: r1 and r2 wait
    w.put("r0", _rows("r0", 3))
    assert w.waiting == 0 and w.rows_written == 6  # r0+r1 went out as one row group; r2 waits for 4 rows
    w.put("r3", [])  # a failed run
    w.put("r5", lambda: _rows("r5", 2))  # a reused run: loaded when its turn comes
    assert w.waiting == 1
    w.put("r4", _rows("r4", 1))
    assert not (tmp_path / "ops.parquet").exists()  # appears only at close
    path = w.close()
    df = pd.read_parquet(path)
    assert list(df["run"]) == ["r0"] * 3 + ["r1"] * 3 + ["r2"] * 3 + ["r4"] + ["r5"] * 2
    assert list(df["row"]) == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 1]
    assert [p.name for p in tmp_path.iterdir()] == ["ops.parquet"]  # no temporary file left beside it


def test_abort_leaves_nothing(tmp_path: Path) -> None:
    w = OpsWriter(str(tmp_path), ["a", "b"], [], batch_rows=1)
    w.put("a", _rows("a", 2))
    w.abort()
    assert list(tmp_path.iterdir()) == []
