"""A metric owns its direction (``higher_is_better``) and SNR has one definition (``snr_db``)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from numdiff.comparators import (
    CosineSimilarityComparator,
    L1Comparator,
    MaxAbsComparator,
    MSEComparator,
    NumericalComparatorBase,
    SNRComparator,
    comparator_class,
    register_comparator,
    snr_db,
)
from numdiff.culprits.quant_view import layer_cost
from numdiff.report.gap_table import worst_rows


class _AgreementComparator(NumericalComparatorBase):
    """A custom score where larger means closer: the fraction of equal elements."""

    higher_is_better = True

    def element_compare(self, a: object, b: object) -> float:
        x, y = torch.as_tensor(a), torch.as_tensor(b)
        return float((x == y).double().mean())


@pytest.fixture
def agreement(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_AgreementComparator`` registered as ``test_agreement`` for one test (the registry is restored)."""
    from numdiff.comparators import _registry

    monkeypatch.setattr(_registry, "_COMPARATORS", dict(_registry._COMPARATORS))
    register_comparator("test_agreement", _AgreementComparator)


def test_each_builtin_metric_says_how_to_read_it() -> None:
    assert NumericalComparatorBase.higher_is_better is False
    assert SNRComparator.higher_is_better and CosineSimilarityComparator.higher_is_better
    assert not any(c.higher_is_better for c in (L1Comparator, MSEComparator, MaxAbsComparator))


def test_a_registered_name_or_class_name_finds_the_metric(agreement: None) -> None:
    assert comparator_class("snr") is SNRComparator
    assert comparator_class("SNRComparator") is SNRComparator
    assert comparator_class("test_agreement") is _AgreementComparator
    assert comparator_class("_AgreementComparator") is _AgreementComparator
    assert comparator_class("no_such_metric") is None


@pytest.mark.parametrize("metric", ["test_agreement", "_AgreementComparator", _AgreementComparator,
                                    _AgreementComparator()])
def test_worst_rows_ranks_a_custom_higher_is_better_metric_lowest_first(agreement: None, metric: object) -> None:
    df = pd.DataFrame({"gap": [[0.9], [0.1], [0.5], [float("nan")]]})
    ranked = worst_rows(df, metric)  # type: ignore[arg-type]
    assert [g[0] for g in ranked["gap"]][:3] == [pytest.approx(float("nan"), nan_ok=True), 0.1, 0.5]
    assert math.isnan(ranked["gap"].iloc[0][0]) and ranked["gap"].iloc[-1] == [0.9]


def test_worst_rows_ranks_an_error_metric_highest_first() -> None:
    df = pd.DataFrame({"gap": [[0.9], [0.1], [0.5]]})
    assert [g[0] for g in worst_rows(df, "MSEComparator")["gap"]] == [0.9, 0.5, 0.1]


def test_snr_db_edges_are_the_references() -> None:
    assert snr_db(1.0, 0.0) == math.inf
    assert snr_db(0.0, 1.0) == -math.inf
    assert math.isnan(snr_db(0.0, 0.0))
    assert snr_db(100.0, 1.0) == pytest.approx(20.0)


def test_zero_signal_and_zero_noise_is_nan_in_the_gap_table_on_both_paths() -> None:
    zeros = torch.zeros(4)
    assert math.isnan(SNRComparator().element_compare(zeros, zeros.clone()))  # fast path: snr_db
    assert math.isnan(SNRComparator().element_compare(torch.zeros(2, dtype=torch.bfloat16),
                                                      torch.zeros(2, dtype=torch.bfloat16)))  # tensor formula


def test_the_quantization_view_calls_identical_outputs_free_even_when_all_zero() -> None:
    zeros = torch.zeros(3)
    assert layer_cost(zeros, zeros.clone()) == (math.inf, 0.0, None)
    ones = torch.ones(3)
    assert layer_cost(ones, ones.clone()) == (math.inf, 0.0, None)
    snr, rel, note = layer_cost(torch.zeros(3), torch.ones(3))
    assert (snr, rel, note) == (-math.inf, math.inf, None)
    snr, rel, _ = layer_cost(torch.tensor([10.0]), torch.tensor([9.0]))
    assert snr == pytest.approx(snr_db(100.0, 1.0)) and rel == pytest.approx(0.01)
