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


#: Relative size of float32 rounding that two CPUs may differ by in one output (GEMM and convolution
#: kernels sum in different orders on different CPUs; the oracle ran on another machine).
_ROUNDING = 256 * 2.0**-23


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        (math.isinf(x) and x == y) or (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-9)
        for x, y in zip(a, b, strict=True)
    )


def _both_at_rounding(metric: str, a: list[float], b: list[float], aot: Any) -> bool:
    """Whether both gaps say "equal up to float32 rounding" of the AOT output: then the digits past that
    depend on the CPU that computed the reference graph, not on numdiff."""
    tensors = [aot] if isinstance(aot, torch.Tensor) else [x for x in aot if isinstance(x, torch.Tensor)]
    if not tensors or not all(t.is_floating_point() for t in tensors):
        return False
    values = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors])
    if metric.upper() == "SNR":
        floor_db = -20 * math.log10(_ROUNDING)  # about 90 dB
        return all(x > floor_db and y > floor_db for x, y in zip(a, b, strict=True))
    if metric.upper() == "L1":
        bound = _ROUNDING * float(values.abs().sum())
    elif metric.upper() == "MSE":
        bound = _ROUNDING**2 * float(values.pow(2).mean())
    else:
        return False
    return all(0 <= x <= bound and 0 <= y <= bound for x, y in zip(a, b, strict=True))


def same_gap(metric: str, got: list[float], expected: list[float], aot_output: Any) -> bool:
    """Whether a gap row's values equal the oracle's: to 1e-5, or both at float32 rounding level of the
    AOT output (then the digits past that depend on the CPU that ran the reference graph)."""
    return _close(got, expected) or _both_at_rounding(metric, got, expected, aot_output)
