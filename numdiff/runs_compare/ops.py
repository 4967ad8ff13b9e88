"""One op of two runs compared: relative difference against the tolerance, the comparator, the fit, the side."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from numdiff.align import RuntimeOutput
from numdiff.comparators import NumericalComparatorBase
from numdiff.culprits import CulpritReport, Verdict
from numdiff.errors import ComparatorError, NumdiffError
from numdiff.runs_compare.fit import Fit, fit_systematic
from numdiff.runs_compare.records import Agreement, OpComparison, Side
from numdiff.runs_compare.values import row_value

__all__ = ["DEFAULT_TOLERANCES", "INTEGER_STEPS", "compare_step", "gap", "relative_difference", "within"]

#: Relative rms difference within which floating-point values of two runs agree, by dtype.
DEFAULT_TOLERANCES = {torch.float64: 1e-4, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
#: The fit of an op that was not compared.
NOT_FITTED = Fit(math.nan, math.nan, math.nan, math.nan, "none", None)
#: Integer (quantized) values agree when no element differs by more than this many steps.
INTEGER_STEPS = 1.0

def relative_difference(base: torch.Tensor, run: torch.Tensor) -> float:
    """``rms(run - base) / rms(base)`` in float64 (integers: the largest absolute difference, in steps).

    0 when equal; ``inf`` when the base is all zero and the run is not; ``nan`` with a NaN.

    Example:
        >>> relative_difference(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.0]) * 1.5)
        0.5
    """
    if not base.dtype.is_floating_point and not base.dtype.is_complex:
        if base.numel() == 0:
            return 0.0
        return float((run.to(torch.float64) - base.to(torch.float64)).abs().max())
    a, b = base.detach().to(torch.float64).reshape(-1), run.detach().to(torch.float64).reshape(-1)
    noise = float(((b - a) ** 2).sum())
    signal = float((a * a).sum())
    if math.isnan(noise) or math.isnan(signal):
        return math.nan
    if noise == 0:
        return 0.0
    return math.inf if signal == 0 else math.sqrt(noise / signal)


def within(base: torch.Tensor, rel: float, tolerance: float | None) -> bool:
    if not base.dtype.is_floating_point:
        return rel <= INTEGER_STEPS
    limit = DEFAULT_TOLERANCES.get(base.dtype, 1e-4) if tolerance is None else tolerance
    return rel <= limit


def gap(comparator: NumericalComparatorBase, base: torch.Tensor, run: torch.Tensor, what: str) -> float:
    try:
        return float(comparator.element_compare(base, run))
    except NumdiffError:
        raise
    except Exception as e:
        raise ComparatorError(f"{type(comparator).__name__} failed comparing {what} of two runs "
                              f"({tuple(base.shape)} {base.dtype}): {type(e).__name__}: {e}\n"
                              "Check the comparator's element_compare, or pick another metric.") from e


def _side(run: Verdict, base: Verdict) -> Side:
    judged = (Verdict.OK, Verdict.EXPECTED_NOISE, Verdict.SUSPICIOUS, Verdict.BROKEN)
    if run not in judged or base not in judged:
        return Side.UNKNOWN
    if run.beyond_noise and base.beyond_noise:
        return Side.BOTH
    if run.beyond_noise:
        return Side.RUN
    return Side.BASE if base.beyond_noise else Side.NEITHER


def compare_step(base_report: CulpritReport, run_report: CulpritReport, base_values: Mapping[tuple[int, ...], RuntimeOutput],
                 run_values: Mapping[tuple[int, ...], RuntimeOutput], comparator: NumericalComparatorBase,
                 tolerance: float | None) -> tuple[OpComparison, ...]:
    """Every op of one step (or run) of ``run`` against the base's, in execution order."""
    ops: list[OpComparison] = []
    for base_row, run_row in zip(base_report.rows, run_report.rows):
        a, b = row_value(base_values, base_row), row_value(run_values, run_row)
        names = (tuple(base_row.aot_ops), tuple(base_row.runtime_ops), base_row.module_path)
        if a is None or b is None:
            ops.append(OpComparison(base_row.index, *names, math.nan, math.nan, Agreement.NOT_COMPARED, NOT_FITTED,
                                    run_row.verdict, base_row.verdict, Side.NONE, "a run logged no value for this op"))
            continue
        rel = relative_difference(a, b)
        side, note = _side(run_row.verdict, base_row.verdict), None
        if torch.equal(a, b):
            verdict = Agreement.IDENTICAL
        elif within(a, rel, tolerance):
            verdict = Agreement.WITHIN_NOISE
        elif any(ops[p].verdict.beyond_noise for p in base_row.producers if p < len(ops)):
            verdict = Agreement.INHERITS
        elif side is Side.NEITHER:
            verdict = Agreement.WITHIN_NOISE
            note = (f"differs by {rel:.3g} (beyond the tolerance) but each run's op is within its own noise of the "
                    "reference on its inputs")
        else:
            verdict = Agreement.DIVERGES
        ops.append(OpComparison(base_row.index, *names, gap(comparator, a, b, ", ".join(names[0])), rel, verdict,
                                fit_systematic(a, b), run_row.verdict, base_row.verdict,
                                side if verdict.beyond_noise else Side.NONE, note))
    return tuple(ops)


