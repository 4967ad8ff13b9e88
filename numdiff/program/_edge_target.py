"""Call targets of loaded Edge nodes that compare equal to ExecuTorch's Edge operator objects.

In a program ExecuTorch loads, an Edge node's target is one of its Edge operator objects
(``exir_ops.edge.aten.sin.default``): named ``"aten.sin.default"`` (namespace, op, overload),
calling the torch operator underneath, and equal only to itself. Users compare targets against
those objects (``node.target == exir_ops.edge.aten.sin.default``). numdiff never imports
ExecuTorch, so its Edge targets are :class:`EdgeTarget` objects: callable like the torch operator
they wrap, with the same ``__name__``, and equal to any object that shows the same Edge name
(``__name__``) and wraps the same torch operator (``_op``) — ExecuTorch's own objects included.
Attributes numdiff does not define (``_schema``, ``name()``, ``_opname``, ``namespace`` …) come
from the wrapped torch operator, as they do for ExecuTorch's objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["EdgeTarget", "edge_target"]


class EdgeTarget:
    """An Edge operator: the torch operator ``op`` shown under the Edge name ``namespace.op.overload``.

    Args:
        op: The registered torch operator that runs the node.
        edge_name: The Edge name, e.g. ``"aten.sin.default"`` (also ``__name__``).

    Example:
        >>> t = edge_target(torch.ops.aten.sin.default, "aten.sin.default")
        >>> t.__name__, t.name(), t(torch.zeros(1)).tolist()
        ('aten.sin.default', 'aten::sin', [0.0])
    """

    def __init__(self, op: torch._ops.OpOverload, edge_name: str) -> None:
        self._op = op
        self.__name__ = edge_name
        self.__qualname__ = edge_name.replace(".", "_")

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._op(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._op, name)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, EdgeTarget):
            return other.__name__ == self.__name__ and other._op is self._op
        try:
            return bool(getattr(other, "__name__", None) == self.__name__ and getattr(other, "_op", None) is self._op)
        except Exception:  # an object whose attributes raise compares unequal
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("numdiff-edge-op", self.__name__))

    def __repr__(self) -> str:
        return f"<EdgeOpOverload: {self.__name__}>"

    def __str__(self) -> str:
        return self.__name__

    def __reduce__(self) -> tuple[Callable[[torch._ops.OpOverload, str], EdgeTarget], tuple[torch._ops.OpOverload, str]]:  # deepcopy / pickling keep the one shared object per name
        return (edge_target, (self._op, self.__name__))


_TARGETS: dict[tuple[int, str], EdgeTarget] = {}


def edge_target(op: torch._ops.OpOverload, edge_name: str) -> EdgeTarget:
    """The one :class:`EdgeTarget` for ``(op, edge_name)`` in this process (targets compare by identity fast)."""
    key = (id(op), edge_name)
    found = _TARGETS.get(key)
    if found is None:
        found = _TARGETS.setdefault(key, EdgeTarget(op, edge_name))
    return found
