"""The compiled difference sums (numdiff/comparators/_sums.c) equal exact sums and numpy's, and check
what they are given."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numdiff.comparators import numerics
from numdiff.comparators.numerics import finite_difference_sums, sums_kernel

_native = numerics._native
KERNELS = ["portable", "avx"]


def test_the_compiled_module_is_built_in_ci() -> None:
    # pip builds it wherever a C compiler is found; CI installs one (scripts/install_test_system_deps.sh)
    if _native is None:
        if os.environ.get("CI") == "true":
            pytest.fail("numdiff.comparators._sums is not built: pip found no C compiler or Python headers "
                        "(scripts/install_test_system_deps.sh installs gcc and python3-dev; then reinstall with "
                        "pip install --no-cache-dir, as pip may reuse a wheel it built without them)")
        pytest.skip("numdiff.comparators._sums is not built here (no C compiler when pip ran)")
    assert sums_kernel().startswith("native (")


@pytest.mark.skipif(_native is None, reason="numdiff.comparators._sums is not built")
def test_the_compiled_module_is_built_from_this_source() -> None:
    # an editable install keeps its build next to the source: after _sums.c changes, pip must run again
    assert _native is not None
    source = Path(numerics.__file__).with_name("_sums.c").read_bytes()
    assert _native.source_sha256 == hashlib.sha256(source).hexdigest(), (
        "numdiff/comparators/_sums.c changed since the module was built: run pip install -e . again")


needs_native = pytest.mark.skipif(_native is None, reason="numdiff.comparators._sums is not built")


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest) -> Iterator[str]:
    assert _native is not None
    before = _native.kernel()
    try:
        _native.use_kernel(request.param)
    except ValueError:
        pytest.skip(f"the {request.param} loop is not available on this CPU")
    yield request.param
    _native.use_kernel(before)


def _exact(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """The sums in exact rational arithmetic, rounded once."""
    xs = [Fraction(float(v)) for v in a.astype(np.float64)]
    ys = [Fraction(float(v)) for v in b.astype(np.float64)]
    return (float(sum(x * x for x in xs)), float(sum((x - y) ** 2 for x, y in zip(xs, ys))),
            float(sum(abs(x - y) for x, y in zip(xs, ys))))


def _close(got: float, want: float, rel: float = 1e-13) -> bool:
    return math.isclose(got, want, rel_tol=rel, abs_tol=1e-300)


@needs_native
@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 15, 1023, 1024, 1025, 3000])
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float64, np.float64),
                                    (np.float32, np.float64), (np.float64, np.float32)])
def test_sums_equal_exact_sums(kernel: str, n: int, dtypes: tuple[type, type]) -> None:
    rng = np.random.default_rng(n)
    base = rng.standard_normal(n + 1) * 100
    # an offset of one element: the loops read memory not aligned to a vector (the AVX loads are unaligned)
    a = base.astype(dtypes[0])[1:]
    b = (base + rng.standard_normal(n + 1) * 1e-3).astype(dtypes[1])[1:]
    signal, noise, l1, count = _native.sums(a, b, True)
    want = _exact(a, b)
    assert count == n
    assert _close(signal, want[0]) and _close(noise, want[1]) and _close(l1, want[2]), (kernel, (signal, noise, l1), want)
    assert _native.sums(a, b, False)[:2] == (signal, noise) and _native.sums(a, b, False)[2] == 0.0


@needs_native
@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-2.0**50, 2.0**50, width=32), min_size=1, max_size=60), st.data())
def test_sums_property_against_numpy_path(values: list[float], data: st.DataObject) -> None:
    a = np.array(values, dtype=np.float32)
    b = np.array(data.draw(st.lists(st.floats(-2.0**50, 2.0**50, width=32), min_size=len(values), max_size=len(values))),
                 dtype=np.float32)
    native = _native.sums(a, b, True)[:3]
    numpy = numerics._numpy_difference_sums(a, b, True)
    exact = _exact(a, b)
    for got, ref, ex in zip(native, numpy, exact, strict=True):
        assert _close(got, ex, 1e-12) and _close(ref, ex, 1e-12), (native, numpy, exact)


@needs_native
def test_long_sums_stay_accurate(kernel: str) -> None:
    # a million elements: the block sums are added with compensation, so the error stays at a few ulps
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(1_000_003) * 3 + 1).astype(np.float32)
    b = (a + rng.standard_normal(a.size).astype(np.float32) * np.float32(1e-4)).astype(np.float32)
    x, y = a.astype(np.float64), b.astype(np.float64)
    want = (math.fsum(x * x), math.fsum((x - y) ** 2), math.fsum(np.abs(x - y)))  # x*x exact; (x-y)**2 rounded once
    got = _native.sums(a, b, True)[:3]
    assert all(_close(g, w, 1e-14) for g, w in zip(got, want, strict=True)), (got, want)


@needs_native
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_values_propagate(kernel: str, bad: float) -> None:
    a = np.ones(2049, dtype=np.float32)
    a[1500] = bad
    b = np.zeros(2049, dtype=np.float32)
    assert not all(math.isfinite(v) for v in _native.sums(a, b, True)[:3])
    assert finite_difference_sums(torch.from_numpy(a), torch.from_numpy(b)) is None


@needs_native
def test_overflowing_squares_are_not_finite() -> None:
    a = np.full(10, 1e200)
    assert _native.sums(a, np.zeros(10), False)[0] == math.inf
    assert finite_difference_sums(torch.from_numpy(a), torch.zeros(10, dtype=torch.float64)) is None


@needs_native
@pytest.mark.parametrize(("a", "b", "error", "message"), [
    (np.ones(10, np.float32), np.ones(9, np.float32), ValueError, "10 elements against 9"),
    (np.ones(10, np.int32), np.ones(10, np.float32), TypeError, "float32 or float64"),
    (np.ones(10, np.float16), np.ones(10, np.float16), TypeError, "float32 or float64"),
    (np.ones(10, ">f4"), np.ones(10, ">f4"), TypeError, "float32 or float64"),
    (np.ones(20, np.float32)[::2], np.ones(10, np.float32), ValueError, "contiguous"),
    (b"\x00" * 8, np.ones(2, np.float32), TypeError, "float32 or float64"),
    (np.frombuffer(bytearray(41), np.float32, 10, offset=1), np.ones(10, np.float32), ValueError, "not aligned"),
    (np.ones(10, np.float64), np.frombuffer(bytearray(84), np.float64, 10, offset=4), ValueError, "not aligned"),
])
def test_sums_check_their_buffers(a: object, b: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        _native.sums(a, b, True)


@needs_native
def test_finite_difference_sums_use_the_compiled_loop_and_agree_with_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(3)
    a = torch.randn(4, 8, 33, 17)
    b = a + torch.randn_like(a) * 1e-3
    native = finite_difference_sums(a, b)
    monkeypatch.setattr(numerics, "_native", None)
    assert sums_kernel() == "numpy"
    numpy = finite_difference_sums(a, b)
    assert native is not None and numpy is not None and native[3] == numpy[3] == a.numel()
    assert all(_close(x, y) for x, y in zip(native[:3], numpy[:3], strict=True)), (native, numpy)


@needs_native
def test_other_dtypes_go_through_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(numerics, "_native", _Spy(calls))
    a, b = torch.arange(10, dtype=torch.int8), torch.arange(10, dtype=torch.float32)
    assert finite_difference_sums(a, b) == (285.0, 0.0, 0.0, 10)
    assert calls == []
    assert finite_difference_sums(b, b + 1) == (285.0, 10.0, 10.0, 10)
    assert calls == ["sums"]


@needs_native
def test_strided_views_go_through_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # a view numpy flattens without a copy but not contiguously (e.g. torch.select's output)
    calls: list[str] = []
    monkeypatch.setattr(numerics, "_native", _Spy(calls))
    base = torch.arange(32, dtype=torch.float32).reshape(2, 4, 4)
    a = base[:, :, 1]  # shape (2, 4), strides (16, 4): one stride of 4 elements once flattened
    assert finite_difference_sums(a, a.clone() + 1) == (float((a.double() ** 2).sum()), 8.0, 8.0, 8)
    assert calls == []


@needs_native
def test_misaligned_views_go_through_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # a debug buffer's tensor at an offset the ETDump chose (torch.frombuffer honours any byte offset):
    # reading it through a float pointer would be undefined behaviour in C, numpy reads it as it is
    calls: list[str] = []
    monkeypatch.setattr(numerics, "_native", _Spy(calls))
    raw = bytearray(1 + 4 * 6)
    raw[1:] = np.arange(6, dtype=np.float32).tobytes()
    a = torch.frombuffer(raw, dtype=torch.float32, count=6, offset=1)
    assert not a.numpy().flags.aligned
    assert finite_difference_sums(a, a + 1) == (55.0, 6.0, 6.0, 6)
    assert calls == []


class _Spy:
    def __init__(self, calls: list[str]) -> None:
        self._calls = calls

    def sums(self, a: object, b: object, need_l1: bool) -> tuple[float, float, float, int]:
        self._calls.append("sums")
        assert _native is not None
        return _native.sums(a, b, need_l1)

    def kernel(self) -> str:
        return "spy"
