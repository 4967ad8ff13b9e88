"""The comparator template method: hook order, validation, misbehaving and custom comparators."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from numdiff.align import RuntimeOutput, align_intermediate_outputs
from numdiff.comparators import (
    GAP_COLUMNS,
    IntermediateOutputMapping,
    MSEComparator,
    NumericalComparatorBase,
)
from numdiff.errors import ComparatorError

AOT_NAMES = {(3,): ["aten_add"]}
RT_NAMES = {(3,): ["native_call_add.out"]}


def one_pair(a: Any = None, b: Any = None) -> IntermediateOutputMapping:
    a = torch.ones(2, 3) if a is None else a
    b = torch.zeros(2, 3) if b is None else b
    return {((3,), a): ((3,), b)}


class ReturnsTensor(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        return torch.tensor(1.0)  # type: ignore[return-value]


class ReturnsNone(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        return None  # type: ignore[return-value]


class Raises(NumericalComparatorBase):
    def element_compare(self, a: Any, b: Any) -> float:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (ReturnsTensor, r"returned Tensor on AOT handle \(3,\) \['aten_add'\] \(shape \(2, 3\) torch.float32\)"),
        (ReturnsNone, r"returned NoneType on AOT handle \(3,\)"),
        (Raises, r"element_compare failed on AOT handle \(3,\) .* runtime handle \(3,\) \['native_call_add.out'\] .*RuntimeError: boom"),
    ],
)
def test_misbehaving_element_compare_raises_comparator_error(cls: type[NumericalComparatorBase], message: str) -> None:
    with pytest.raises(ComparatorError, match=message) as info:
        cls().compare(one_pair(), AOT_NAMES, RT_NAMES)
    if cls is Raises:
        assert isinstance(info.value.__cause__, RuntimeError)


class Bad(NumericalComparatorBase):
    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result

    def preprocessing(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result  # type: ignore[no-any-return]

    def element_compare(self, a: Any, b: Any) -> float:
        return 0.0


@pytest.mark.parametrize(
    ("result", "message", "builtin"),
    [
        # The reference's first sentences (ExecuTorch 1.5.1 raises TypeError / ValueError with these).
        ("invalid", r"preprocessing\(\) must return a dict, got str", TypeError),
        ({"invalid_key": ((0,), 1)}, "Invalid key format in preprocessed mapping", ValueError),
        ({(("x",), 1): ((0,), 1)}, "Invalid AOT debug handle in key", ValueError),
        ({((0,), 1): "invalid"}, "Invalid value format in preprocessed mapping", ValueError),
        ({((0,), 1): (("x",), 1)}, "Invalid runtime debug handle in value", ValueError),
        (KeyError("k"), "preprocessing raised KeyError", None),
        (ValueError("bad scale"), "preprocessing raised ValueError: bad scale", ValueError),
        (TypeError("not a tensor"), "preprocessing raised TypeError: not a tensor", TypeError),
    ],
)
def test_bad_preprocessing_raises_comparator_error(result: Any, message: str, builtin: type[Exception] | None) -> None:
    with pytest.raises(ComparatorError, match=message) as info:
        Bad(result).compare(one_pair(), {}, {})
    if builtin is not None:
        assert isinstance(info.value, builtin)  # `except TypeError/ValueError` written for the reference still works
    else:
        assert not isinstance(info.value, (TypeError, ValueError))


def test_element_compare_value_error_stays_a_value_error() -> None:
    class Strict(NumericalComparatorBase):
        def element_compare(self, a: Any, b: Any) -> float:
            raise ValueError("Error computing custom difference between tensors")

    with pytest.raises(ValueError, match="element_compare failed on AOT handle .*custom difference") as info:
        Strict().compare(one_pair(), AOT_NAMES, RT_NAMES)
    assert isinstance(info.value, ComparatorError)


def test_hook_order_preprocessing_once_then_element_compare_per_element() -> None:
    calls: list[str] = []

    class Spy(NumericalComparatorBase):
        def preprocessing(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
            calls.append(f"preprocessing({len(mapping)})")
            return mapping

        def element_compare(self, a: Any, b: Any) -> float:
            calls.append("element_compare")
            return 1

    mapping = {((1,), torch.ones(1)): ((1,), torch.ones(1)), ((2,), (torch.ones(1),)): ((2,), (torch.ones(1),))}
    df = Spy().compare(mapping, {}, {})
    assert calls == ["preprocessing(2)", "element_compare", "element_compare"]
    assert list(df["gap"]) == [[1.0], [1.0]] and all(isinstance(g[0], float) for g in df["gap"])


def test_columns_in_reference_order_even_when_empty() -> None:
    df = MSEComparator().compare({}, {}, {})
    assert list(df.columns) == list(GAP_COLUMNS) and len(df) == 0


def test_aot_sequence_of_several_is_skipped_and_warned() -> None:
    x = torch.ones(2)
    with pytest.warns(UserWarning, match="1 sequence_skipped"):
        df = MSEComparator().compare({((3,), (x, x)): ((3,), (x, x))}, {}, {})
    assert len(df) == 0


def test_shape_mismatch_marks_row_unmatched_without_sinking_table() -> None:
    mapping = {((1,), torch.ones(2)): ((1,), torch.ones(3)), ((2,), torch.ones(2)): ((2,), torch.zeros(2))}
    table = MSEComparator().compare_to_table(mapping, {}, {})
    bad, good = table.rows
    assert not bad.matched and math.isnan(bad.gap[0]) and "element counts differ" in (bad.note or "")
    assert good.matched and good.gap == [1.0]


def test_view_only_shape_difference_is_compared_and_said() -> None:
    a = torch.arange(256.0).reshape(1, 8, 32)
    table = MSEComparator().compare_to_table({((5,), a): ((5,), a.reshape(1, 8, 2, 16).clone())}, {}, {})
    (row,) = table.rows
    assert row.matched and row.gap == [0.0] and "reshape" in (row.note or "")


def test_opting_out_of_reshape_passes_raw_shapes() -> None:
    seen: list[tuple[int, ...]] = []

    class Raw(NumericalComparatorBase):
        reshape_same_numel = False

        def element_compare(self, a: Any, b: Any) -> float:
            seen.append(tuple(b.shape))
            return 0.0

    Raw().compare({((5,), torch.ones(6)): ((5,), torch.ones(2, 3))}, {}, {})
    assert seen == [(2, 3)]


class Int8Dequantizing(MSEComparator):
    """Dequantize int8 runtime outputs with one scale before the MSE."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def preprocessing(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
        return {
            aot: (handle, out.double() * self.scale if isinstance(out, torch.Tensor) and out.dtype == torch.int8 else out)
            for aot, (handle, out) in mapping.items()
        }


def test_custom_int8_dequantizing_subclass() -> None:
    aot = torch.tensor([0.5, -1.0, 0.25], dtype=torch.float64)
    runtime = torch.tensor([2, -4, 1], dtype=torch.int8)
    df = Int8Dequantizing(scale=0.25).compare({((1,), aot): ((1,), runtime)}, {(1,): ["linear"]}, {(1,): ["q_linear"]})
    assert df["gap"][0] == [0.0]
    assert MSEComparator().compare({((1,), aot): ((1,), runtime)}, {}, {})["gap"][0][0] > 1


def test_inspector_property_is_plain_state() -> None:
    comparator = MSEComparator()
    assert comparator.inspector is None
    sentinel = object()
    comparator.inspector = sentinel
    assert MSEComparator(inspector=sentinel).inspector is sentinel and comparator.inspector is sentinel


def test_compare_aligned_rows_say_how_they_were_matched() -> None:
    values, indices = torch.ones(2), torch.zeros(2, dtype=torch.long)
    report = align_intermediate_outputs(
        {(3,): (values, indices)}, {(3,): RuntimeOutput((3,), 1, "max", [values + 1, indices])}
    )
    table = MSEComparator().compare_aligned(report, {(3,): ["max_pool2d_with_indices"]}, {})
    df = table.to_dataframe(extended=True)
    assert list(df["gap"]) == [[1.0], [0.0]]
    assert list(df["match"]) == ["element_position", "element_position"]
    assert list(df["aot_ops"]) == [["max_pool2d_with_indices"]] * 2


def test_package_does_not_import_an_inspector() -> None:
    from numdiff.comparators import base

    assert "Inspector" not in vars(base)


def test_scalar_against_one_element_tensor_is_compared_without_a_note() -> None:
    table = MSEComparator().compare_to_table({((1,), 3): ((1,), torch.tensor([5]))}, {}, {})
    assert table.rows[0].gap == [4.0] and table.notes == () and table.rows[0].note is None


def test_layout_permutation_gets_a_hint() -> None:
    nchw = torch.arange(24.0).reshape(1, 2, 3, 4)
    table = MSEComparator().compare_to_table({((1,), nchw): ((1,), nchw.permute(0, 2, 3, 1).contiguous())}, {}, {})
    assert "permute it back in preprocessing()" in (table.rows[0].note or "")
