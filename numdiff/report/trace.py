"""Export an analysis as a Chrome/Perfetto trace (the Trace Event format's JSON object form).

One process for the model; one thread (track) per run of each block; every profiled event a
complete slice (``"ph": "X"``, ``ts``/``dur`` in µs) at the time the runtime logged it, so
delegate-internal ops nest under their ``DELEGATE_CALL`` slice and kernels under their
``OPERATOR_CALL``. A slice that would overlap a neighbour without nesting in it (a delegate
clock that disagrees with the method's) goes on a companion track named "... (unnested)", so
no viewer has to guess. The numerical error of an op is in its slice's ``args`` and on a
counter track (``"ph": "C"``) per run.

Events without start times (a dump in cycles) have no place on a time line and are left out;
the count is in ``otherData``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from numdiff._core.time_units import unit_factor
from numdiff.analysis.models import Analysis
from numdiff.analysis.records import EventStats, GapRowModel

__all__ = ["trace_events", "write_trace"]

PID = 1


def _finite(v: float | None) -> float | str | None:
    if v is None:
        return None
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def _rows_by_event(analysis: Analysis) -> dict[tuple[str, tuple[int, ...]], GapRowModel]:
    out: dict[tuple[str, tuple[int, ...]], GapRowModel] = {}
    for row in analysis.gap.rows if analysis.gap is not None else []:
        for op in row.runtime_ops:
            out.setdefault((op, tuple(sorted(set(row.runtime_debug_handle)))), row)
    return out


def _slice_args(ev: EventStats, row: GapRowModel | None) -> dict[str, Any]:
    args: dict[str, Any] = {"p50": ev.p50, "runs": ev.runs}
    if ev.op_types:
        args["op_types"] = ev.op_types
    if ev.module:
        args["module"] = ev.module
    if ev.delegate_backend:
        args["delegate"] = ev.delegate_backend
    if ev.debug_handles:
        args["debug_handles"] = ev.debug_handles
    if row is not None:
        args.update(snr_db=[_finite(v) for v in row.snr], mse=[_finite(v) for v in row.mse],
                    aot_ops=row.aot_ops, match=row.match, source_line=row.source_line)
    return args


def _nest(slices: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split slices into those that nest properly on one track and those that would straddle."""
    order = sorted(slices, key=lambda s: (s["ts"], -s["dur"]))
    kept: list[dict[str, Any]] = []
    straddling: list[dict[str, Any]] = []
    stack: list[float] = []  # end times of open slices
    for s in order:
        end = s["ts"] + s["dur"]
        while stack and stack[-1] <= s["ts"]:
            stack.pop()
        if stack and end > stack[-1]:
            straddling.append(s)
            continue
        stack.append(end)
        kept.append(s)
    return kept, straddling


def trace_events(analysis: Analysis) -> dict[str, Any]:
    """The analysis as a Trace Event JSON object (``traceEvents``, ``displayTimeUnit``, ``otherData``)."""
    scale = unit_factor(analysis.profile.time_unit, "us")
    rows = _rows_by_event(analysis)
    title = analysis.labels.get("model") or next((a.name for a in analysis.artifacts if a.role == "etdump"), "model")
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": f"numdiff: {title}"}}]
    untimed = 0
    tid = 0
    for block in analysis.profile.blocks:
        for run in range(block.runs):
            slices: list[dict[str, Any]] = []
            counters: list[dict[str, Any]] = []
            for ev in block.events:
                if scale is None or run >= len(ev.start_us) or run >= len(ev.durations):
                    untimed += 1
                    continue
                row = rows.get((ev.name, tuple(sorted(set(ev.debug_handles)))))
                ts, dur = ev.start_us[run], max(ev.durations[run] * scale, 0.0)
                slices.append({"name": ev.name, "cat": "delegate" if ev.is_delegated_op else "runtime", "ph": "X",
                               "ts": ts, "dur": dur, "pid": PID, "args": _slice_args(ev, row)})
                if row is not None and row.snr and all(math.isfinite(v) for v in row.snr):
                    counters.append({"name": f"SNR dB ({block.name} run {run})", "ph": "C", "ts": ts, "pid": PID,
                                     "args": {"snr_db": min(row.snr)}})
            nested, straddling = _nest(slices)
            for part, suffix in ((nested, ""), (straddling, " (unnested)")):
                if not part:
                    continue
                tid += 1
                events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid,
                               "args": {"name": f"{block.name} run {run}{suffix}"}})
                events.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
                events.extend({**s, "tid": tid} for s in part)
            events.extend({**c, "tid": 0} for c in counters)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns" if analysis.profile.time_unit == "ns" else "ms",
        "otherData": {"numdiff_version": analysis.numdiff_version, "labels": analysis.labels,
                      "time_unit_of_durations": analysis.profile.time_unit, "events_without_time": untimed},
    }


def write_trace(analysis: Analysis, path: str | os.PathLike[str]) -> None:
    """Write the trace JSON to ``path``; open it in ui.perfetto.dev or chrome://tracing."""
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        json.dump(trace_events(analysis), f, allow_nan=False)
