"""Render DataFrames as text tables (terminal) or HTML (notebooks)."""

from __future__ import annotations

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


def render_grid(df: pd.DataFrame) -> str:
    """The frame as a box-drawn grid, index included (the reference's ``fancy_grid`` table)."""
    from tabulate import tabulate

    return str(tabulate(df, headers="keys", tablefmt="fancy_grid"))


def show_table(df: pd.DataFrame, file: IO[str]) -> None:
    """Display ``df`` in a notebook, else print it as a grid to ``file``."""
    if in_notebook():
        from IPython.display import display  # type: ignore[import-not-found,unused-ignore]

        display(df)  # type: ignore[no-untyped-call,unused-ignore]
        return
    print(render_grid(df), file=file)
