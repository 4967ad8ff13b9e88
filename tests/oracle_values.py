"""Compare numdiff values with the oracle's JSON encoding (see tests/fixtures/README.md)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch


def _floats_equal(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or x == y or math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)
        for x, y in zip(a, b, strict=True)
    )


def assert_value_matches(actual: Any, expected: Any, where: str = "") -> None:
    """``actual`` (tensor, list, scalar) equals the oracle's encoded ``expected``."""
    if isinstance(expected, dict) and expected.get("tensor"):
        assert isinstance(actual, torch.Tensor), f"{where}: expected a tensor, got {type(actual).__name__}"
        assert list(actual.shape) == expected["shape"], f"{where}: shape {list(actual.shape)} != {expected['shape']}"
        assert str(actual.dtype) == expected["dtype"], f"{where}: dtype {actual.dtype} != {expected['dtype']}"
        if "values" in expected:
            got = actual.flatten().tolist()
            if actual.dtype.is_floating_point:
                assert _floats_equal(got, expected["values"]), f"{where}: values differ"
            else:
                assert got == expected["values"], f"{where}: values differ"
        elif "sha256" in expected:
            digest = hashlib.sha256(actual.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
            assert digest == expected["sha256"], f"{where}: bytes differ"
        return
    if isinstance(expected, dict) and "list" in expected:
        assert isinstance(actual, (list, tuple)), f"{where}: expected a list, got {type(actual).__name__}"
        assert len(actual) == len(expected["list"]), f"{where}: length {len(actual)} != {len(expected['list'])}"
        for i, (a, e) in enumerate(zip(actual, expected["list"], strict=True)):
            assert_value_matches(a, e, f"{where}[{i}]")
        return
    if isinstance(expected, float) and isinstance(actual, float):
        assert _floats_equal([actual], [expected]), f"{where}: {actual} != {expected}"
        return
    assert actual == expected, f"{where}: {actual!r} != {expected!r}"
