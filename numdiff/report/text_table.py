"""Text tables fitted to a terminal's width: long cells wrap, then columns a person can spare are left out.

Used by the terminal views whose cells are long (``numdiff gap``'s op lists and source lines,
``numdiff culprits``' table); ``numdiff profile`` has its own layout (one shortened name column).
What was left out is said on the table's last line, never silently.

Example:
    >>> import pandas as pd
    >>> from numdiff.report.text_table import ColumnFit, fitted_table
    >>> cells = pd.DataFrame({"op": ["linear, relu, linear_1"], "gap": ["12.5"], "source": ["model.py:3 forward"]})
    >>> print(fitted_table(cells, 30, ColumnFit(unwrapped=("gap",), droppable=("source",))))
    op          gap  source
    --------  -----  ----------
    linear,    12.5  model.py:3
    relu,            forward
    linear_1
    >>> print(fitted_table(cells, 24, ColumnFit(unwrapped=("gap",), droppable=("source",))))
    op               gap
    -------------  -----
    linear, relu,   12.5
    linear_1
    (source left out to fit
    24 columns: a wider
    terminal, --width or
    --format csv shows them)
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["SAME_AS_ABOVE", "ColumnFit", "fitted_table", "said_once"]

#: While columns can still be left out, a wrapped column keeps its longest word whole, up to this many
#: characters (an op name with its comma, a file name with its line number).
LONGEST_WORD = 26
_COLUMN_GAP = 2  # tabulate's "simple" format puts two spaces between columns
_HEADER_PAD = 2  # and makes every column at least its header plus two characters wide


#: What a cell shows instead of repeating the one above it (:func:`said_once`): a ditto mark, ASCII so
#: that every terminal gives it one column.
SAME_AS_ABOVE = "\""


#: Cells this long or shorter are repeated as they are (a module name is grepped for: ``fc2``).
_SAID_ONCE_FROM = 24


def said_once(values: Sequence[object]) -> list[object]:
    """``values`` with a run of one long text (over 24 characters, which a table wraps) said once: each
    repeat of the cell above shows :data:`SAME_AS_ABOVE` (the ten ops of one source line took ten
    times its wrapped lines); short cells stay, so a search for a module finds every row.

    Example:
        >>> said_once(["model.py:3 forward: h = f(x)", "model.py:3 forward: h = f(x)", "model.py:4", None, None])
        ['model.py:3 forward: h = f(x)', '"', 'model.py:4', None, None]
    """
    out: list[object] = []
    for k, value in enumerate(values):
        repeat = k > 0 and isinstance(value, str) and len(value) > _SAID_ONCE_FROM and value == values[k - 1]
        out.append(SAME_AS_ABOVE if repeat else value)
    return out


@dataclass(frozen=True, slots=True)
class ColumnFit:
    """How a table gives way when it is wider than the terminal.

    Attributes:
        unwrapped: Columns never wrapped (short by nature: numbers, verdicts, shapes).
        droppable: Columns left out, in this order, when wrapping to whole words is not enough.
        prose: Columns of text, cut mid-word before the others are.
        elsewhere: The option of the command that shows every column, named on the "left out" line.
    """

    unwrapped: tuple[str, ...] = ()
    droppable: tuple[str, ...] = ()
    prose: tuple[str, ...] = ()
    elsewhere: str = "--format csv"


def _shrink(natural: Sequence[int], floor: Sequence[int], budget: int) -> list[int]:
    """Widths within ``budget`` (or at ``floor``): the widest column above its floor gives way first."""
    widths = list(natural)
    while sum(widths) > budget:
        shrinkable = [i for i in range(len(widths)) if widths[i] > floor[i]]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths


def _longest_word(cells: pd.Series) -> int:
    return min(max((len(w) for v in cells for w in str(v).split()), default=0), LONGEST_WORD)


def _fit(cells: pd.DataFrame, width: int, fit: ColumnFit) -> tuple[pd.DataFrame, list[int | None], list[str]]:
    """The columns to show, their wrap widths (tabulate's ``maxcolwidths``) and the columns left out.

    Long cells wrap, the widest column first, down to their longest word (at most
    :data:`LONGEST_WORD` characters); past that the droppable columns are left out one by one; past
    that the prose columns, then the others, may narrow to their header's width. When even that is
    too wide, the table is as narrow as it can be.
    """
    dropped: list[str] = []
    while True:
        columns = [str(c) for c in cells.columns]
        header = [len(c) + _HEADER_PAD for c in columns]
        natural = [max([h] + [len(str(v)) for v in cells[c]]) for c, h in zip(columns, header)]
        budget = width - _COLUMN_GAP * (len(columns) - 1)
        readable = [n if c in fit.unwrapped else max(h, min(n, _longest_word(cells[c])))
                    for c, n, h in zip(columns, natural, header)]
        droppable = [c for c in fit.droppable if c in columns]
        if sum(readable) <= budget or not droppable:
            break
        cells = cells.drop(columns=[droppable[0]])
        dropped.append(droppable[0])
    floor = readable
    if sum(floor) > budget:  # text columns give way before names are cut
        floor = [h if c in fit.prose else r for c, r, h in zip(columns, readable, header)]
    if sum(floor) > budget:
        floor = [n if c in fit.unwrapped else h for c, n, h in zip(columns, natural, header)]
    widths = _shrink(natural, floor, budget)
    return cells, [w if w < n else None for w, n in zip(widths, natural)], dropped


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def fitted_table(cells: pd.DataFrame, width: int, fit: ColumnFit) -> str:
    """``cells`` (one column per header, text already escaped) as a "simple" table ``width`` characters wide.

    Returns:
        The table without a trailing newline; when columns were left out, a last line names them.
    """
    from tabulate import tabulate

    shown, wraps, dropped = _fit(cells, width, fit)
    table = str(tabulate(shown, headers="keys", tablefmt="simple", showindex=False, maxcolwidths=wraps))
    if dropped:
        table += "\n" + "\n".join(textwrap.wrap(
            f"({_and(dropped)} left out to fit {width} columns: a wider terminal, --width or "
            f"{fit.elsewhere} shows them)", max(width, 20), break_on_hyphens=False))
    return table
