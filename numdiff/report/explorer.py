"""Model Explorer overlays: node-data files (local error, accumulated error, latency per ATen node).

The files follow Model Explorer's custom node data format for one graph: ``{"name": ...,
"results": {node id: {"value": number}}, "thresholds" | "gradient": [...]}``, where node ids
are the reference graph's FX node names (what Model Explorer's PyTorch ExportedProgram adapter
uses). Each value goes on the node whose output was compared: the last reference op of a gap
row (for a delegate call, the op that produced the delegate's output). An identical output
(infinite SNR) is written as ``INFINITE_SNR_DB``; rows without a finite value are left out.
Latency is the p50 of the runtime events of the row (a delegate call's whole time on its last
op), in µs.

Writing the files needs nothing beyond numdiff; ``numdiff explore`` opens them with the
``ai-edge-model-explorer`` package (the ``explorer`` extra).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from numdiff._core.time_units import unit_factor
from numdiff.analysis.models import Analysis

__all__ = ["INFINITE_SNR_DB", "node_data", "write_node_data"]

INFINITE_SNR_DB = 200.0
#: SNR colours: red up to 20 dB, orange to 40, yellow to 60, light green to 100, green above.
SNR_THRESHOLDS = [{"value": 20, "bgColor": "#e53935"}, {"value": 40, "bgColor": "#fb8c00"},
                  {"value": 60, "bgColor": "#fdd835"}, {"value": 100, "bgColor": "#c5e1a5"},
                  {"value": 1e9, "bgColor": "#66bb6a"}]


def _snr_value(v: float | None) -> float | None:
    if v is None or math.isnan(v):
        return None
    return INFINITE_SNR_DB if v == math.inf else v


def node_data(analysis: Analysis) -> dict[str, dict[str, Any]]:
    """``{"accumulated_error" | "local_error" | "latency": graph node data}``; empty sections left out."""
    accumulated: dict[str, Any] = {}
    local: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    culprits = {(c.method, *c.aot_ops): c for c in analysis.culprits.rows}
    scale = unit_factor(analysis.profile.time_unit, "us")
    events = [e for b in analysis.profile.blocks for e in b.events if not e.is_delegated_op]
    for row in analysis.gap.rows if analysis.gap is not None else []:
        if not row.aot_ops:
            continue
        node = row.aot_ops[-1]
        finite = [v for v in (_snr_value(s) for s in row.snr) if v is not None]
        if finite:
            accumulated[node] = {"value": min(finite)}
        c = culprits.get((row.method, *row.aot_ops))
        if c is not None and (v := _snr_value(c.local_gap)) is not None:
            local[node] = {"value": v}
        handles = set(row.runtime_debug_handle)
        p50 = [e.p50 for e in events if e.name in row.runtime_ops and set(e.debug_handles) == handles and e.p50 is not None]
        if p50 and scale is not None:
            latency[node] = {"value": sum(p50) * scale}
    out: dict[str, dict[str, Any]] = {}
    if accumulated:
        out["accumulated_error"] = {"name": "numdiff: accumulated SNR (dB)", "results": accumulated,
                                    "thresholds": SNR_THRESHOLDS}
    if local:
        out["local_error"] = {"name": "numdiff: local SNR (dB)", "results": local, "thresholds": SNR_THRESHOLDS}
    if latency:
        out["latency"] = {"name": "numdiff: latency p50 (µs)", "results": latency,
                          "gradient": [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#d32f2f"}]}
    return out


def write_node_data(analysis: Analysis, folder: str | os.PathLike[str]) -> list[str]:
    """Write one ``<kind>.json`` per overlay into ``folder`` (created if needed); returns the paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for kind, data in node_data(analysis).items():
        path = os.path.join(os.fspath(folder), f"{kind}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, allow_nan=False)
        paths.append(path)
    return paths
