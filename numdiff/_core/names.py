"""Short names of compared rows for tables and summary lines (one definition for every view).

A row of the culprit report (and of a saved analysis) holds every AOT op it covers: a delegate
call of a real-size model holds hundreds (the real-size Llama's printed 326 names in one cell).
Tables and one-line summaries name it by its delegate call (backend and call index) and a long
group by its first and last ops with the count; the rows themselves keep every name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = ["COMPUTE_OPS", "TITLE_OPS", "abbreviated", "counted", "delegate_call", "group_modules", "is_qdq_name", "lookup_order",
           "ops_title", "quantity", "row_title", "without_qdq"]

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
    return ops if call is None else f"{call}: {ops}" if ops else call


def abbreviated(items: Sequence[str], noun: str) -> str:
    """``items`` joined with ", ", or past :data:`TITLE_OPS` of them the first and last with the count.

    Example:
        >>> abbreviated(["stem.0", "layers.0.conv1", "layers.0.conv2", "layers.1.conv1", "fc"], "modules")
        'stem.0 … fc (5 modules)'
    """
    if len(items) > TITLE_OPS:
        return f"{items[0]} … {items[-1]} ({len(items)} {noun})"
    return ", ".join(items)


def quantity(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``noun`` + "s" unless ``plural`` is given).

    Example:
        >>> quantity(1, "step"), quantity(12, "step"), quantity(2, "entry", "entries")
        ('1 step', '12 steps', '2 entries')
    """
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


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


#: Node names of quantize, dequantize and choose_qparams ops, in the ATen or Edge dialect
#: (``dequantize_per_tensor_12``, ``quantized_decomposed_dequantize_per_channel_group_default``, ``choose_qparams_1``).
_QDQ_NAME = re.compile(r"(?:^|_)(?:de)?quantize_(?:per_tensor|per_channel|per_token|affine)|(?:^|_)choose_qparams")

#: Op types that do a group's real work: convolutions, matmuls and linears (q/dq, layout and
#: element-wise ops are left out). Culprit rows of delegate calls are named after these.
COMPUTE_OPS = frozenset({"conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
                         "linear", "mm", "bmm", "matmul", "addmm", "baddbmm"})


def ops_title(ops: Sequence[str]) -> str:
    """A group of op names in one short line: all of them when few; else the ops that are not
    quantize, dequantize or choose_qparams with how many of those were left out; else the first and
    last of those with the count.

    Example:
        >>> ops_title(["dequantize_per_tensor", "dequantize_per_tensor_1", "linear", "relu", "quantize_per_tensor_1",
        ...            "dequantize_per_tensor_4", "linear_1"])
        'linear, relu, linear_1 (+4 q/dq)'
        >>> ops_title([f"conv2d_{i}" for i in range(20)] + ["dequantize_per_tensor_61"])
        'conv2d_0 … conv2d_19 (21 ops)'
    """
    if len(ops) <= TITLE_OPS:
        return ", ".join(ops)
    work = [o for o in ops if not is_qdq_name(o)]
    if not work:
        return abbreviated(ops, "ops")
    if len(work) <= TITLE_OPS:
        return ", ".join(work) + f" (+{len(ops) - len(work)} q/dq)"
    return f"{work[0]} … {work[-1]} ({len(ops)} ops)"


def is_qdq_name(name: str) -> bool:
    """Whether a node name is a quantize, dequantize or choose_qparams op's.

    Example:
        >>> [is_qdq_name(n) for n in ("dequantize_per_tensor_3", "quantized_decomposed_quantize_per_channel_default",
        ...                          "choose_qparams_tensor", "linear_1", "requantize_scale")]
        [True, True, True, False, False]
    """
    return _QDQ_NAME.search(name) is not None


def without_qdq(ops: Sequence[str]) -> list[str]:
    """A group's ops without its quantize, dequantize and choose_qparams ops, in order; all of them
    when every op is one.

    Example:
        >>> without_qdq(["dequantize_per_tensor", "linear", "quantize_per_tensor_1"])
        ['linear']
    """
    return [o for o in ops if not is_qdq_name(o)] or list(ops)


def lookup_order(ops: Sequence[str]) -> list[str]:
    """Where to look for a group's source line: its ops without q/dq from the last, then the rest
    (a delegate's first and last dequantize belong to the model's root module)."""
    work = without_qdq(ops)
    return [*reversed(work), *(o for o in reversed(ops) if o not in work)]


def group_modules(ops: Sequence[str], module_paths: Mapping[str, str]) -> str | None:
    """The modules of a group (a delegate call, a fused group): those of its convolutions, matmuls and
    linears (:data:`COMPUTE_OPS`, found by node name), else of its ops without q/dq; distinct, in
    order, shortened past :data:`TITLE_OPS`. None when none has a module.

    Example:
        >>> group_modules(["dequantize_per_tensor", "linear", "relu", "linear_1"],
        ...               {"dequantize_per_tensor": "Net", "linear": "fc1", "relu": "act", "linear_1": "fc2"})
        'fc1, fc2'
    """
    compute = [o for o in ops if _op_of(o) in COMPUTE_OPS]
    found = [module_paths[o] for o in compute or without_qdq(ops) if module_paths.get(o)]
    distinct = list(dict.fromkeys(found))
    return abbreviated(distinct, "modules") if distinct else None


def _op_of(name: str) -> str:
    """A node name's op type as torch.fx names nodes (``conv2d_3`` -> ``conv2d``; Edge ``aten_linear_default``)."""
    name = re.sub(r"_\d+$", "", name)
    name = name[len("aten_"):] if name.startswith("aten_") else name
    return re.sub(r"_(?:default|Tensor|int|Scalar)$", "", name)
