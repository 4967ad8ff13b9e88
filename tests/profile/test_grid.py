"""The text grid of print_data_tabular: the reference's text, except for cells that would make it huge."""

from __future__ import annotations

import pandas as pd
import pytest

from numdiff.profile.tables import GRID_CHAR_BUDGET, SHORT_CELL, render_grid


def test_ordinary_frames_render_unchanged() -> None:
    from tabulate import tabulate

    df = pd.DataFrame({"event_name": ["a" * 300, "b"], "p50 (ms)": [0.5, 1.25], "op_types": [["x"], []]})
    assert render_grid(df) == tabulate(df, headers="keys", tablefmt="fancy_grid")


def test_one_huge_cell_is_shortened_with_a_warning_not_padded_into_every_row() -> None:
    rows = 200
    df = pd.DataFrame({"event_name": ["x" * (1 << 20)] + ["op"] * (rows - 1), "p50": range(rows)})
    with pytest.warns(UserWarning, match=rf"1 cell\(s\) longer than {SHORT_CELL} characters were shortened"):
        text = render_grid(df)
    assert len(text) < GRID_CHAR_BUDGET // 16
    assert f"({1 << 20} characters)" in text and "x" * SHORT_CELL in text and "x" * (SHORT_CELL + 1) not in text
    assert df["event_name"][0] == "x" * (1 << 20)  # the caller's frame is left alone
