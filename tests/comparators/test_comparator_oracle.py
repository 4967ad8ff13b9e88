"""Built-in comparators and compare_results against the reference's recorded answers."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch
from oracle_codec import ORACLE, dec, enc, enc_float


def same_float(got: Any, want: Any) -> bool:
    """Equal, or equal to float tolerance: numdiff reduces in another order than torch (~1e-16 relative)."""
    if isinstance(got, float) and isinstance(want, float):
        return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-300)
    return bool(got == want)

from numdiff.comparators.numerics import collect_replacements, reference_float64
from numdiff.comparators import (
    CompareNoteKind,
    L1Comparator,
    MSEComparator,
    SNRComparator,
    compare_results,
)

COMPARATORS = {"l1": L1Comparator, "mse": MSEComparator, "snr": SNRComparator}


@pytest.mark.parametrize("metric", sorted(COMPARATORS))
@pytest.mark.parametrize("case", ORACLE["element_compare"], ids=lambda c: str(c["a"])[:40])
def test_element_compare_matches_reference(case: dict[str, Any], metric: str) -> None:
    a, b = dec(case["a"]), dec(case["b"])
    expected = case[metric]
    comparator = COMPARATORS[metric]()
    with collect_replacements():
        if "raises" in expected:
            assert expected["raises"] == "ValueError"
            with pytest.raises(ValueError):
                comparator.element_compare(a, b)
            return
        got = comparator.element_compare(a, b)
    assert same_float(enc_float(got), expected["result"])


def _rows(df: Any) -> list[dict[str, Any]]:
    return [
        {"aot_debug_handle": list(r["aot_debug_handle"]), "aot_ops": r["aot_ops"], "runtime_ops": r["runtime_ops"],
         "runtime_debug_handle": list(r["runtime_debug_handle"]), "gap": [enc_float(g) for g in r["gap"]]}
        for _, r in df.iterrows()
    ]


@pytest.mark.parametrize("metric", sorted(COMPARATORS))
@pytest.mark.parametrize("case", ORACLE["compare"], ids=lambda c: c["name"])
def test_compare_matches_reference(case: dict[str, Any], metric: str) -> None:
    mapping = {(tuple(ah), dec(av)): (tuple(rh), dec(rv)) for ah, av, rh, rv in case["mapping"]}
    aot_names = {tuple(h): v for h, v in case["aot_names"]}
    runtime_names = {tuple(h): v for h, v in case["runtime_names"]}
    expected = case[metric]
    table = COMPARATORS[metric]().compare_to_table(mapping, aot_names, runtime_names)
    if "raises" in expected:
        # The reference raises for the whole table; numdiff answers for the row.
        (row,) = table.rows
        if case["name"] == "reshape":
            assert row.matched and not math.isnan(row.gap[0]) and table.counts() == {"reshaped": 1}
        else:
            assert not row.matched and math.isnan(row.gap[0]) and table.counts() == {"unmatched": 1}
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = COMPARATORS[metric]().compare(mapping, aot_names, runtime_names)
    assert list(df.columns) == expected["result"]["columns"]
    got_rows, want_rows = _rows(df), expected["result"]["rows"]
    assert len(got_rows) == len(want_rows)
    for g, w in zip(got_rows, want_rows, strict=True):
        assert {k: v for k, v in g.items() if k != "gap"} == {k: v for k, v in w.items() if k != "gap"}
        assert len(g["gap"]) == len(w["gap"]) and all(same_float(a, b) for a, b in zip(g["gap"], w["gap"], strict=True))


def test_compare_counts_what_the_reference_drops() -> None:
    case = next(c for c in ORACLE["compare"] if c["name"] == "none_skipped")
    mapping = {(tuple(ah), dec(av)): (tuple(rh), dec(rv)) for ah, av, rh, rv in case["mapping"]}
    with pytest.warns(UserWarning, match="2 none_output"):
        df = MSEComparator().compare(mapping, {}, {})
    assert len(df) == 1 and df.attrs["numdiff_notes"] == {"none_output": 2}


@pytest.mark.parametrize("case", ORACLE["program_outputs"], ids=lambda c: str(c["reference"])[:30])
def test_compare_results_matches_reference(case: dict[str, Any]) -> None:
    ref = [dec(v) for v in case["reference"]]
    run = [dec(v) for v in case["run"]]
    got = compare_results(ref, run)
    assert got.keys() == case["result"].keys()
    for k, v in got.items():
        assert all(same_float(enc_float(x), y) for x, y in zip(v, case["result"][k], strict=True))


@pytest.mark.parametrize("case", ORACLE["convert_to_float_tensor"], ids=lambda c: str(c["input"])[:30])
def test_reference_float64_matches_reference_conversion(case: dict[str, Any]) -> None:
    with collect_replacements():
        got = reference_float64(dec(case["input"]))
    assert got.dtype == torch.float64
    assert enc(got) == case["result"]


def test_reference_float64_counts_and_warns() -> None:
    value = torch.tensor([1.0, float("nan"), float("inf"), float("-inf")])
    with pytest.warns(UserWarning, match="1 NaN replaced by 0, 2 inf replaced"):
        reference_float64(value)
    with collect_replacements() as tally:
        reference_float64(value)
        reference_float64(torch.tensor([float("inf")]))  # no NaN: inf kept, nothing counted
    assert (tally.nan, tally.inf) == (1, 2)


def test_compare_row_says_nan_was_replaced() -> None:
    mapping = {((1,), torch.tensor([float("nan"), 1.0])): ((1,), torch.tensor([0.0, 1.0]))}
    table = SNRComparator().compare_to_table(mapping, {}, {})
    (row,) = table.rows
    assert row.gap == [math.inf] and "1 NaN replaced by 0" in (row.note or "")
    assert table.counts() == {"nan_replaced": 1}
    assert CompareNoteKind.NAN_REPLACED in {n.kind for n in table.notes}
