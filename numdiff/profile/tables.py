"""Render DataFrames as text tables (terminal) or HTML (notebooks)."""

from __future__ import annotations

import warnings
from typing import IO

import pandas as pd

__all__ = ["in_notebook", "render_grid", "show_table"]


def in_notebook() -> bool:
    """Whether we run inside an IPython kernel that can display rich output."""
    try:
        from IPython import get_ipython  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


#: A grid pads every cell of a column to its widest cell, so one very long cell (a crafted event
#: name of a megabyte) would make every row that wide: past this many characters, long cells are
#: shortened (with a warning that counts them) instead of rendering hundreds of megabytes.
GRID_CHAR_BUDGET = 16 << 20
#: Width long cells are cut to when the budget is exceeded.
SHORT_CELL = 200


def render_grid(df: pd.DataFrame) -> str:
    """The frame as a box-drawn grid, index included (the reference's ``fancy_grid`` table).

    The text is the reference's except when the grid would pass ``GRID_CHAR_BUDGET``
    characters: then cells longer than ``SHORT_CELL`` are shortened, and a warning says how many.
    """
    from tabulate import tabulate

    widths = [len(str(c)) for c in df.columns]
    longest = [max(_widest(df.iloc[:, i]), w) for i, w in enumerate(widths)]
    estimate = (sum(longest) + 3 * len(longest) + 16) * (2 * len(df) + 3)
    if estimate > GRID_CHAR_BUDGET:
        df, shortened = _shorten(df)
        if shortened:
            warnings.warn(f"print_data_tabular: {shortened} cell(s) longer than {SHORT_CELL} characters were "
                          f"shortened: the grid would have been about {estimate >> 20} MiB of text "
                          "(to_dataframe() keeps them whole)", stacklevel=3)
    return str(tabulate(df, headers="keys", tablefmt="fancy_grid"))


#: Width assumed for numbers and booleans (a float's repr is at most about 24 characters).
_NUMBER_WIDTH = 32


def _widest(column: pd.Series) -> int:
    """The longest cell's text in ``column``; numbers and booleans are not converted (bounded width)."""
    if len(column) == 0:
        return 0
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return _NUMBER_WIDTH
    return int(column.astype(str).str.len().fillna(0).max())


def _shorten(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    out = df.copy()
    count = 0
    for i in range(out.shape[1]):
        cells = []
        for value in out.iloc[:, i]:
            text = str(value)
            if len(text) > SHORT_CELL:
                count += 1
                value = f"{text[:SHORT_CELL]}… ({len(text)} characters)"
            cells.append(value)
        out.isetitem(i, pd.Series(cells, index=out.index, dtype=object))
    return out, count


def show_table(df: pd.DataFrame, file: IO[str]) -> None:
    """Display ``df`` in a notebook, else print it as a grid to ``file``."""
    if in_notebook():
        from IPython.display import display  # type: ignore[import-not-found,unused-ignore]

        display(df)  # type: ignore[no-untyped-call,unused-ignore]
        return
    print(render_grid(df), file=file)
