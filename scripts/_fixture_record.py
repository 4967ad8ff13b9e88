"""Record what ExecuTorch's own Inspector answers on a set of artifacts, as JSON.

Dev-only helper of ``scripts/make_fixtures.py``; runs in the oracle virtualenv
(ExecuTorch 1.5.1), never in numdiff's CI. The JSON layout is described in
``tests/fixtures/README.md``.

Two encodings are used:

* ``encode_value`` for data values (debug data, run/reference outputs, AOT and
  runtime intermediate outputs): a tensor becomes
  ``{"tensor": true, "dtype": ..., "shape": [...], "values": [...]}`` (or
  ``"sha256"`` of its contiguous bytes instead of ``"values"`` when it has more
  than ``MAX_INLINE_NUMEL`` elements), a list/tuple becomes ``{"list": [...]}``,
  scalars and ``None`` stay as they are, anything else becomes ``{"repr": ...}``.
* ``to_jsonable`` for metadata (module hierarchy, stack traces, handles, gap
  numbers, DataFrame cells): tuples become lists, numpy scalars become Python
  scalars, a non-string dict key becomes ``json.dumps`` of its jsonable form,
  and tensors fall back to ``encode_value``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import traceback
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

MAX_INLINE_NUMEL = 20000

#: The to_dataframe() columns kept in each recorded DataFrame row.
DATAFRAME_ROW_COLUMNS = (
    "event_block_name",
    "event_name",
    "p10 (ms)",
    "p50 (ms)",
    "p90 (ms)",
    "avg (ms)",
    "min (ms)",
    "max (ms)",
    "op_types",
    "delegate_debug_identifier",
    "is_delegated_op",
    "delegate_backend_name",
    "start_time",
)

GAP_GRAPHS: tuple[str | None, ...] = (None, "edge_dialect_exported_program")
GAP_METRICS = ("L1", "MSE", "SNR")


def encode_tensor(t: torch.Tensor) -> dict[str, Any]:
    """Encode a tensor as dtype, shape and values (or a SHA-256 of its bytes)."""
    t = t.detach()
    out: dict[str, Any] = {
        "tensor": True,
        "dtype": str(t.dtype),
        "shape": list(t.shape),
    }
    if t.numel() <= MAX_INLINE_NUMEL:
        out["values"] = t.flatten().tolist()
    else:
        data = t.contiguous().view(torch.uint8).numpy().tobytes()
        out["sha256"] = hashlib.sha256(data).hexdigest()
    return out


def encode_value(x: Any) -> Any:
    """Encode a data value (see the module docstring)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, torch.Tensor):
        return encode_tensor(x)
    if isinstance(x, (list, tuple)):
        return {"list": [encode_value(v) for v in x]}
    if isinstance(x, np.generic):
        return x.item()
    return {"repr": repr(x)}


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    return json.dumps(to_jsonable(k), allow_nan=True)


def to_jsonable(x: Any) -> Any:
    """Convert metadata to plain JSON types (see the module docstring)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {_key(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, torch.Tensor):
        return encode_tensor(x)
    if x is pd.NA or x is pd.NaT:
        return None
    return {"repr": repr(x)}


def error_record(e: BaseException) -> dict[str, Any]:
    return {"error": {"type": type(e).__name__, "message": str(e)}}


def _guard(fn: Callable[[], Any]) -> Any:
    """Run fn; on an exception return the error record instead."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - recording the oracle's failures is the point
        traceback.print_exc()
        return error_record(e)


def encode_perf(perf: Any) -> dict[str, Any] | None:
    if perf is None:
        return None
    return {
        "raw": [float(v) for v in perf.raw],
        "p10": float(perf.p10),
        "p50": float(perf.p50),
        "p90": float(perf.p90),
        "avg": float(perf.avg),
        "min": float(perf.min),
        "max": float(perf.max),
    }


def encode_event(ev: Any) -> dict[str, Any]:
    return {
        "name": ev.name,
        "instruction_id": ev._instruction_id,
        "delegate_debug_identifier": to_jsonable(ev.delegate_debug_identifier),
        "debug_handles": to_jsonable(ev.debug_handles),
        "num_outputs": ev.num_outputs,
        "op_types": list(ev.op_types),
        "stack_traces": to_jsonable(ev.stack_traces),
        "module_hierarchy": to_jsonable(ev.module_hierarchy),
        "is_delegated_op": ev.is_delegated_op,
        "delegate_backend_name": ev.delegate_backend_name,
        "perf_data": encode_perf(ev.perf_data),
        "start_time": to_jsonable(ev.start_time),
        "delegate_debug_metadatas": to_jsonable(ev.delegate_debug_metadatas),
        "debug_data": [encode_value(d) for d in ev.debug_data],
    }


def encode_event_blocks(inspector: Any) -> list[dict[str, Any]]:
    blocks = []
    for block in inspector.event_blocks:
        blocks.append(
            {
                "name": block.name,
                "bundled_input_index": block.bundled_input_index,
                "run_output": (
                    None
                    if block.run_output is None
                    else [encode_value(v) for v in block.run_output]
                ),
                "reference_output": (
                    None
                    if block.reference_output is None
                    else [encode_value(v) for v in block.reference_output]
                ),
                "events": [encode_event(ev) for ev in block.events],
            }
        )
    return blocks


def encode_dataframe(inspector: Any) -> dict[str, Any]:
    df = inspector.to_dataframe()
    df_no_units = inspector.to_dataframe(include_units=False)
    rows = []
    for _, row in df.iterrows():
        rows.append({c: to_jsonable(row[c]) for c in DATAFRAME_ROW_COLUMNS})
    return {
        "columns": [str(c) for c in df.columns],
        "columns_no_units": [str(c) for c in df_no_units.columns],
        "rows": rows,
    }


def module_names(inspector: Any, limit: int = 24) -> list[str]:
    """Distinct module-hierarchy keys seen on events (first ``limit``), in order."""
    names: list[str] = []
    for block in inspector.event_blocks:
        for ev in block.events:
            for hierarchy in ev.module_hierarchy.values():
                for key in hierarchy or {}:
                    if key not in names:
                        names.append(key)
    return names[:limit]


def find_totals(inspector: Any) -> dict[str, float]:
    names = module_names(inspector) + ["no_such_module"]
    return {n: float(inspector.find_total_for_module(n)) for n in names}


def _print_table(inspector: Any) -> str:
    buf = io.StringIO()
    inspector.print_data_tabular(file=buf)
    return buf.getvalue()


def _tsv(inspector: Any) -> str:
    buf = io.StringIO()
    inspector.save_data_to_tsv(buf)
    return buf.getvalue()


def _edge_program_str(inspector: Any) -> str | None:
    with contextlib.redirect_stderr(io.StringIO()):
        ep = inspector.get_exported_program()
    return None if ep is None else str(ep)[:2000]


def record_inspector(inspector: Any) -> dict[str, Any]:
    """Everything the Inspector answers without ETRecord-based numerics."""
    return {
        "event_blocks": _guard(lambda: encode_event_blocks(inspector)),
        "dataframe": _guard(lambda: encode_dataframe(inspector)),
        "printed_table": _guard(lambda: _print_table(inspector)),
        "tsv": _guard(lambda: _tsv(inspector)),
        "find_total_for_module": _guard(lambda: find_totals(inspector)),
        "edge_program_str": _guard(lambda: _edge_program_str(inspector)),
    }


def _encode_gap(df: pd.DataFrame) -> dict[str, Any]:
    value_columns = {"aot_intermediate_output", "runtime_intermediate_output"}
    rows = []
    for _, row in df.iterrows():
        rows.append(
            {
                str(c): (encode_value(row[c]) if c in value_columns else to_jsonable(row[c]))
                for c in df.columns
            }
        )
    return {"columns": [str(c) for c in df.columns], "rows": rows}


def record_gaps(inspector: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for graph in GAP_GRAPHS:
        for metric in GAP_METRICS:
            key = f"{graph or 'default'}/{metric}"
            out[key] = _guard(
                lambda g=graph, m=metric: _encode_gap(
                    inspector.calculate_numeric_gap(m, reference_graph=g)
                )
            )
    return out


def record_compare_results(inspector: Any) -> dict[str, Any]:
    """compare_results(reference_output, run_output) per block index that has both."""
    from executorch.devtools.inspector._inspector_utils import compare_results

    out: dict[str, Any] = {}
    for i, block in enumerate(inspector.event_blocks):
        if not block.run_output or not block.reference_output:
            continue

        def run(b: Any = block) -> Any:
            with contextlib.redirect_stdout(io.StringIO()):
                res = compare_results(b.reference_output, b.run_output)
            return {k: to_jsonable(v) for k, v in res.items()}

        out[str(i)] = {"block_name": block.name, "result": _guard(run)}
    return out


def nan_safe_equal(a: Any, b: Any) -> bool:
    """Structural equality where NaN equals NaN (for self-checks)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(nan_safe_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(nan_safe_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)
