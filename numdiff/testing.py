"""Assertions for tests of quantized or lowered models: per-layer SNR in one line.

Example (a complete pytest test)::

    from numdiff import Inspector
    from numdiff.testing import assert_snr_at_least

    def test_quantized_model_keeps_25_db():
        inspector = Inspector(etdump_path="out/etdump.etdp", etrecord="out/etrecord.bin",
                              debug_buffer_path="out/debug_buffer.bin")
        assert_snr_at_least(inspector, min_db=25)

On failure the message is a table of the worst layers (op, module path, the model's own source
line, SNR) rather than a bare ``assert``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pandas as pd

from numdiff._core.advice import INPUTS_HINT
from numdiff.report.gap_table import render_gap_table, worst_rows

if TYPE_CHECKING:
    from numdiff.culprits import CulpritReport, Thresholds
    from numdiff.inspector import Inspector

__all__ = ["assert_no_culprits", "assert_snr_at_least", "layer_snr"]


def _gap_frame(source: Inspector | pd.DataFrame,
               reference_graph: str | None) -> tuple[pd.DataFrame, dict[str, str] | None]:
    """The gap rows and their module paths (None for the reference's DataFrame: it has no module column)."""
    if isinstance(source, pd.DataFrame):
        if "gap" not in source.columns or "aot_ops" not in source.columns:
            raise TypeError("expected a gap DataFrame from Inspector.calculate_numeric_gap('SNR') "
                            f"(columns aot_ops, gap, ...); got columns {list(source.columns)}")
        return source, None
    report = source.numeric_gap_report("SNR", reference_graph=reference_graph)
    return report.to_dataframe(), report.module_paths


def layer_snr(source: Inspector | pd.DataFrame, reference_graph: str | None = None) -> pd.DataFrame:
    """Per-layer SNR in dB: one row per compared layer, with the lowest element's SNR in ``snr_db``.

    Args:
        source: An Inspector (numdiff's full analysis is run, multi-output ops included) or a
            DataFrame from ``calculate_numeric_gap("SNR")``.
        reference_graph: Passed to the Inspector's analysis. Defaults to None (auto).
    """
    df, _ = _gap_frame(source, reference_graph)
    out = df.copy()
    out["snr_db"] = [_lowest(g) for g in df["gap"]]
    return out


def _lowest(gap: float | list[float] | tuple[float, ...]) -> float:
    values = [float(x) for x in (gap if isinstance(gap, (list, tuple)) else [gap])]
    return math.nan if not values or any(math.isnan(v) for v in values) else min(values)


def assert_snr_at_least(
    source: Inspector | pd.DataFrame,
    min_db: float,
    *,
    reference_graph: str | None = None,
    ignore_ops: Iterable[str] = (),
    show: int = 10,
) -> pd.DataFrame:
    """Fail unless every compared layer has an SNR of at least ``min_db`` decibels.

    A layer whose SNR is NaN (NaN or unmatched outputs) fails too. ``inf`` (bit-exact) passes.

    Args:
        source: An Inspector, or a DataFrame from ``calculate_numeric_gap("SNR")``.
        min_db: The threshold in dB.
        reference_graph: Reference graph for the Inspector's analysis. Defaults to None (auto).
        ignore_ops: AOT op names (e.g. ``"aten_sigmoid_default"``) whose rows are not checked.
        show: How many of the worst layers the failure message lists. Defaults to 10.

    Returns:
        The per-layer table (with ``snr_db``), for further checks.

    Raises:
        AssertionError: Some layer is below ``min_db``; the message lists the worst layers.
    """
    df, modules = _gap_frame(source, reference_graph)
    ignored = set(ignore_ops)
    snr = [_lowest(g) for g in df["gap"]]
    checked = [not ignored.intersection(ops) for ops in df["aot_ops"]]
    failing = [i for i, (s, c) in enumerate(zip(snr, checked, strict=True)) if c and not s >= min_db]
    if failing:
        worst = worst_rows(df.iloc[failing], "SNRComparator", show)
        shown = ("the failing layer" if len(failing) == 1 else f"the {len(failing)} failing layers"
                 if len(worst) == len(failing) else f"the worst {len(worst)} of the {len(failing)} failing layers")
        table = render_gap_table(worst, "SNR", module_paths=modules,
                                 columns=("handle", "aot_ops", "module", "source", "gap", "note"),
                                 title=f"{shown} ({len(df)} compared; SNR dB, worst first)")
        raise AssertionError(
            f"{len(failing)} of {sum(checked)} layers are below {min_db} dB SNR "
            f"(lowest: {min(snr[i] for i in failing):.4g} dB)\n{table}"
        )
    out = df.copy()
    out["snr_db"] = snr
    return out


def assert_no_culprits(
    inspector: Inspector,
    *,
    distance: str = "SNR",
    reference_graph: str | None = None,
    thresholds: Thresholds | Mapping[str, Thresholds | Mapping[str, float]] | None = None,
    ignore_ops: Iterable[str] = (),
    inputs_are_representative: bool = False,
) -> CulpritReport:
    """Fail when some op is wrong by itself, or could not be judged (see ``Inspector.find_culprits``).

    Args:
        inspector: The Inspector of the run to check.
        distance: Metric shown for local and accumulated error. Defaults to "SNR".
        reference_graph: Passed to ``find_culprits``. Defaults to None (auto).
        thresholds: Verdict limits (``Thresholds`` or ``{op type: dict}``). Defaults to None.
        ignore_ops: AOT op names whose culprit rows are tolerated.
        inputs_are_representative: The run used the ETRecord's representative inputs (passed to
            ``find_culprits``): ops that read graph inputs are then always judged.

    Returns:
        The ``CulpritReport``, for further checks.

    Raises:
        AssertionError: One line per culprit: ops, verdict, local and accumulated error, module
            and the model's own source line; and one per op that could not be judged because the
            run's inputs are in doubt (a gate passes only what it judged).
    """
    report = inspector.find_culprits(distance, reference_graph=reference_graph, thresholds=thresholds,
                                     inputs_are_representative=inputs_are_representative)
    ignored = set(ignore_ops)
    culprits = [r for r in report.culprits if not ignored.intersection(r.aot_ops)]
    unjudged = [r for r in report.rows if r.verdict.value == "not-judged" and not ignored.intersection(r.aot_ops)]
    lines: list[str] = []
    if culprits:
        lines.append(f"{len(culprits)} culprit op(s) ({report.metric}; local = replayed on the runtime's inputs):")
        for r in culprits:
            lines.append(f"- {r.title}{f' in method {r.method}' if r.method else ''} "
                         f"[{r.verdict.value}] local {r.local_gap:.4g} "
                         f"({r.local_noise_units:.3g} noise units), accumulated {r.accumulated_gap:.4g}; "
                         f"module {r.module_path or '?'}; {r.source_line or 'no source line'}")
        if report.first_nonfinite is not None:
            lines.append(str(report.first_nonfinite))
    if unjudged:
        lines.append(f"{len(unjudged)} op(s) not judged: they read graph inputs the runtime did not log, and their "
                     f"replays on the representative inputs say the run may have used other inputs ({INPUTS_HINT}):")
        lines += [f"- {r.title}; module {r.module_path or '?'}; {r.source_line or 'no source line'}"
                  for r in unjudged]
    if lines:
        raise AssertionError("\n".join(lines))
    return report
