"""Reaching comparators by name, class or instance; registering new ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from numdiff.comparators import (
    CosineSimilarityComparator,
    L1Comparator,
    MaxAbsComparator,
    MSEComparator,
    NumericalComparatorBase,
    SNRComparator,
    _registry,
    available_comparators,
    get_comparator,
    register_comparator,
)
from numdiff.errors import UsageError


@pytest.fixture
def clean_registry() -> Iterator[None]:
    saved = dict(_registry._COMPARATORS)
    yield
    _registry._COMPARATORS.clear()
    _registry._COMPARATORS.update(saved)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("mse", MSEComparator), ("MSE", MSEComparator), (" SNR ", SNRComparator), ("l1", L1Comparator),
        ("cosine", CosineSimilarityComparator), ("Cosine_Similarity", CosineSimilarityComparator),
        ("max_abs", MaxAbsComparator), ("max abs", MaxAbsComparator), ("Max-Abs", MaxAbsComparator),
    ],
)
def test_names_are_case_and_space_insensitive(name: str, cls: type) -> None:
    assert type(get_comparator(name)) is cls


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(UsageError, match=r"Unsupported distance metric 'l2' \(unknown comparator 'l2'\)\nKnown comparators: cosine, cosine_similarity, kl, kl_divergence, l1, max_abs, median_diff_ratio, median_ratio, mse, snr, top_k, topk"):
        get_comparator("l2")


def test_unknown_name_is_a_value_error_like_the_reference() -> None:
    with pytest.raises(ValueError):
        get_comparator("nope")


def test_instance_passes_through_and_class_is_instantiated() -> None:
    comparator = SNRComparator()
    assert get_comparator(comparator) is comparator
    assert type(get_comparator(L1Comparator)) is L1Comparator
    with pytest.raises(UsageError, match="keywords"):
        get_comparator(comparator, inspector=None)
    with pytest.raises(UsageError, match="got int"):
        get_comparator(3)  # type: ignore[arg-type]


def test_register_a_user_comparator_exactly_like_built_ins(clean_registry: None) -> None:
    class Zero(NumericalComparatorBase):
        def __init__(self, offset: float = 0.0, inspector: Any = None) -> None:
            super().__init__(inspector)
            self.offset = offset

        def element_compare(self, a: Any, b: Any) -> float:
            return self.offset

    register_comparator("Zero Gap", Zero)
    assert "zero_gap" in available_comparators()
    comparator = get_comparator("zero gap", offset=2.0)
    assert isinstance(comparator, Zero) and comparator.offset == 2.0


def test_duplicate_and_invalid_registrations_are_errors(clean_registry: None) -> None:
    with pytest.raises(UsageError, match="'mse' is already registered to MSEComparator"):
        register_comparator(" MSE", L1Comparator)
    with pytest.raises(UsageError, match="not a concrete NumericalComparatorBase subclass"):
        register_comparator("base", NumericalComparatorBase)
    with pytest.raises(UsageError, match="not a concrete"):
        register_comparator("dict", dict)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="non-empty"):
        register_comparator("  ", L1Comparator)


def test_unknown_metric_starts_with_the_reference_words_and_is_a_value_error() -> None:
    from numdiff.comparators import get_comparator

    with pytest.raises(ValueError, match=r"^Unsupported distance metric 'PSNR' \(unknown comparator 'PSNR'\)\nKnown comparators: .*snr"):
        get_comparator("PSNR")


def test_a_non_comparator_object_is_a_type_error() -> None:
    from numdiff.comparators import get_comparator
    from numdiff.errors import UsageTypeError

    with pytest.raises(TypeError, match="expected a comparator name, class or instance, got int") as info:
        get_comparator(3)  # type: ignore[arg-type]
    assert isinstance(info.value, UsageTypeError)
