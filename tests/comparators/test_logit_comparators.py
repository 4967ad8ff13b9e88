"""KL, top-k agreement and median ratio: registered by name, each with its direction and maths."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from numdiff.comparators import (
    KLDivergenceComparator,
    MedianRatioComparator,
    TopKAgreementComparator,
    comparator_class,
    get_comparator,
    kl_divergence,
    median_diff_ratio,
    topk_agreement,
)
from numdiff.errors import UsageError


@pytest.mark.parametrize(("name", "cls", "higher"), [
    ("KL", KLDivergenceComparator, False), ("kl_divergence", KLDivergenceComparator, False),
    ("topk", TopKAgreementComparator, True), ("top-k", TopKAgreementComparator, True),
    ("median_ratio", MedianRatioComparator, False), ("median_diff_ratio", MedianRatioComparator, False)])
def test_registered_by_name_with_their_direction(name: str, cls: type, higher: bool) -> None:
    comparator = get_comparator(name)
    assert type(comparator) is cls
    assert comparator.higher_is_better is higher
    assert comparator_class(cls.__name__) is cls


def test_kl_matches_torch_kl_div_row_mean() -> None:
    gen = torch.Generator().manual_seed(0)
    p_logits, q_logits = torch.randn(3, 7, generator=gen), torch.randn(3, 7, generator=gen)
    expected = torch.nn.functional.kl_div(torch.log_softmax(q_logits.double(), -1),
                                          torch.log_softmax(p_logits.double(), -1), log_target=True,
                                          reduction="batchmean")
    assert kl_divergence(p_logits, q_logits) == pytest.approx(float(expected), rel=1e-12)
    assert kl_divergence(p_logits, p_logits) == 0.0
    assert kl_divergence(p_logits, q_logits) != pytest.approx(kl_divergence(q_logits, p_logits))  # not symmetric


def test_kl_is_shift_invariant_and_nan_propagates() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    assert kl_divergence(logits, logits + 10) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(kl_divergence(logits, torch.tensor([[1.0, float("nan"), 3.0]])))


def test_topk_agreement_counts_shared_indices_per_row() -> None:
    a = torch.tensor([[9.0, 8.0, 7.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0, 3.0]])
    b = torch.tensor([[9.0, 0.0, 7.0, 8.5, 0.0], [0.0, 0.0, 1.0, 2.0, 3.0]])
    # row 0: top-3 {0, 1, 2} vs {0, 3, 2}: 2 of 3; row 1: all 3
    assert topk_agreement(a, b, k=3) == pytest.approx((2 / 3 + 1) / 2)
    assert TopKAgreementComparator(k=1).element_compare(a, b) == 1.0
    assert topk_agreement(a, b, k=50) == 1.0  # k capped at the row length


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_topk_refuses_a_bad_k(k: object) -> None:
    with pytest.raises(UsageError, match=r"top-k agreement needs a whole number k >= 1.*\nPass e.g. k=5"):
        TopKAgreementComparator(k=k)  # type: ignore[arg-type]


def test_median_ratio_matches_numpy_and_ignores_an_outlier() -> None:
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(101, generator=gen)
    b = a * 1.01
    b[0] = 1e6  # one outlier leaves the median alone
    expected = np.median(np.abs(a.double().numpy() - b.double().numpy())) / np.median(np.abs(a.double().numpy()))
    assert median_diff_ratio(a, b) == pytest.approx(expected, rel=1e-12)
    assert median_diff_ratio(a, b) == pytest.approx(0.01, rel=1e-5)
    assert MedianRatioComparator().element_compare(a, a) == 0.0


def test_median_ratio_edges() -> None:
    zeros = torch.zeros(4)
    assert median_diff_ratio(zeros, zeros) == 0.0
    assert median_diff_ratio(zeros, torch.ones(4)) == math.inf
    assert math.isnan(median_diff_ratio(torch.tensor([1.0, float("nan")]), torch.ones(2)))
