"""The data the HTML report shows, flattened from an Analysis into plain JSON-ready dicts."""

from __future__ import annotations

import math
import re
from typing import Any

from numdiff.analysis.models import Analysis, CulpritRow, GapRowModel

__all__ = ["noise_floor_db", "report_data"]

#: Ideal rounding noise of a full-scale signal stored in ``bits`` significant bits is
#: 6.02·bits + 1.76 dB (bits = mantissa + 1 for floats, the integer width for int8). Real kernels
#: round many times (reductions, fused ops, accumulated upstream error): the floor drawn in the
#: report allows ``ACCUMULATION_ALLOWANCE_DB`` for that (ExecuTorch's own fp32 fixtures sit at
#: 133-146 dB, the ideal being 146 dB).
_SIGNIFICANT_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8, "int8": 8, "uint8": 8, "int16": 16}
ACCUMULATION_ALLOWANCE_DB = 20.0
_FRAMEWORK = re.compile(r"^(Method|Program)::")
_QUANTIZED_OPS = ("quantize_per_tensor", "quantize_per_channel", "dequantize_per_tensor", "dequantize_per_channel")


def noise_floor_db(row: GapRowModel) -> tuple[float | None, str]:
    """The SNR below which a row's error is more than rounding noise, and where that number comes from.

    A row whose reference ops include (de)quantize is held to the int8 floor; otherwise the
    floor is the rounding noise of the runtime output's dtype, less ``ACCUMULATION_ALLOWANCE_DB``.
    """
    if any(op.startswith(_QUANTIZED_OPS) for op in row.aot_ops):
        dtype = "int8"
    elif row.runtime_stats is not None:
        dtype = row.runtime_stats.dtype.split(",")[0]
    else:
        return None, "unknown dtype"
    bits = _SIGNIFICANT_BITS.get(dtype)
    if bits is None:
        return None, f"no floor for {dtype}"
    floor = 6.02 * bits + 1.76 - ACCUMULATION_ALLOWANCE_DB
    return round(floor, 2), f"{dtype} rounding 6.02·{bits}+1.76 dB, less {ACCUMULATION_ALLOWANCE_DB:g} dB for accumulation"


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


def _culprit_key(row: CulpritRow) -> tuple[str, ...]:
    return tuple(row.aot_ops)


def report_data(analysis: Analysis) -> dict[str, Any]:
    """Everything the page's script needs, in one JSON-ready dict."""
    culprits = {_culprit_key(c): c for c in analysis.culprits.rows}
    rows: list[dict[str, Any]] = []
    for r in (analysis.gap.rows if analysis.gap is not None else []):
        floor, floor_src = noise_floor_db(r)
        c = culprits.get(tuple(r.aot_ops))
        rows.append({
            "i": r.index, "op": r.aot_ops[-1] if r.aot_ops else "", "ops": r.aot_ops, "rops": r.runtime_ops,
            "handle": r.aot_debug_handle, "module": r.module, "snr": _num(_worst(r.snr, lowest=True)),
            "mse": _num(_worst(r.mse, lowest=False)), "l1": _num(_worst(r.l1, lowest=False)),
            "snr_all": [_num(v) for v in r.snr], "maxabs": _num(r.max_abs_error), "matched": r.matched,
            "match": r.match, "match_expl": r.match_explanation, "note": r.note, "src": r.source_line,
            "trace": r.stack_trace, "floor": floor, "floor_src": floor_src,
            "aot": None if r.aot_stats is None else r.aot_stats.model_dump(mode="json"),
            "rt": None if r.runtime_stats is None else r.runtime_stats.model_dump(mode="json"),
            "hist": None if r.error_histogram is None else r.error_histogram.model_dump(mode="json"),
            "local": None if c is None else _num(c.local_gap), "accum": None if c is None else _num(c.accumulated_gap),
            "culprit": bool(c is not None and c.is_culprit), "verdict": None if c is None else c.verdict,
            "noise_units": None if c is None else _num(c.local_noise_units), "noise": None if c is None else c.noise,
        })
    events: list[dict[str, Any]] = []
    modules: dict[str, dict[str, Any]] = {}
    timed: list[int] = []  # the events on the latency chart: ops and delegate calls, no wrappers or framework steps
    for block in analysis.profile.blocks:
        for e in block.events:
            wrapper = _FRAMEWORK.match(e.name) is not None or e.name == "OPERATOR_CALL"
            if e.p50 is not None and not wrapper:
                timed.append(len(events))
            events.append({"block": block.name, "i": e.index, "name": e.name, "p50": e.p50, "p10": e.p10,
                           "p90": e.p90, "avg": e.avg, "min": e.min, "max": e.max, "runs": e.runs,
                           "module": e.module, "delegated": bool(e.is_delegated_op), "backend": e.delegate_backend,
                           "ops": e.op_types, "top": not wrapper and not e.is_delegated_op})
            if e.p50 is None or wrapper or e.is_delegated_op:
                continue  # a delegate's internal events are inside its DELEGATE_CALL's time
            key = f"delegate {e.delegate_backend or '?'}" if e.name == "DELEGATE_CALL" else e.module
            if key is None:
                continue
            m = modules.setdefault(key, {"module": key, "p50": 0.0, "count": 0})
            m["p50"] += e.p50
            m["count"] += 1
    unmatched_culprits = [c.model_dump(mode="json") for c in analysis.culprits.rows
                          if c.is_culprit and _culprit_key(c) not in {tuple(r["ops"]) for r in rows}]
    return {
        "meta": {
            "labels": analysis.labels, "numdiff_version": analysis.numdiff_version, "created": analysis.created_utc,
            "format_version": analysis.format_version,
            "artifacts": [a.model_dump(mode="json") for a in analysis.artifacts],
            "time_unit": analysis.profile.time_unit,
            "graph": None if analysis.gap is None else analysis.gap.graph_name,
            "gap_unavailable": analysis.gap_unavailable,
            "culprits_available": analysis.culprits.available, "culprits_reason": analysis.culprits.reason,
            "match_counts": {} if analysis.gap is None else analysis.gap.match_counts,
            "match_explanation": {} if analysis.gap is None else analysis.gap.match_explanation,
            "notes": analysis.notes + ([] if analysis.gap is None else analysis.gap.notes),
        },
        "rows": rows, "events": events, "timed": timed,
        "modules": sorted(modules.values(), key=lambda m: -float(m["p50"])),
        "extra_culprits": unmatched_culprits,
    }
