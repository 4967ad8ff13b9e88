"""One op of two runs: tolerance, the culprit noise model deciding 'within-noise', inherited differences."""

from __future__ import annotations

from dataclasses import replace

import pytest


from numdiff.align import RuntimeOutput
from numdiff.comparators import get_comparator
from numdiff.culprits import Verdict
from numdiff.runs_compare import Agreement, Side
from numdiff.runs_compare.ops import compare_step
from numdiff.runs_compare.values import flat_tensors, open_run, RunFiles
from tests.runs_compare.conftest import MLP, mlp_run

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def base():  # type: ignore[no-untyped-def]
    from numdiff.schema.etrecord import parse_etrecord

    return open_run("base", RunFiles(*mlp_run("base")), parse_etrecord(str(MLP / "etrecord.bin")), distance="SNR",
                    reference_graph=None, thresholds=None, decode_steps=False)


def _nudged(values: dict[tuple[int, ...], RuntimeOutput], handle: tuple[int, ...], factor: float) -> dict:  # type: ignore[type-arg]
    out = dict(values)
    logged = values[handle]
    out[handle] = replace(logged, data=[t * factor for t in flat_tensors(logged.data)])
    return out


def test_beyond_the_tolerance_but_within_each_sides_noise_is_within_noise(base) -> None:  # type: ignore[no-untyped-def]
    report, values = base.report, base.values()
    row = report.rows[2]  # linear_1: both runs' local verdicts are ok
    run_values = _nudged(values, tuple(row.runtime_handle), 1 + 1e-3)
    ops = compare_step(report, report, values, run_values, get_comparator("snr"), None)
    op = ops[2]
    assert op.rel_diff == pytest.approx(1e-3, rel=1e-3)
    assert op.verdict is Agreement.WITHIN_NOISE and op.departs is Side.NONE
    assert "each run's op is within its own noise" in (op.note or "")
    assert all(o.verdict is Agreement.IDENTICAL for i, o in enumerate(ops) if i != 2)


def test_the_side_whose_op_is_beyond_its_noise_makes_it_diverge(base) -> None:  # type: ignore[no-untyped-def]
    report, values = base.report, base.values()
    row = report.rows[2]
    broken = replace(report, rows=tuple(replace(r, verdict=Verdict.BROKEN) if r.index == 2 else r for r in report.rows))
    run_values = _nudged(values, tuple(row.runtime_handle), 1 + 1e-3)
    ops = compare_step(report, broken, values, run_values, get_comparator("snr"), None)
    assert ops[2].verdict is Agreement.DIVERGES and ops[2].departs is Side.RUN
    ops = compare_step(broken, report, values, run_values, get_comparator("snr"), None)
    assert ops[2].verdict is Agreement.DIVERGES and ops[2].departs is Side.BASE


def test_a_tolerance_covers_the_difference(base) -> None:  # type: ignore[no-untyped-def]
    report, values = base.report, base.values()
    run_values = _nudged(values, tuple(report.rows[2].runtime_handle), 1 + 1e-3)
    ops = compare_step(report, report, values, run_values, get_comparator("snr"), 1e-2)
    assert ops[2].verdict is Agreement.WITHIN_NOISE and ops[2].note is None


def test_an_op_without_a_value_is_not_compared(base) -> None:  # type: ignore[no-untyped-def]
    report, values = base.report, base.values()
    missing = {h: v for h, v in values.items() if h != tuple(report.rows[0].runtime_handle)}
    op = compare_step(report, report, values, missing, get_comparator("snr"), None)[0]
    assert op.verdict is Agreement.NOT_COMPARED and op.fit.words is None
    assert op.note == "a run logged no value for this op"


