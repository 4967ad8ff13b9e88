"""The data the HTML report shows, flattened from an Analysis into plain JSON-ready dicts."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from numdiff._core.names import counted, ops_title
from numdiff._core.events import DELEGATE_CALL, OPERATOR_CALL, is_runtime_step
from numdiff.analysis.noise import noise_floor_db
from numdiff.analysis.records import CulpritRow
from numdiff.report.verdicts import CULPRIT_MEANS, INHERITED_MEANS, cause

if TYPE_CHECKING:
    from numdiff.analysis.models import Analysis

__all__ = ["report_data"]

def _num(value: float | None) -> float | str | None:
    """JSON-safe number: non-finite values as the strings "inf", "-inf", "nan"."""
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _worst(values: list[float], lowest: bool) -> float | None:
    finite_first = sorted(values, key=lambda v: (math.isnan(v), v if lowest else -v))
    return finite_first[0] if finite_first else None


def _culprit_key(row: CulpritRow) -> tuple[str | None, ...]:
    return (row.method, *row.aot_ops)  # a program of several methods can have an op name in each


def report_data(analysis: Analysis) -> dict[str, Any]:
    """Everything the page's script needs, in one JSON-ready dict."""
    culprits = {_culprit_key(c): c for c in analysis.culprits.rows}
    rows: list[dict[str, Any]] = []
    for r in (analysis.gap.rows if analysis.gap is not None else []):
        floor, floor_src = noise_floor_db(r)
        c = culprits.get((r.method, *r.aot_ops))
        rows.append({
            "i": r.index, "op": r.aot_ops[-1] if r.aot_ops else "", "title": ops_title(r.aot_ops), "ops": r.aot_ops,
            "rops": r.runtime_ops, "rops_title": counted(r.runtime_ops),
            "method": r.method,
            "handle": r.aot_debug_handle, "module": r.module, "snr": _num(_worst(r.snr, lowest=True)),
            "mse": _num(_worst(r.mse, lowest=False)), "l1": _num(_worst(r.l1, lowest=False)),
            "snr_all": [_num(v) for v in r.snr], "maxabs": _num(r.max_abs_error), "matched": r.matched,
            "match": r.match, "match_expl": r.match_explanation, "note": r.note, "src": r.source_line,
            "trace": r.stack_trace, "floor": floor, "floor_src": floor_src,
            "aot": None if r.aot_stats is None else r.aot_stats.model_dump(mode="json"),
            "rt": None if r.runtime_stats is None else r.runtime_stats.model_dump(mode="json"),
            "hist": None if r.error_histogram is None else r.error_histogram.model_dump(mode="json"),
            "local": None if c is None else _num(c.local_gap), "accum": None if c is None else _num(c.accumulated_gap),
            "culprit": bool(c is not None and c.is_culprit), "cause": cause(r, c), "verdict": None if c is None else c.verdict,
            "noise_units": None if c is None else _num(c.local_noise_units), "noise": None if c is None else c.noise,
        })
    events: list[dict[str, Any]] = []
    modules: dict[str, dict[str, Any]] = {}
    timed: list[int] = []  # the events on the latency chart: ops and delegate calls, no wrappers or framework steps
    for block in analysis.profile.blocks:
        for e in block.events:
            wrapper = is_runtime_step(e.name) or e.name == OPERATOR_CALL
            if e.p50 is not None and not wrapper:
                timed.append(len(events))
            events.append({"block": block.name, "i": e.index, "name": e.name, "p50": e.p50, "p10": e.p10,
                           "p90": e.p90, "avg": e.avg, "min": e.min, "max": e.max, "runs": e.runs,
                           "module": e.module, "delegated": bool(e.is_delegated_op), "backend": e.delegate_backend,
                           "ops": e.op_types, "top": not wrapper and not e.is_delegated_op})
            if e.p50 is None or wrapper or e.is_delegated_op:
                continue  # a delegate's internal events are inside its DELEGATE_CALL's time
            key = f"delegate {e.delegate_backend or '?'}" if e.name == DELEGATE_CALL else e.module
            if key is None:
                continue
            m = modules.setdefault(key, {"module": key, "p50": 0.0, "count": 0})
            m["p50"] += e.p50
            m["count"] += 1
    unmatched_culprits = [{**c.model_dump(mode="json"), "title": c.title} for c in analysis.culprits.rows
                          if c.is_culprit and _culprit_key(c) not in {(r["method"], *r["ops"]) for r in rows}]
    return {
        "meta": {
            "labels": analysis.labels, "numdiff_version": analysis.numdiff_version, "created": analysis.created_utc,
            "format_version": analysis.format_version,
            "artifacts": [a.model_dump(mode="json") for a in analysis.artifacts],
            "time_unit": analysis.profile.time_unit,
            "graph": None if analysis.gap is None else analysis.gap.graph_name,
            "reference_inputs": None if analysis.gap is None else analysis.gap.reference_inputs,
            "gap_unavailable": analysis.gap_unavailable,
            "culprits_available": analysis.culprits.available, "culprits_reason": analysis.culprits.reason,
            "culprits_headline": analysis.culprits.headline,
            "inputs_in_doubt": analysis.culprits.inputs_in_doubt, "inputs_note": analysis.culprits.inputs_note,
            "methods_in_doubt": analysis.culprits.methods_in_doubt,
            "cause_means": {"culprit": CULPRIT_MEANS, "inherited": INHERITED_MEANS},
            "match_counts": {} if analysis.gap is None else analysis.gap.match_counts,
            "match_explanation": {} if analysis.gap is None else analysis.gap.match_explanation,
            "notes": analysis.notes + ([] if analysis.gap is None else analysis.gap.notes),
        },
        "rows": rows, "events": events, "timed": timed,
        "modules": sorted(modules.values(), key=lambda m: -float(m["p50"])),
        "extra_culprits": unmatched_culprits,
    }
