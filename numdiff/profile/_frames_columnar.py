"""The profiling DataFrame of a block computed on its columns, without making ``Event`` records.

Used while a block's events are still in columns (the ``BlockColumns`` an ``EventBlock`` hands to
:func:`numdiff.profile.frames.block_dataframe`): the cells are the ones ``Event.asdict`` gives, with
the op types, stack traces, module hierarchy and backend names the ETRecord linked to each slot
(``BlockColumns.links``). Statistics are numpy reductions over
each slot's samples, a contiguous row, as ``PerfData`` computes them over its list; a block whose
samples hold NaN (where Python's ``min``/``max`` and numpy's disagree) returns None and the caller
uses the records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from numdiff.profile.cells import op_types_cell

if TYPE_CHECKING:
    from numdiff.profile._columns import BlockColumns

__all__ = ["columnar_rows"]


def _stats(cols: BlockColumns) -> dict[str, list[float | None]] | None:
    profiled = cols.profiled
    samples = np.ascontiguousarray(cols.durations.T[profiled])  # profiled slots x runs, one row each
    if np.isnan(samples).any():
        return None
    out: dict[str, list[float | None]] = {}
    reduced: dict[str, Callable[[], npt.NDArray[np.float64]]] = {
        "p10": lambda: np.percentile(samples, 10, axis=1),
        "p50": lambda: np.percentile(samples, 50, axis=1),
        "p90": lambda: np.percentile(samples, 90, axis=1),
        "avg": lambda: np.mean(samples, axis=1),
        "min": lambda: np.min(samples, axis=1),
        "max": lambda: np.max(samples, axis=1),
    }
    where = np.flatnonzero(profiled).tolist()
    for name, compute in reduced.items():
        values: list[float | None] = [None] * len(cols)
        for j, v in zip(where, compute().tolist() if samples.size else [], strict=False):
            values[j] = v
        out[name] = values
    return out


def columnar_rows(cols: BlockColumns, units: str) -> dict[str, list[Any]] | None:
    """Column name → cells, in ``Event.asdict`` order (list cells unwrapped); None: use the records."""
    stats = _stats(cols)
    if stats is None:
        return None
    n = len(cols)
    profiled = cols.profiled.tolist()
    raw = cols.durations.T.tolist()
    starts = cols.start_times.T.tolist()
    data: dict[str, list[Any]] = {
        "event_name": list(cols.names),
        "raw": [raw[j] if profiled[j] else None for j in range(n)],
    }
    for name, values in stats.items():
        data[name + units] = values
    links = cols.links
    if links:
        data["op_types"] = [op_types_cell(link.op_types) for link in links]
    else:
        data["op_types"] = [[] for _ in range(n)]
    data["delegate_debug_identifier"] = list(cols.identifiers)
    data["stack_traces"] = [link.stack_traces for link in links] if links else [{} for _ in range(n)]
    data["module_hierarchy"] = [link.module_hierarchy for link in links] if links else [{} for _ in range(n)]
    data["is_delegated_op"] = list(cols.delegated)
    data["delegate_backend_name"] = [link.delegate_backend_name for link in links] if links else [None] * n
    data["debug_data"] = [cols.debug[j].debug_data if j in cols.debug else [] for j in range(n)]
    data["start_time"] = [starts[j] if profiled[j] else None for j in range(n)]
    return data
