"""Domain aliases shared by every stage."""

from __future__ import annotations

from typing import Any, TypeAlias, Union

#: A node's debug handle(s): the ids ExecuTorch assigns to graph nodes, as a sorted-as-given tuple.
DebugHandle: TypeAlias = tuple[int, ...]

#: One value a program (or an op) produced: a tensor, a list of tensors, or a scalar.
InferenceOutput: TypeAlias = Any

#: A program's outputs, in order.
ProgramOutput: TypeAlias = list[Any]

#: A parsed JSON value (what ``json.loads`` returns).
JSON: TypeAlias = Union[dict[str, "JSON"], list["JSON"], str, int, float, bool, None]
