"""The per-layer gap as something to look at: one line per layer, the user's own source line.

Rows are ranked worst first by the metric's own ``higher_is_better``; the source line is
:func:`numdiff._core.stack.user_frame`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import pandas as pd

from numdiff._core.names import computing_ops, counted, ops_title
from numdiff._core.stack import user_frame
from numdiff._core.terminal import printable
from numdiff.report.text_table import ColumnFit, fitted_table, said_once

if TYPE_CHECKING:
    from numdiff.comparators import NumericalComparatorBase

__all__ = ["format_gap", "gap_summary", "render_gap_table", "worst_rows"]


def format_gap(gap: float | Sequence[float]) -> str:
    values: Sequence[float] = gap if isinstance(gap, (list, tuple)) else [cast(float, gap)]
    return ", ".join("nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:.4g}")
                     for v in (float(x) for x in values))


def _shape(value: object) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_shape(v) for v in value) + ")"
    return type(value).__name__


def _score(gap: float | Sequence[float], higher_is_better: bool) -> float:
    """One number per row for ranking: the worst element (NaN ranks worst of all)."""
    values = [float(x) for x in (gap if isinstance(gap, (list, tuple)) else [cast(float, gap)])]
    if not values or any(math.isnan(v) for v in values):
        return -math.inf if higher_is_better else math.inf
    return min(values) if higher_is_better else max(values)


def gap_summary(df: pd.DataFrame, module_paths: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A compact view of a gap DataFrame: handle, ops, shapes, gap, module, source line.

    The ``module`` column is there only with ``module_paths`` (numdiff's own analysis knows them): the
    reference's ``calculate_numeric_gap`` has no such column, so its rows are shown without one rather
    than with an empty one.
    """
    rows = []
    for _, r in df.iterrows():
        traces: Mapping[str, str | None] = r.get("stacktraces") or {}
        ops = [*computing_ops(list(r["aot_ops"])), *r["aot_ops"]]  # a delegate's dequantizes: the root module
        source = next((s for s in (user_frame(traces.get(op)) for op in ops) if s), None)
        module = next((module_paths[op] for op in ops if module_paths and op in module_paths), None)
        row = {
            "handle": ",".join(str(h) for h in r["aot_debug_handle"]),
            "aot_ops": ", ".join(r["aot_ops"]),
            "runtime_ops": ", ".join(r["runtime_ops"]),
            "shape": _shape(r["aot_intermediate_output"]),
            "gap": format_gap(r["gap"]),
            **({"module": module or ""} if module_paths is not None else {}),
            "source": source or "",
        }
        if "note" in r and isinstance(r["note"], str):
            row["note"] = r["note"]
        rows.append(row)
    return pd.DataFrame(rows)


def _higher_is_better(metric: str | NumericalComparatorBase | type[NumericalComparatorBase]) -> bool:
    """The metric's own direction; a name no comparator is registered under reads as an error (lower is better)."""
    if isinstance(metric, str):
        from numdiff.comparators import comparator_class  # torch only when a name must be looked up

        cls = comparator_class(metric)
        return cls.higher_is_better if cls is not None else False
    return metric.higher_is_better


def worst_rows(df: pd.DataFrame, metric: str | NumericalComparatorBase | type[NumericalComparatorBase],
               n: int | None = None) -> pd.DataFrame:
    """Rows of ``df`` sorted worst first for ``metric``: a comparator, its class, its registered name
    or its class name (``"SNRComparator"``); the direction is the metric's ``higher_is_better``."""
    higher = _higher_is_better(metric)
    scores = [_score(g, higher) for g in df["gap"]]
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=not higher)
    out = df.iloc[order]
    return out if n is None else out.head(n)


#: How the gap table gives way on a narrow terminal (:func:`numdiff.report.text_table.fitted_table`).
_FIT = ColumnFit(unwrapped=("shape", "gap"), droppable=("handle", "shape", "module"), prose=("source", "note", "module"))


def render_gap_table(df: pd.DataFrame, metric: str = "", module_paths: Mapping[str, str] | None = None,
                     columns: Sequence[str] | None = None, title: str | None = None,
                     width: int | None = None) -> str:
    """The gap as a text table (runtime order), for terminals and test failures.

    ``title`` replaces the first line (``"<n> layers compared (<metric>)"``), e.g. when ``df`` holds only
    some of the compared layers. ``width`` fits the table to a terminal that many characters wide: long
    cells (ops, module paths, source lines) are wrapped and, when that is not enough, the handle, shape
    and module columns are left out (a last line says which); without it, cells wrap at 60 characters.
    Op names, module paths and source lines come from the ETRecord and the ETDump: their control
    characters are shown as escapes.
    """
    import textwrap

    from tabulate import tabulate

    summary = gap_summary(df, module_paths)
    if len(summary):  # a delegate's row holds hundreds of ops: one short line each (CSV keeps every name)
        summary["aot_ops"] = [ops_title(list(ops)) for ops in df["aot_ops"]]
        summary["runtime_ops"] = [counted(list(ops)) for ops in df["runtime_ops"]]
        for col in ("module", "source"):  # the ten ops of one source line: its text once
            if col in summary.columns:
                summary[col] = said_once(list(summary[col]))
    if columns is not None and len(summary):
        summary = summary[[c for c in columns if c in summary.columns]]
    if title is None:
        title = f"{len(df)} layers compared" + (f" ({printable(metric, newlines=False)})" if metric else "")
    else:
        title = printable(title, newlines=False)
    if width is not None:
        title = "\n".join(textwrap.wrap(title, max(width, 20), break_on_hyphens=False)) or title
    if not len(summary):
        return title
    summary = summary.map(lambda v: printable(v, newlines=False) if isinstance(v, str) else v)
    if width is None:
        return title + "\n" + str(tabulate(summary, headers="keys", tablefmt="simple", showindex=False, maxcolwidths=60))
    table = fitted_table(summary, width, _FIT)
    return title + "\n" + table
