"""The fleet tables: ``runs.parquet`` (one row per run) and ``ops.parquet`` (one row per run × aligned op).

Every number is read from a saved :class:`~numdiff.report.Analysis` (nothing is recomputed here):

* ``snr_db``, ``mse``, ``l1``: the row's value under each metric, as ``calculate_numeric_gap`` gives it
  (the worst element for a multi-output op: lowest SNR, highest MSE/L1); ``max_abs_error``.
* ``verdict``, ``is_culprit``, ``local_snr_db``, ``amplification``: the culprit row with the same AOT
  ops (null when culprit localization was not run or not available).
* ``noise_floor_db`` / ``below_floor``: the rounding-noise floor the HTML report draws.
* ``latency_*_ms``: the runtime events carrying the row's runtime debug handles (wrappers such as
  ``OPERATOR_CALL`` and ``Method::*`` left out), their durations added per execution, then
  p10/p50/p90/avg/min/max over the executions, in milliseconds (null for a ``cycles`` profile).

``aot_ops`` and ``runtime_ops`` are the op names joined by ``", "`` (a plain string column groups
and filters easily in DuckDB and pandas); ``op`` is the last AOT op, the name the report shows.
Label columns are strings, one per label name used by any run (null where a run has none).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from numdiff._core.events import EXECUTE, OPERATOR_CALL, is_runtime_step
from numdiff._core.files import atomic_path
from numdiff._core.time_units import unit_factor
from numdiff.analysis.models import Analysis
from numdiff.analysis.records import EventStats
from numdiff.analysis.noise import noise_floor_db
from numdiff.errors import MissingDependencyError

if TYPE_CHECKING:
    import pyarrow

__all__ = ["OPS_COLUMNS", "RUNS_COLUMNS", "OpsWriter", "flatten", "write_runs", "write_tables"]


def _is_wrapper(name: str) -> bool:
    """Events around ops rather than ops: runtime steps and ``OPERATOR_CALL`` (a delegate call keeps its time)."""
    return is_runtime_step(name) or name == OPERATOR_CALL

#: (column, arrow type name) of ``runs.parquet`` after ``run`` and the labels.
RUNS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "string"), ("error", "string"), ("error_type", "string"), ("reused", "bool"), ("key", "string"),
    ("analysis", "string"), ("seconds", "float64"), ("cpu_seconds", "float64"), ("worker_peak_rss_mib", "float64"), ("etdump", "string"), ("etrecord", "string"),
    ("debug_buffer", "string"), ("step_inputs", "string"), ("events", "int64"), ("gap_rows", "int64"),
    ("culprits", "int64"), ("inputs_in_doubt", "string"),
    ("gap_unavailable", "string"), ("worst_snr_db", "float64"), ("execute_p50_ms", "float64"),
)
#: (column, arrow type name) of ``ops.parquet`` after ``run`` and the labels.
OPS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("row", "int64"), ("op", "string"), ("aot_ops", "string"), ("runtime_ops", "string"),
    ("aot_debug_handle", "string"), ("snr_db", "float64"), ("mse", "float64"), ("l1", "float64"),
    ("max_abs_error", "float64"), ("matched", "bool"), ("match", "string"), ("noise_floor_db", "float64"),
    ("below_floor", "bool"), ("snr_in_doubt", "bool"), ("verdict", "string"), ("is_culprit", "bool"), ("local_snr_db", "float64"),
    ("amplification", "float64"), ("module", "string"), ("source_line", "string"),
    ("latency_p10_ms", "float64"), ("latency_p50_ms", "float64"), ("latency_p90_ms", "float64"),
    ("latency_avg_ms", "float64"), ("latency_min_ms", "float64"), ("latency_max_ms", "float64"),
    ("latency_runs", "int64"), ("latency_events", "int64"),
)


def _worst(values: Sequence[float], lowest: bool) -> float | None:
    if not values:
        return None
    finite_first = sorted(values, key=lambda v: (math.isnan(v), v if lowest else -v))
    return float(finite_first[0])


def _to_ms(unit: str) -> float | None:
    """Milliseconds in one ``unit`` (None for cycles, which have no fixed duration)."""
    return unit_factor(unit, "ms")


def _latency(events: Sequence[EventStats], handles: set[int], factor: float | None) -> dict[str, Any]:
    chosen = [e for e in events if e.durations and handles.intersection(e.debug_handles)]
    out: dict[str, Any] = {"latency_events": len(chosen), "latency_runs": 0}
    runs = min((len(e.durations) for e in chosen), default=0)
    if factor is None or runs == 0:
        return out
    total = np.sum([e.durations[:runs] for e in chosen], axis=0) * factor
    p10, p50, p90 = (float(v) for v in np.percentile(total, [10, 50, 90]))
    out.update(latency_p10_ms=p10, latency_p50_ms=p50, latency_p90_ms=p90, latency_avg_ms=float(total.mean()),
               latency_min_ms=float(total.min()), latency_max_ms=float(total.max()), latency_runs=runs)
    return out


def flatten(analysis: Analysis) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One saved analysis as ``(run fields, op rows)`` (without ``run`` and labels; the batch adds them)."""
    factor = _to_ms(analysis.profile.time_unit)
    events = [e for b in analysis.profile.blocks for e in b.events if not _is_wrapper(e.name)]
    from numdiff.analysis.doubt import rows_clear_of_doubt

    culprits = {tuple(c.aot_ops): c for c in analysis.culprits.rows}
    clear = {id(r) for r in rows_clear_of_doubt(analysis)}
    ops: list[dict[str, Any]] = []
    for r in analysis.gap.rows if analysis.gap is not None else []:
        c = culprits.get(tuple(r.aot_ops))
        snr = _worst(r.snr, lowest=True)
        floor, _ = noise_floor_db(r)
        ops.append({
            "row": r.index, "op": r.aot_ops[-1] if r.aot_ops else "", "aot_ops": ", ".join(r.aot_ops),
            "runtime_ops": ", ".join(r.runtime_ops), "aot_debug_handle": ",".join(str(h) for h in r.aot_debug_handle),
            "snr_db": snr, "mse": _worst(r.mse, lowest=False), "l1": _worst(r.l1, lowest=False),
            "max_abs_error": r.max_abs_error, "matched": r.matched, "match": r.match, "noise_floor_db": floor,
            "below_floor": None if floor is None or snr is None or math.isnan(snr) else bool(snr < floor),
            "snr_in_doubt": id(r) not in clear,  # the run may have used other inputs (numdiff.analysis.doubt)
            "verdict": None if c is None else c.verdict, "is_culprit": None if c is None else c.is_culprit,
            "local_snr_db": None if c is None else c.local_gap, "amplification": None if c is None else c.amplification,
            "module": r.module, "source_line": r.source_line,
            **_latency(events, set(r.runtime_debug_handle), factor),
        })
    execute = [e for b in analysis.profile.blocks for e in b.events if e.name == EXECUTE and e.p50 is not None]
    snrs = [o["snr_db"] for o in ops if o["snr_db"] is not None]
    run = {
        "events": sum(len(b.events) for b in analysis.profile.blocks),
        "gap_rows": None if analysis.gap is None else len(ops),
        "culprits": sum(1 for c in analysis.culprits.rows if c.is_culprit) if analysis.culprits.available else None,
        # graph inputs the run may not have taken from the ETRecord (ops reading them not judged)
        "inputs_in_doubt": ", ".join(analysis.culprits.inputs_in_doubt) or None if analysis.culprits.available else None,
        "gap_unavailable": analysis.gap_unavailable,
        "worst_snr_db": _worst(snrs, lowest=True),
        "execute_p50_ms": None if not execute or factor is None else float(execute[0].p50 or 0.0) * factor,
    }
    return run, ops


def _arrow() -> ModuleType:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("numdiff batch (the Parquet fleet tables)", "pyarrow", "batch") from e
    module: ModuleType = pyarrow  # pyarrow has no type stubs: name what it is
    return module


def _schema(pa: ModuleType, labels: Sequence[str], columns: Sequence[tuple[str, str]]) -> pyarrow.Schema:
    kinds = {"string": pa.string(), "bool": pa.bool_(), "int64": pa.int64(), "float64": pa.float64()}
    return pa.schema([("run", pa.string()), *((name, pa.string()) for name in labels),
                      *((name, kinds[kind]) for name, kind in columns)])


def _clean(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def _write(pa: ModuleType, path: str, rows: Sequence[Mapping[str, Any]], schema: pyarrow.Schema) -> None:
    import pyarrow.parquet as pq

    names = schema.names
    table = pa.Table.from_pylist([{k: _clean(row.get(k)) for k in names} for row in rows], schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, str(tmp))


def write_tables(out_dir: str, runs: Sequence[Mapping[str, Any]], ops: Sequence[Mapping[str, Any]],
                 labels: Sequence[str]) -> tuple[str, str]:
    """Write ``runs.parquet`` and ``ops.parquet`` into ``out_dir``; returns their paths.

    ``runs`` and ``ops`` hold ``run``, the labels and the columns of ``RUNS_COLUMNS`` / ``OPS_COLUMNS``.
    NaN is written as null (an unmatched pair has no SNR); ±inf stays (identical outputs: SNR +inf).
    """
    pa = _arrow()
    runs_path, ops_path = os.path.join(out_dir, "runs.parquet"), os.path.join(out_dir, "ops.parquet")
    _write(pa, runs_path, runs, _schema(pa, labels, RUNS_COLUMNS))
    _write(pa, ops_path, ops, _schema(pa, labels, OPS_COLUMNS))
    return runs_path, ops_path


def write_runs(out_dir: str, runs: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    """Write ``runs.parquet`` (one row per run) into ``out_dir``; returns its path."""
    pa = _arrow()
    path = os.path.join(out_dir, "runs.parquet")
    _write(pa, path, runs, _schema(pa, labels, RUNS_COLUMNS))
    return path


OpRows = list[dict[str, Any]] | Callable[[], list[dict[str, Any]]]


class OpsWriter:
    """Writes ``ops.parquet`` as runs finish, in manifest order, holding only what cannot be written yet.

    Runs finish in any order; a run's rows wait until every run before it in the manifest has been
    given (rows, a loader of rows, or nothing for a failed run), then go out in row groups of
    ``batch_rows``. The driver's memory is the rows of runs finished ahead of a slower earlier one
    plus one row group, not the whole fleet's. The file appears (atomically) at :meth:`close`.
    """

    def __init__(self, out_dir: str, order: Sequence[str], labels: Sequence[str], batch_rows: int = 20_000) -> None:
        import pyarrow.parquet as pq

        self._pa = _arrow()
        self.path = os.path.join(out_dir, "ops.parquet")
        self._schema = _schema(self._pa, labels, OPS_COLUMNS)
        self._file: AbstractContextManager[Path] = atomic_path(self.path)
        self._writer = pq.ParquetWriter(str(self._file.__enter__()), self._schema)
        self._order = list(order)
        self._next = 0
        self._pending: dict[str, OpRows] = {}
        self._batch: list[dict[str, Any]] = []
        self._batch_rows = batch_rows
        self.rows_written = 0

    @property
    def waiting(self) -> int:
        """Runs given but not yet written (finished ahead of an earlier run)."""
        return len(self._pending)

    def put(self, run: str, rows: OpRows) -> None:
        """Give a run's op rows (or a callable returning them; ``[]`` for a run without rows)."""
        self._pending[run] = rows
        self._drain()

    def _drain(self) -> None:
        while self._next < len(self._order) and self._order[self._next] in self._pending:
            ready = self._pending.pop(self._order[self._next])
            self._batch.extend(ready() if callable(ready) else ready)
            self._next += 1
            if len(self._batch) >= self._batch_rows:
                self._flush()

    def _flush(self) -> None:
        if self._batch:
            names = self._schema.names
            table = self._pa.Table.from_pylist([{k: _clean(r.get(k)) for k in names} for r in self._batch],
                                               schema=self._schema)
            self._writer.write_table(table)
            self.rows_written += len(self._batch)
            self._batch = []

    def close(self) -> str:
        """Write what is left and move the file into place; returns its path."""
        for run in self._order[self._next:]:  # runs never given (there should be none) have no rows
            self._pending.setdefault(run, [])
        self._drain()
        self._flush()
        self._writer.close()
        self._file.__exit__(None, None, None)  # moves the finished file into place
        return self.path

    def abort(self) -> None:
        """Stop writing and remove the unfinished file (an earlier ``ops.parquet``, if any, stays)."""
        self._writer.close()
        stopped = InterruptedError("ops.parquet aborted")
        self._file.__exit__(type(stopped), stopped, None)  # removes the temporary file
