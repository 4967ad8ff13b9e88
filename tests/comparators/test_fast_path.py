"""The numpy fast path of L1/MSE/SNR gives the reference path's numbers, and steps aside for NaN/inf."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numdiff.comparators.numerics import finite_difference_sums, reference_float64
from numdiff.comparators import L1Comparator, MSEComparator, SNRComparator
from numdiff.comparators.l1 import sum_abs_difference
from numdiff.comparators.mse import mean_squared_error
from numdiff.comparators.snr import signal_to_noise_ratio

DTYPES = [torch.float32, torch.float16, torch.float64, torch.int8, torch.uint8, torch.int32, torch.bool]


def _reference(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, float]:
    x, y = reference_float64(a), reference_float64(b)
    return sum_abs_difference(x, y), mean_squared_error(x, y), signal_to_noise_ratio(x, y)


def _close(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_path_equals_reference_path(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    base = torch.randn(3, 5, 7) * 10
    a, b = base.to(dtype), (base + torch.randn_like(base)).to(dtype)
    assert finite_difference_sums(a, b) is not None
    got = (L1Comparator().element_compare(a, b), MSEComparator().element_compare(a, b),
           SNRComparator().element_compare(a, b))
    assert all(_close(g, r) for g, r in zip(got, _reference(a, b), strict=True)), (got, _reference(a, b))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=40), st.data())
def test_fast_path_property(values: list[float], data: st.DataObject) -> None:
    a = torch.tensor(values, dtype=torch.float32)
    b = torch.tensor(data.draw(st.lists(st.floats(-1e6, 1e6, width=32), min_size=len(values), max_size=len(values))),
                     dtype=torch.float32)
    got = (L1Comparator().element_compare(a, b), MSEComparator().element_compare(a, b),
           SNRComparator().element_compare(a, b))
    assert all(_close(g, r) or math.isclose(g, r, rel_tol=1e-9) for g, r in zip(got, _reference(a, b), strict=True))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values_take_the_reference_path(bad: float) -> None:
    a = torch.tensor([1.0, bad, 3.0])
    b = torch.tensor([1.0, 2.0, 3.5])
    assert finite_difference_sums(a, b) is None
    with pytest.warns(UserWarning) if math.isnan(bad) else _nothing():
        got = SNRComparator().element_compare(a, b)
    x, y = reference_float64(a), reference_float64(b)
    assert _close(got, signal_to_noise_ratio(x, y))


def test_edges_identical_zero_signal_and_all_zero() -> None:
    one, zero = torch.ones(4), torch.zeros(4)
    assert SNRComparator().element_compare(one, one) == math.inf
    assert SNRComparator().element_compare(zero, one) == -math.inf
    assert math.isnan(SNRComparator().element_compare(zero, zero))
    assert MSEComparator().element_compare(one, one) == 0.0 and L1Comparator().element_compare(one, zero) == 4.0


def test_bfloat16_and_scalars_use_the_reference_path() -> None:
    a = torch.ones(3, dtype=torch.bfloat16)
    assert finite_difference_sums(a, a) is None
    assert finite_difference_sums(torch.tensor(1.0), torch.tensor(1.0)) is None
    assert SNRComparator().element_compare(a, a) == math.inf


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_infinities_leave_the_fast_path_without_a_numpy_warning() -> None:
    """A causal mask's -inf on both sides makes inf - inf: the sums are not finite, the caller takes the
    reference path (which counts them), and numpy's 'invalid value' warning does not reach the user."""
    import warnings

    import torch

    from numdiff.comparators.numerics import finite_difference_sums

    a = torch.tensor([[0.0, float("-inf")], [1.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert finite_difference_sums(a, a.clone()) is None
        assert finite_difference_sums(torch.tensor([3e200], dtype=torch.float64), torch.tensor([0.0])) is None


def test_presummed_pairs_answer_only_the_same_unchanged_tensors() -> None:
    """Sums computed ahead are used for the very same two tensors, unchanged since; anything else is computed."""
    from numdiff.comparators.numerics import presummed

    torch.manual_seed(1)
    a, b = torch.randn(1000), torch.randn(1000)
    with presummed() as sums:
        kept = sums.compute(a, b, need_l1=False)
        assert kept == finite_difference_sums(a, b, need_l1=False)
        assert sums.answered(b)
        # sums.l1 was not computed ahead: asked for, it is computed (and not 0.0)
        with_l1 = finite_difference_sums(a, b)
        assert with_l1 is not None and with_l1[2] > 0 and not sums.answered(b)
        # an equal copy is another tensor: computed, same numbers
        assert finite_difference_sums(a, b.clone(), need_l1=False) == kept
        b.add_(1.0)  # changed in place after the sums were taken: never answered from them
        fresh = finite_difference_sums(a, b, need_l1=False)
        assert fresh is not None and kept is not None and fresh[1] != kept[1] and not sums.answered(b)
    assert finite_difference_sums(a, b, need_l1=False) == fresh  # outside the block: plain computation


def test_presummed_pairs_from_a_worker_thread_and_a_failed_worker() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from numdiff.comparators.numerics import presummed

    torch.manual_seed(2)
    a, b = torch.randn(70000), torch.randn(70000)  # more than one block
    calls: list[str] = []
    with presummed() as sums, ThreadPoolExecutor(1) as pool:
        sums.submit(a, b, True, pool, after=lambda: calls.append("after"))
        assert finite_difference_sums(a, b) == finite_difference_sums(a.clone(), b.clone())
        assert sums.answered(b) and calls == ["after"]

        def fail() -> None:
            raise OSError("no pages")

        c = torch.randn(10)
        sums.submit(c, c, True, pool, after=fail)  # the worker fails: the scoring loop computes it
        assert finite_difference_sums(c, c) == (pytest.approx(float((c.double() ** 2).sum()), rel=1e-14), 0.0, 0.0, 10)
        assert not sums.answered(c)


def test_difference_sums_l1_names_the_metrics_built_on_the_sums() -> None:
    from numdiff.comparators import CosineSimilarityComparator
    from numdiff.comparators.numerics import difference_sums_l1

    class Dequantized(SNRComparator):
        def preprocessing(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
            return mapping

    class Scaled(MSEComparator):
        def element_compare(self, a: Any, b: Any) -> float:
            return 2 * super().element_compare(a, b)

    class Renamed(L1Comparator):
        """Only a new name: same scores."""

    assert [difference_sums_l1(c) for c in (SNRComparator(), MSEComparator(), L1Comparator(), Renamed())] == \
        [False, False, True, True]
    assert [difference_sums_l1(c) for c in (CosineSimilarityComparator(), Dequantized(), Scaled())] == [None] * 3
