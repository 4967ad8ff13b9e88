"""Device against device in a fleet: the outlier per op and the device × device matrix."""

from __future__ import annotations

from typing import Any

import pytest

from numdiff.batch.fleet import Cell, FleetSummary, text_summary
from numdiff.batch.outliers import disagree, outliers, pair_matrix


def _summary(cells: dict[tuple[str, str], Cell], groups: list[str]) -> FleetSummary:
    ops = list(dict.fromkeys(op for op, _ in cells))
    return FleetSummary("device", ops, groups, cells, {g: 2 for g in groups}, {}, [])


def _cell(diverging: int, snr: float | None, runs: int = 2) -> Cell:
    return Cell(runs, diverging, snr, snr, 1.0)


def test_the_device_alone_on_an_op_is_its_outlier() -> None:
    groups = ["a", "b", "c"]
    cells = {("relu", "a"): _cell(0, 140.0), ("relu", "b"): _cell(0, float("inf")), ("relu", "c"): _cell(2, 31.0),
             ("tanh", "a"): _cell(0, 120.0), ("tanh", "b"): _cell(0, 70.0), ("tanh", "c"): _cell(0, 121.0),
             ("linear", "a"): _cell(2, 10.0), ("linear", "b"): _cell(2, 10.5), ("linear", "c"): _cell(2, 9.0)}
    s = _summary(cells, groups)
    found = {o.op: o for o in outliers(s)}
    assert found["relu"].group == "c" and found["relu"].reason == "diverges in 2/2 runs, on no other device"
    assert found["tanh"].group == "b" and found["tanh"].reason == "median SNR 70 dB, the others 100 dB (capped)"
    assert "linear" not in found  # diverges everywhere: planted in the model, no device stands alone
    pairs = pair_matrix(s)
    assert pairs[("a", "c")] == ["relu"] and pairs[("a", "b")] == ["tanh"] and pairs[("b", "c")] == ["relu", "tanh"]
    text = text_summary(s)
    assert "  relu: device=c (diverges in 2/2 runs, on no other device)" in text
    assert "ops on which two devices disagree" in text


def test_no_outlier_without_a_majority_or_when_the_others_disagree() -> None:
    two = _summary({("relu", "a"): _cell(0, 140.0), ("relu", "b"): _cell(2, 20.0)}, ["a", "b"])
    assert outliers(two) == [] and pair_matrix(two)[("a", "b")] == ["relu"]
    spread = _summary({("relu", "a"): _cell(0, 90.0), ("relu", "b"): _cell(0, 60.0), ("relu", "c"): _cell(0, 30.0)},
                      ["a", "b", "c"])
    assert outliers(spread) == []


def test_disagree_needs_a_clear_difference() -> None:
    assert not disagree(_cell(1, 50.0, runs=3), _cell(0, 53.0))  # 1 of 3 runs diverging, SNRs 3 dB apart
    assert disagree(_cell(1, 50.0, runs=2), _cell(0, 50.0))  # half of one's runs, none of the other's
    assert not disagree(_cell(1, 50.0, runs=2), _cell(1, 50.0, runs=3))  # both diverge in some runs
    assert disagree(_cell(0, 40.0), _cell(0, 46.0)) and not disagree(_cell(0, 40.0), _cell(0, 45.9))
    assert not disagree(_cell(0, None), _cell(0, 40.0))


def test_on_the_generated_fleet_rpi5_is_the_relu_outlier(fleet: dict[str, Any]) -> None:
    from numdiff.batch.fleet import load_tables, render_fleet_html, summarize

    s = summarize(*load_tables(fleet["out"]), by="device")
    found = {o.op: o.group for o in outliers(s)}
    assert found.get("relu") == "rpi5"
    assert "linear_1" not in found  # the planted culprit diverges on every device
    page = render_fleet_html(s)
    assert 'id="fleet-pairs"' in page and "<b>device=rpi5</b> departs from every other device" in page
