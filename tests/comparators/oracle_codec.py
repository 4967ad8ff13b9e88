"""Read ``tests/data/align_oracle.json`` (written by ``scripts/record_align_oracle.py``).

Values are encoded as in that script: tensors by dtype, shape and flat data; lists and tuples
tagged; NaN/inf floats as ``{"float": "nan"}``. Encoded values compare with ``==`` exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

ORACLE: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "align_oracle.json").read_text()
)

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def enc_float(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return {"float": repr(x)}
    return x


def enc(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        flat = value.detach().reshape(-1)
        if value.dtype in (torch.float16, torch.bfloat16):
            flat = flat.float()
        return {"tensor": {"dtype": _DTYPE_NAMES[value.dtype], "shape": list(value.shape),
                           "data": [enc_float(x) for x in flat.tolist()]}}
    if isinstance(value, tuple):
        return {"tuple": [enc(v) for v in value]}
    if isinstance(value, list):
        return {"list": [enc(v) for v in value]}
    return enc_float(value)


def dec(value: Any) -> Any:
    if isinstance(value, dict):
        if "tensor" in value:
            t = value["tensor"]
            dtype = DTYPES[t["dtype"]]
            work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
            return torch.tensor([dec(x) for x in t["data"]], dtype=work).to(dtype).reshape(t["shape"])
        if "tuple" in value:
            return tuple(dec(v) for v in value["tuple"])
        if "list" in value:
            return [dec(v) for v in value["list"]]
        if "float" in value:
            return float(value["float"])
    return value


def handles(pairs: list[list[Any]]) -> dict[tuple[int, ...], Any]:
    """``[[handle_list, encoded_value], ...]`` → ``{handle_tuple: decoded_value}``."""
    return {tuple(h): dec(v) for h, v in pairs}
