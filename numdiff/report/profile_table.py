"""The profiling table for a person at a terminal: a few columns, fitted to the terminal's width.

``numdiff profile`` prints this by default (``--full`` prints the drop-in's grid of every column).
One section per event block; one row per event in the order the runtime logged them
(``OPERATOR_CALL`` rows, a repeat of the op before them, left out as in the drop-in's table):

- **op**: the event's name, shortened in the middle when the terminal is too narrow;
- **calls**: how many runs logged the event;
- **p50**, **avg**: its duration in the target time unit;
- **share**: its average as a share of the block's ``Method::execute`` (blank when the block has none);
- **delegate**: the backend of a delegate call and of the ops inside it.

Names come from the ETDump: their control characters are shown as escapes (``numdiff._core.terminal``).

Example:
    >>> from numdiff.report.profile_table import render_profile_table  # doctest: +SKIP
    >>> print(render_profile_table(inspector.to_dataframe(), "ms", width=80))  # doctest: +SKIP
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import pandas as pd

from numdiff._core.events import OPERATOR_CALL
from numdiff._core.terminal import printable

__all__ = ["MIN_DELEGATE_WIDTH", "MIN_OP_WIDTH", "render_profile_table", "shorten_middle"]

#: The op column never gets narrower than this, however narrow the terminal.
MIN_OP_WIDTH = 14
#: Nor the delegate column, which gives way after the op column.
MIN_DELEGATE_WIDTH = 8
_EXECUTE = "Method::execute"
_GAP = "  "
_FOOTER = "share: of the block's Method::execute. {full} shows every column (the drop-in's grid)."
_FOOTER_COMMAND = "share: of the block's Method::execute. Every column (the drop-in's grid):"


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with "…" (both ends stay readable)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def _decimals(df: pd.DataFrame, columns: Sequence[str]) -> int:
    """Decimals that give the table's largest duration 4 significant digits (0 to 6), for every row alike."""
    values = [float(v) for c in columns for v in df[c] if isinstance(v, (int, float)) and math.isfinite(v)]
    largest = max((abs(v) for v in values), default=0.0)
    if largest == 0:
        return 0
    return min(max(3 - math.floor(math.log10(largest)), 0), 6)


def _duration(value: object, decimals: int) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return ""
    return "0" if value == 0 else f"{value:.{decimals}f}"


def _share(value: object, total: float | None) -> str:
    if total is None or total <= 0 or not isinstance(value, (int, float)) or math.isnan(value):
        return ""
    return f"{100 * value / total:.1f}%"


def _runs(raw: object) -> str:
    return str(len(raw)) if isinstance(raw, (list, tuple)) else ""


def _block_rows(block: pd.DataFrame, unit: str, decimals: int) -> tuple[list[list[str]], int]:
    p50, avg = f"p50 ({unit})", f"avg ({unit})"
    execute = block.loc[block["event_name"] == _EXECUTE, avg]
    total = float(execute.iloc[0]) if len(execute) and not pd.isna(execute.iloc[0]) else None
    rows: list[list[str]] = []
    runs = 0
    for _, e in block.iterrows():
        runs = max(runs, len(e["raw"]) if isinstance(e["raw"], (list, tuple)) else 0)
        if e["event_name"] == OPERATOR_CALL:
            continue
        backend = e.get("delegate_backend_name")
        delegate = "" if backend is None or pd.isna(backend) else printable(backend, newlines=False)
        rows.append([printable(e["event_name"], newlines=False), _runs(e["raw"]), _duration(e[p50], decimals),
                     _duration(e[avg], decimals), _share(e[avg], total), delegate])
    return rows, runs


def _layout(headers: Sequence[str], bodies: Sequence[list[list[str]]], width: int) -> list[int]:
    """Column widths: every column as wide as its widest cell; when that is too wide, the op column
    gives way first (down to :data:`MIN_OP_WIDTH`), then the delegate column (to :data:`MIN_DELEGATE_WIDTH`)."""
    widths = [len(h) for h in headers]
    for rows in bodies:
        for row in rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row)]
    budget = width - sum(widths[1:-1]) - len(_GAP) * (len(headers) - 1)  # for op and delegate
    widths[0] = max(min(widths[0], budget - widths[-1]), MIN_OP_WIDTH)
    widths[-1] = max(min(widths[-1], budget - widths[0]), min(widths[-1], MIN_DELEGATE_WIDTH))
    return widths


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    out = [shorten_middle(cells[0], widths[0]).ljust(widths[0])]
    for i, (cell, w) in enumerate(zip(cells[1:], widths[1:]), start=1):
        out.append(shorten_middle(cell, w).ljust(w) if i == len(cells) - 1 else cell.rjust(w))
    return _GAP.join(out).rstrip()


def render_profile_table(df: pd.DataFrame, unit: str, width: int = 100, full: str = "--full") -> str:
    """The events of ``df`` (``Inspector.to_dataframe()`` with units) as a table ``width`` characters wide.

    Args:
        df: One row per event, with ``event_block_name``, ``event_name``, ``raw``, ``p50 (<unit>)``,
            ``avg (<unit>)`` and ``delegate_backend_name``.
        unit: The time unit of the perf columns (the Inspector's target time scale).
        width: The terminal's width. Only the op column shrinks; it never goes below
            :data:`MIN_OP_WIDTH`. Defaults to 100.
        full: How the footer names the way to the drop-in's grid: an option ("--full", the default), or a
            whole command, printed on a line of its own so that it can be copied.

    Returns:
        The table, without a trailing newline; a sentence when there are no events.
    """
    if df.empty:
        return "no events: the ETDump holds no profiled runs"
    headers = ["op", "calls", f"p50 ({unit})", f"avg ({unit})", "share", "delegate"]
    sections: list[tuple[str, list[list[str]]]] = []
    shown = df[df["event_name"] != OPERATOR_CALL]
    decimals = _decimals(shown, [f"p50 ({unit})", f"avg ({unit})"])
    for name, block in df.groupby("event_block_name", sort=False):
        rows, runs = _block_rows(block, unit, decimals)
        sections.append((f"{printable(name, newlines=False)} ({runs} run{'s' if runs != 1 else ''})", rows))
    widths = _layout(headers, [rows for _, rows in sections], width)
    out: list[str] = []
    for title, rows in sections:
        if out:
            out.append("")
        out.append(title)
        out.append(_line(headers, widths))
        out.append(_GAP.join("─" * w for w in widths))
        out.extend(_line(row, widths) for row in rows)
    out.append("")
    if full.startswith("-"):  # an option of the command that printed the table
        footer = _FOOTER.format(full=full)
    else:  # a whole command line: on a line of its own, whole, so that it can be copied
        footer = _FOOTER_COMMAND
    out.extend(textwrap.wrap(footer, max(width, 20), break_on_hyphens=False, break_long_words=False))
    if not full.startswith("-"):
        out.append(f"  {full}")
    return "\n".join(out)
