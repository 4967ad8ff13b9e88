"""Short names of compared rows for tables and summary lines (one definition for every view).

A row of the culprit report (and of a saved analysis) holds every AOT op it covers: a delegate
call of a real-size model holds hundreds (the real-size Llama's printed 326 names in one cell).
Tables and one-line summaries name it by its delegate call (backend and call index) and a long
group by its first and last ops with the count; the rows themselves keep every name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["TITLE_OPS", "abbreviated", "computing_ops", "counted", "delegate_call", "ops_title", "row_title"]

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
    """A row in one short line: its ops (:func:`ops_title`), after its delegate call.

    Example:
        >>> row_title(["dequantize_per_tensor", "linear", "linear_1", "linear_2", "quantize_per_tensor"],
        ...           "XnnpackBackend #1: linear (fc1); linear_1 (fc2); linear_2 (fc3)")
        'XnnpackBackend #1: linear, linear_1, linear_2 (+2 q/dq)'
        >>> row_title(["add", "relu"])
        'add, relu'
    """
    ops = ops_title(aot_ops)
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


def counted(items: Sequence[str]) -> str:
    """Each distinct name once with its count, the first three (a delegate's runtime ops: hundreds of
    ``DELEGATE_CALL``); the report's table cell does the same.

    Example:
        >>> counted(["DELEGATE_CALL"] * 200 + ["native_call_expand_copy.out"] * 100 + ["a", "b"])
        'DELEGATE_CALL ×200, native_call_expand_copy.out ×100, a (+1 more)'
    """
    counts = Counter(items)
    named = [f"{name} ×{n}" if n > 1 else name for name, n in counts.items()]
    return ", ".join(named[:3]) + (f" (+{len(named) - 3} more)" if len(named) > 3 else "")


#: Node names of quantize, dequantize and choose_qparams ops (``dequantize_per_tensor_12``).
_QDQ_NAME = re.compile(r"(?:de)?quantize_per_(?:tensor|channel|token)(?:_\d+)?|choose_qparams\w*")


def ops_title(ops: Sequence[str]) -> str:
    """A group of op names in one short line: all of them when few; else the ops that compute (not
    quantize, dequantize or choose_qparams) with how many of those were left out; else the first and
    last that compute with the count.

    Example:
        >>> ops_title(["dequantize_per_tensor", "dequantize_per_tensor_1", "linear", "relu", "quantize_per_tensor_1",
        ...            "dequantize_per_tensor_4", "linear_1"])
        'linear, relu, linear_1 (+4 q/dq)'
        >>> ops_title([f"conv2d_{i}" for i in range(20)] + ["dequantize_per_tensor_61"])
        'conv2d_0 … conv2d_19 (21 ops)'
    """
    if len(ops) <= TITLE_OPS:
        return ", ".join(ops)
    work = [o for o in ops if not _is_qdq(o)]
    if not work:
        return abbreviated(ops, "ops")
    if len(work) <= TITLE_OPS:
        return ", ".join(work) + f" (+{len(ops) - len(work)} q/dq)"
    return f"{work[0]} … {work[-1]} ({len(ops)} ops)"


def _is_qdq(name: str) -> bool:
    return _QDQ_NAME.fullmatch(name) is not None


def computing_ops(ops: Sequence[str]) -> list[str]:
    """The ops of a group that compute (not quantize, dequantize or choose_qparams), in order; all of
    them when none does. A group's module and source line are looked up there: its first and last
    dequantize belong to the model's root module.

    Example:
        >>> computing_ops(["dequantize_per_tensor", "linear", "quantize_per_tensor_1"])
        ['linear']
    """
    return [o for o in ops if not _is_qdq(o)] or list(ops)
