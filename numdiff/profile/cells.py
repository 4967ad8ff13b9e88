"""How an ``Event`` becomes one DataFrame row: the column order and the op-types cell.

Shared by the records (:mod:`numdiff.profile.events`, ``Event.asdict``) and the views that build the
same frame without records (:mod:`numdiff.profile.frames`, :mod:`numdiff.profile._frames_columnar`).
"""

from __future__ import annotations

__all__ = ["PERF_COLUMNS", "event_columns", "op_types_cell"]

#: The perf statistics columns, in ``Event.asdict`` order (before units are appended).
PERF_COLUMNS = ("p10", "p50", "p90", "avg", "min", "max")


def event_columns(units: str) -> list[str]:
    """The columns of ``Event.asdict(_units=units)``, in order."""
    return [
        "event_name",
        "raw",
        *(col + units for col in PERF_COLUMNS),
        "op_types",
        "delegate_debug_identifier",
        "stack_traces",
        "module_hierarchy",
        "is_delegated_op",
        "delegate_backend_name",
        "debug_data",
        "start_time",
    ]


def op_types_cell(ops: list[str]) -> list[str] | str:
    """The DataFrame cell of an event's op types: the list, or a summary string from five on (as the reference)."""
    return ops if len(ops) < 5 else f"['{ops[0]}', '{ops[1]}' ... '{ops[-1]}'] ({len(ops)} total)"
