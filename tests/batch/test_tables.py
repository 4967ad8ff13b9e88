"""The fleet tables' latency columns are in milliseconds whatever unit the profile was read in."""

from __future__ import annotations

import pytest

from numdiff.analysis.models import Analysis
from numdiff.analysis.records import EventStats, GapRowModel, GapSection, ProfileBlock, ProfileSummary
from numdiff.batch.tables import flatten


def _analysis(unit: str, p50: float) -> Analysis:
    op = EventStats(index=0, name="native_call_add.out", runs=2, p50=p50, durations=[p50, p50], debug_handles=[1])
    execute = EventStats(index=1, name="Method::execute", runs=2, p50=2 * p50, durations=[2 * p50, 2 * p50])
    row = GapRowModel(index=0, aot_debug_handle=[1], aot_ops=["add"], runtime_ops=["native_call_add.out"],
                      runtime_debug_handle=[1], snr=[100.0], mse=[0.0], l1=[0.0], matched=True)
    return Analysis(numdiff_version="0", created_utc="2026-01-01T00:00:00+00:00",
                    profile=ProfileSummary(time_unit=unit, blocks=[ProfileBlock(name="Execute", runs=2,
                                                                                events=[op, execute])]),
                    gap=GapSection(graph_name="forward", rows=[row]))


@pytest.mark.parametrize(("unit", "p50"), [("ms", 1.5), ("us", 1500.0), ("ns", 1.5e6), ("s", 0.0015)])
def test_latency_columns_are_milliseconds(unit: str, p50: float) -> None:
    run, ops = flatten(_analysis(unit, p50))
    assert run["execute_p50_ms"] == pytest.approx(3.0)
    assert ops[0]["latency_p50_ms"] == pytest.approx(1.5) and ops[0]["latency_events"] == 1


def test_cycles_have_no_milliseconds() -> None:
    run, ops = flatten(_analysis("cycles", 1500.0))
    assert run["execute_p50_ms"] is None
    assert ops[0].get("latency_p50_ms") is None and ops[0]["latency_events"] == 1
