"""DataFrames of the profiling view, with the reference's columns, row order and dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from numdiff.profile._frames_columnar import columnar_rows
from numdiff.profile.cells import event_columns

if TYPE_CHECKING:
    from numdiff.profile._columns import BlockColumns
    from numdiff.profile.events import EventBlock

__all__ = ["block_dataframe", "empty_events_dataframe", "events_dataframe", "printable_dataframe"]

#: Columns left out of the printed table and the TSV (too wide to read).
HIDDEN_WHEN_PRINTING = ("raw", "delegate_debug_identifier", "stack_traces", "module_hierarchy", "debug_data")
#: Events left out of the printed table and the TSV: they repeat the op event before them.
EXCLUDED_EVENTS_WHEN_PRINTING = ("OPERATOR_CALL",)


def _kind(v: object) -> str:
    if v is None:
        return "object"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int64"
    if isinstance(v, (float, np.floating)):
        return "float64"
    if isinstance(v, str):
        return "str"
    return "object"


def _column(values: list[Any]) -> pd.Series:
    """A column typed the way concatenating one-row frames types it.

    Each row alone infers its own dtype; rows of one kind keep it, ints mixed with floats become
    floats, any other mix stays ``object`` with the values untouched (None stays None, not NaN).
    """
    kinds = {_kind(v) for v in values}
    if len(kinds) == 1:
        (kind,) = kinds
        if kind in ("bool", "int64", "float64"):
            return pd.Series(values, dtype=kind)
        if kind == "str":
            return pd.Series(values)
    elif kinds == {"int64", "float64"}:
        return pd.Series(values, dtype="float64")
    out = pd.Series([None] * len(values), dtype=object)
    out[:] = values if values else []
    return out


def events_dataframe(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A frame from ``Event.asdict`` rows (list-valued cells unwrapped)."""
    data = {}
    for col in columns:
        cells = []
        for row in rows:
            cell = row[col]
            cells.append(cell[0] if isinstance(cell, list) else cell)
        data[col] = _column(cells)
    return pd.DataFrame(data, columns=list(columns))


def block_dataframe(
    block: EventBlock, cols: BlockColumns | None, include_units: bool, include_delegate_debug_data: bool
) -> pd.DataFrame:
    """The block's frame; computed on ``cols``, the block's events in columns, while its ``Event``
    records were not made (None once they were)."""
    units = f" ({block.target_time_scale.value})" if include_units else ""
    if cols is not None and len(cols) and not (include_delegate_debug_data and (cols.metadata or cols.parser)):
        data = columnar_rows(cols, units)
        if data is not None:
            df = pd.DataFrame({name: _column(cells) for name, cells in data.items()}, columns=list(data))
            n = len(cols)
            df.insert(0, "event_block_name", np.array([block.name] * n, dtype=object), allow_duplicates=True)
            return df
    rows = [e.asdict(_units=units) for e in block.events]
    columns = list(rows[0]) if rows else event_columns(units)
    df = events_dataframe(rows, columns)
    df.insert(0, "event_block_name", np.array([block.name] * len(block.events), dtype=object), allow_duplicates=True)
    if include_delegate_debug_data:
        extra = [_delegate_series(e.delegate_debug_metadatas) for e in block.events]
        if any(not s.empty for s in extra):
            df = pd.concat([df, pd.DataFrame(extra)], axis=1)
    return df


def _delegate_series(metadata: list[str] | dict[str, Any] | None) -> pd.Series:
    if metadata is None or len(metadata) == 0:
        return pd.Series(dtype=object)
    if isinstance(metadata, list):
        return pd.Series([metadata], index=["delegate_debug_metadata"])
    if isinstance(metadata, dict):
        return pd.Series(metadata)
    from numdiff.errors import UsageError

    raise UsageError(
        f"delegate_metadata_parser returned a {type(metadata).__name__}\n"
        "It must return a list of strings or a dict of column name to value."
    )


def empty_events_dataframe(include_units: bool = True, units: str = "ms") -> pd.DataFrame:
    """The events frame of a dump with no events: no rows, the usual columns."""
    df = events_dataframe([], event_columns(f" ({units})" if include_units else ""))
    df.insert(0, "event_block_name", pd.Series([], dtype=object), allow_duplicates=True)
    return df


def printable_dataframe(df: pd.DataFrame) -> pd.DataFrame:
    """The frame the table and TSV show: wide columns and ``OPERATOR_CALL`` rows left out.

    A frame without columns (a dump with no runs, so no event blocks) gives an empty table with
    the usual headers rather than an error: the ETDump is valid, it just recorded nothing.
    """
    if len(df.columns) == 0:
        df = empty_events_dataframe()
    out = df.drop(columns=[c for c in HIDDEN_WHEN_PRINTING if c in df.columns])
    for name in EXCLUDED_EVENTS_WHEN_PRINTING:
        if "event_name" in out.columns and len(out):
            out = out[~out["event_name"].astype(str).str.contains(name, regex=False)]
    return out.reset_index(drop=True)
