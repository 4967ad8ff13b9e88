"""Metric invariants, dtypes and NaN/inf edge cases, for every built-in comparator."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numdiff.comparators.numerics import collect_replacements, same_shape, upcast_float64
from numdiff.comparators import (
    CosineSimilarityComparator,
    L1Comparator,
    MaxAbsComparator,
    MSEComparator,
    SNRComparator,
    cosine_similarity,
    max_abs_difference,
    signal_to_noise_ratio,
)
from numdiff.errors import UsageError

nan, inf = float("nan"), float("inf")
finite = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=16)


@settings(max_examples=50, deadline=None)
@given(finite)
def test_identical_inputs(values: list[float]) -> None:
    t = torch.tensor(values, dtype=torch.float64)
    assert L1Comparator().element_compare(t, t.clone()) == 0.0
    assert MSEComparator().element_compare(t, t.clone()) == 0.0
    assert MaxAbsComparator().element_compare(t, t.clone()) == 0.0
    snr = SNRComparator().element_compare(t, t.clone())
    signal = any(v * v > 0 for v in values)  # squares of tiny values underflow to 0
    assert snr == inf if signal else math.isnan(snr)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 16).flatmap(lambda n: st.tuples(*(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n),) * 2)))
def test_l1_mse_max_abs_are_symmetric_and_non_negative(pair: tuple[list[float], list[float]]) -> None:
    a, b = (torch.tensor(v, dtype=torch.float64) for v in pair)
    for comparator in (L1Comparator(), MSEComparator(), MaxAbsComparator()):
        forward, backward = comparator.element_compare(a, b), comparator.element_compare(b, a)
        assert forward == backward and forward >= 0


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.float16, torch.bfloat16, torch.float32])
def test_dtypes_are_upcast_before_subtracting(dtype: torch.dtype) -> None:
    # 100 - (-100) overflows int8; 250 - 5 is fine for uint8 only when upcast first.
    low, high = (5, 250) if dtype == torch.uint8 else (-100, 100)
    a, b = torch.tensor([high], dtype=dtype), torch.tensor([low], dtype=dtype)
    expected = float(high - low)
    assert L1Comparator().element_compare(a, b) == expected
    assert MaxAbsComparator().element_compare(b, a) == expected
    assert MSEComparator().element_compare(a, b) == expected**2
    assert CosineSimilarityComparator().element_compare(a, a) == pytest.approx(1.0)


def test_snr_edge_cases_keep_ieee_answers() -> None:
    zeros, ones = torch.zeros(3), torch.ones(3)
    assert signal_to_noise_ratio(ones, ones) == inf  # zero noise
    assert signal_to_noise_ratio(zeros, ones) == -inf  # zero signal
    assert math.isnan(signal_to_noise_ratio(zeros, zeros))  # neither
    assert math.isnan(signal_to_noise_ratio(torch.tensor([nan]), ones[:1]))


def test_reference_metrics_replace_nan_own_metrics_propagate_it() -> None:
    a, b = torch.tensor([nan, 1.0]), torch.tensor([0.0, 1.0])
    with collect_replacements() as tally:
        assert L1Comparator().element_compare(a, b) == 0.0
        assert MSEComparator().element_compare(a, b) == 0.0
    assert tally.nan == 2
    assert math.isnan(MaxAbsComparator().element_compare(a, b))
    assert math.isnan(CosineSimilarityComparator().element_compare(a, b))


def test_inf_edge_cases() -> None:
    a = torch.tensor([1.0, inf])
    assert math.isnan(max_abs_difference(a, a))  # inf - inf
    assert max_abs_difference(a, torch.tensor([1.0, 2.0])) == inf
    assert math.isnan(cosine_similarity(a, a))
    with collect_replacements():
        # reference: no NaN in the tensor, so inf is kept and inf - inf = nan
        assert math.isnan(L1Comparator().element_compare(a, a))


def test_cosine_edge_cases() -> None:
    assert cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([-2.0, 0.0])) == -1.0
    assert math.isnan(cosine_similarity(torch.zeros(2), torch.ones(2)))


def test_empty_tensors() -> None:
    empty = torch.empty(0)
    assert L1Comparator().element_compare(empty, empty) == 0.0
    assert max_abs_difference(empty, empty) == 0.0
    assert math.isnan(MSEComparator().element_compare(empty, empty))


def test_shapes_are_never_broadcast() -> None:
    with pytest.raises(UsageError, match=r"shapes \(2,\) and \(3,\) hold different numbers of elements"):
        same_shape(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError):
        MSEComparator().element_compare(torch.ones(2, 1), torch.ones(1, 2, 2))


def test_sequences_are_rejected_by_float_conversion() -> None:
    with pytest.raises(UsageError, match="list of 2 values"):
        upcast_float64([1, 2])
    with pytest.raises(UsageError, match="type object"):
        upcast_float64(object())
