"""Text tables fitted to a width: whole words first, then columns left out (and said), never silently."""

from __future__ import annotations

import doctest

import pandas as pd
import pytest

import numdiff.report.text_table as text_table
from numdiff.report.text_table import ColumnFit, fitted_table

FIT = ColumnFit(unwrapped=("gap",), droppable=("handle", "module"), prose=("source",))
CELLS = pd.DataFrame({
    "handle": ["1,2,4,4,5,6,6,6,7,7,7", "8"],
    "op": ["dequantize_per_tensor, linear, relu, quantize_per_tensor_1", "cumsum"],
    "gap": ["inf", "150.9"],
    "module": ["Wrapper", "SplitQuantMLP"],
    "source": ["_fixture_models.py:153 forward: h = self.fc2(self.relu(self.fc1(x)))",
               "_fixture_models.py:154 forward: h = torch.cumsum(h, dim=-1)"],
})


def test_the_module_examples_hold() -> None:
    result = doctest.testmod(text_table)
    assert result.attempted >= 2 and result.failed == 0


def test_a_wide_terminal_shows_every_column_unwrapped() -> None:
    lines = fitted_table(CELLS, 200, FIT).splitlines()
    assert lines[0].split() == ["handle", "op", "gap", "module", "source"] and len(lines) == 4


def test_at_60_columns_words_stay_whole_and_what_was_left_out_is_said() -> None:
    assert fitted_table(CELLS, 60, FIT) + "\n" == """\
op                        gap  source
----------------------  -----  --------------------------
dequantize_per_tensor,  inf    _fixture_models.py:153
linear, relu,                  forward: h = self.fc2(self
quantize_per_tensor_1          .relu(self.fc1(x)))
cumsum                  150.9  _fixture_models.py:154
                               forward: h =
                               torch.cumsum(h, dim=-1)
(handle and module left out to fit 60 columns: a wider
terminal, --width or --format csv shows them)
"""


@pytest.mark.parametrize("width", range(30, 140, 7))
def test_every_width_from_30_fits_and_keeps_every_row(width: int) -> None:
    text = fitted_table(CELLS, width, FIT)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "cumsum" in text and "150.9" in text and "inf" in text


def test_a_long_repeated_cell_is_said_once_and_a_short_one_stays() -> None:
    from numdiff.report.text_table import SAME_AS_ABOVE, said_once

    line = "_deeper_models.py:67 forward: q = self._rope(self.wq(h), cos, sin)"
    assert said_once([line, line, line, "fc2", "fc2", None, None]) == [line, SAME_AS_ABOVE, SAME_AS_ABOVE, "fc2", "fc2",
                                                                      None, None]
    assert said_once([]) == [] and said_once([line, "other", line]) == [line, "other", line]
