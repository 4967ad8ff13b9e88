"""Short names of compared rows for tables and summary lines (one definition for every view).

A row of the culprit report (and of a saved analysis) holds every AOT op it covers: a delegate
call of a real-size model holds hundreds (the real-size Llama's printed 326 names in one cell).
Tables and one-line summaries name it by its delegate call (backend and call index) and a long
group by its first and last ops with the count; the rows themselves keep every name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["TITLE_OPS", "abbreviated", "delegate_call", "row_title"]

#: Ops a title names before it shortens a group to its first and last.
TITLE_OPS = 4

#: The backend and call index that start a delegate row's description (``XnnpackBackend #2: linear (fc3, ...)``).
_DELEGATE_CALL = re.compile(r"(.*? #\d+): ")


def delegate_call(delegate: str | None) -> str | None:
    """A delegate row's backend and call index (``XnnpackBackend #2``) from its description, else None.

    Example:
        >>> delegate_call("XnnpackBackend #2: linear_2 (fc3, model.py:12 forward: return self.fc3(h))")
        'XnnpackBackend #2'
    """
    if delegate is None:
        return None
    found = _DELEGATE_CALL.match(delegate)
    return found.group(1) if found else "delegate"


def row_title(aot_ops: Sequence[str], delegate: str | None = None) -> str:
    """A row in one short line: its ops (a long group: first … last with the count), after its delegate call.

    Example:
        >>> row_title(["dequantize_per_tensor", "linear", "linear_1", "linear_2", "quantize_per_tensor"],
        ...           "XnnpackBackend #1: linear (fc1); linear_1 (fc2); linear_2 (fc3)")
        'XnnpackBackend #1: dequantize_per_tensor … quantize_per_tensor (5 ops)'
        >>> row_title(["add", "relu"])
        'add, relu'
    """
    ops = abbreviated(aot_ops, "ops")
    call = delegate_call(delegate)
    return ops if call is None else f"{call}: {ops}"


def abbreviated(items: Sequence[str], noun: str) -> str:
    """``items`` joined with ", ", or past :data:`TITLE_OPS` of them the first and last with the count.

    Example:
        >>> abbreviated(["stem.0", "layers.0.conv1", "layers.0.conv2", "layers.1.conv1", "fc"], "modules")
        'stem.0 … fc (5 modules)'
    """
    if len(items) > TITLE_OPS:
        return f"{items[0]} … {items[-1]} ({len(items)} {noun})"
    return ", ".join(items)
