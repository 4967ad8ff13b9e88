"""Reference-graph ops the program turned into aliases: they run no kernel and log no event.

Since pytorch/executorch#21552, ``to_executorch`` rewrites a contiguous ``slice_copy`` into an
``executorch.exir.memory.slice`` alias of its input's memory. The emitter writes no instruction
for it, so the runtime logs no event and no instruction of the ETRecord's ``debug_handle_map``
carries its debug handle. Without a note such an op would simply be missing from the gap; numdiff
lists it as *aliased, not logged* in its own views (``numeric_gap_report``, ``find_culprits``),
never in the drop-in ``calculate_numeric_gap`` (the reference has no such rows).

An op is listed when its reference-graph node is a slice (``aten.slice``, ``slice_copy`` or
``memory.slice``), its debug handle meets no runtime handle, and either it is a
``memory.slice`` node or the ETRecord's ``debug_handle_map`` gives its handle to no instruction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from numdiff._core.types import DebugHandle

__all__ = ["ALIASED", "ALIASED_NOTE", "ALIASED_REASON", "ALIAS_TARGET", "AliasedOutput", "emitted_handle_ids", "is_aliased"]

#: The target name ExecuTorch gives the alias (pytorch/executorch#21552).
ALIAS_TARGET = "executorch.exir.memory.slice"
#: The status numdiff's views give such an op.
ALIASED = "aliased, not logged"
#: Why the runtime logged nothing for it.
ALIASED_REASON = f"the program aliases this slice's memory ({ALIAS_TARGET}), so it runs no kernel and logs no value"
#: The note of its row in numdiff's gap table.
ALIASED_NOTE = f"{ALIASED}: {ALIASED_REASON}"
_SLICE_OPS = frozenset({"slice.Tensor", "aten.slice.Tensor", "slice_copy.Tensor", "aten.slice_copy.Tensor",
                        ALIAS_TARGET, "memory.slice"})


@dataclass(frozen=True, slots=True)
class AliasedOutput:
    """A reference-graph op the program aliased: what the gap would have compared, had it been logged.

    Attributes:
        handle: The op's debug handle.
        node: Its node name (named as ``calculate_numeric_gap`` names AOT ops).
        op_type: Its op type (``"slice.Tensor"``, ``"aten.slice_copy.Tensor"``...).
        aot_output: Its output in the reference run (a meta tensor when the gap streams).
    """

    handle: DebugHandle
    node: str
    op_type: str
    aot_output: Any


def emitted_handle_ids(handle_map: Mapping[str, object] | None) -> frozenset[int] | None:
    """Every debug-handle id some instruction of a method carries (``debug_handle_map[method]``), or None.

    Example:
        >>> sorted(emitted_handle_ids({"0": [1, 2], "4": 7, "5": None}) or ())
        [1, 2, 7]
    """
    if not isinstance(handle_map, Mapping):
        return None
    ids: set[int] = set()
    for value in handle_map.values():
        items: Iterable[object] = value if isinstance(value, (list, tuple)) else (value,)
        ids.update(i for i in items if isinstance(i, int) and not isinstance(i, bool))
    return frozenset(ids)


def is_aliased(op_type: str, handle: DebugHandle, emitted: frozenset[int] | None) -> bool:
    """Whether an op whose handle meets no runtime handle was aliased (see the module docstring).

    ``emitted`` is :func:`emitted_handle_ids` of the method (None when the ETRecord has no map).

    Example:
        >>> is_aliased("aten.slice_copy.Tensor", (11,), frozenset({1, 2})), is_aliased("relu.default", (11,), frozenset())
        (True, False)
    """
    if op_type not in _SLICE_OPS:
        return False
    if op_type == ALIAS_TARGET:
        return True
    ids = {i for i in handle if i > 0}  # 0: a node no Edge node descends from
    return emitted is not None and bool(ids) and emitted.isdisjoint(ids)
