"""JSON the CLI writes: numbers stay numbers, values that are not finite become ``null``.

The library's cells hold floats that may be NaN or ±inf, numpy scalars, tuples and tensors; a JSON
reader (``jq``, a dashboard) wants ``null`` where no number can be given, never ``"nan"`` as a string.
"""

from __future__ import annotations

import enum
import json
import math
import sys
from typing import TextIO

__all__ = ["cli_jsonable", "write_json"]


def cli_jsonable(value: object) -> object:
    """``value`` as plain JSON data: non-finite floats → ``None``, tuples → lists, numpy scalars → numbers,
    tensors and arrays → ``{"dtype", "shape"}``, enums → their values."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        if getattr(value, "shape", None) == () and hasattr(value, "item"):  # a numpy scalar
            return cli_jsonable(value.item())
        return {"dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, (list, tuple)):
        return [cli_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): cli_jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return cli_jsonable(value.value)
    if hasattr(value, "item") and callable(value.item):
        return cli_jsonable(value.item())
    return str(value)


def write_json(data: object, stream: TextIO | None = None) -> None:
    """``data`` as indented JSON and a newline (to stdout by default); never writes NaN or Infinity."""
    out = stream if stream is not None else sys.stdout
    json.dump(cli_jsonable(data), out, indent=1, allow_nan=False)
    out.write("\n")
