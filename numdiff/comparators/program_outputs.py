"""Compare whole program outputs (reference vs run): the reference's ``compare_results``, without side effects."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from numdiff.comparators._registry import normalize_name
from numdiff.comparators.cosine import cosine_similarity
from numdiff.comparators.mse import mean_squared_error
from numdiff.comparators.snr import signal_to_noise_ratio
from numdiff.errors import MissingDependencyError, UsageError

__all__ = ["PROGRAM_OUTPUT_METRICS", "compare_results", "program_output_metrics"]

#: Metrics for program outputs, in the order the reference reports them.
PROGRAM_OUTPUT_METRICS: dict[str, Callable[[torch.Tensor, torch.Tensor], float]] = {
    "snr": signal_to_noise_ratio,
    "mse": mean_squared_error,
    "cosine_similarity": cosine_similarity,
}


def _selected(metrics: Sequence[str] | None) -> list[str]:
    if metrics is None:
        return list(PROGRAM_OUTPUT_METRICS)
    if isinstance(metrics, str):
        raise UsageError(f"metrics must be a list of names, got the string {metrics!r}\nWrite metrics=[{metrics!r}].")
    wanted = {normalize_name(name) for name in metrics}
    unknown = sorted(wanted - set(PROGRAM_OUTPUT_METRICS))
    if unknown:
        raise UsageError(
            f"unknown program-output metric(s) {unknown}\nKnown metrics: {', '.join(PROGRAM_OUTPUT_METRICS)}."
        )
    return [name for name in PROGRAM_OUTPUT_METRICS if name in wanted]


def program_output_metrics(
    reference_output: Sequence[Any],
    run_output: Sequence[Any],
    metrics: Sequence[str] | None = None,
) -> dict[str, list[float | None]]:
    """Score each program output against its reference, unrounded.

    Each pair of tensors is converted to float32 (as the reference does; NaN is kept) and scored
    with the same metric functions the comparators use. A pair that is not two tensors scores
    ``None``.

    Args:
        reference_output: Expected outputs, in order.
        run_output: Outputs to check, same order and length.
        metrics: Names among ``"snr"``, ``"mse"``, ``"cosine_similarity"`` (case-insensitive).
            Defaults to all three.

    Returns:
        ``{metric: [value per output]}``, metrics in the order above.

    Raises:
        UsageError: Unknown metric, or the two output lists differ in length (the reference
            silently drops the extra outputs).

    Example:
        >>> program_output_metrics([torch.ones(2)], [torch.ones(2)], ["mse"])
        {'mse': [0.0]}
    """
    names = _selected(metrics)
    if len(reference_output) != len(run_output):
        raise UsageError(
            f"{len(reference_output)} reference outputs but {len(run_output)} run outputs\n"
            "Compare outputs of the same program method, in the same order."
        )
    results: dict[str, list[float | None]] = {}
    for name in names:
        metric = PROGRAM_OUTPUT_METRICS[name]
        results[name] = [
            metric(ref.to(torch.float32), run.to(torch.float32))
            if isinstance(ref, torch.Tensor) and isinstance(run, torch.Tensor)
            else None
            for ref, run in zip(reference_output, run_output, strict=True)
        ]
    return results


def compare_results(
    reference_output: Sequence[Any],
    run_output: Sequence[Any],
    metrics: Sequence[str] | None = None,
    plot: bool = False,
    plot_path: str | os.PathLike[str] | None = None,
) -> dict[str, list[float | None]]:
    """Drop-in for the reference's ``compare_results``: values rounded to 2 decimals, as it does.

    Differs from the reference on purpose: it prints nothing, plots only into ``plot_path``
    (one figure, one panel per metric; never ``plt.show()``), and rejects unknown metric names
    and output lists of different lengths instead of ignoring them. Use
    :func:`program_output_metrics` for unrounded values.

    Args:
        reference_output: Expected outputs, in order.
        run_output: Outputs to check, same order and length.
        metrics: Names among ``"snr"``, ``"mse"``, ``"cosine_similarity"``. Defaults to all.
        plot: Draw a bar chart of each metric into ``plot_path``. Defaults to False.
        plot_path: Image file to write (format from the suffix, e.g. ``.png``). Giving it
            implies ``plot``. Defaults to None.

    Raises:
        UsageError: ``plot`` without ``plot_path``, matplotlib not installed, or as
            :func:`program_output_metrics`.

    Example:
        >>> a = torch.tensor([1.0, 2.0, 3.0])
        >>> compare_results([a], [a + 0.1])
        {'snr': [26.69], 'mse': [0.01], 'cosine_similarity': [1.0]}
    """
    if plot and plot_path is None:
        raise UsageError("plot=True needs plot_path\nPass plot_path='metrics.png' (numdiff never opens a window).")
    raw = program_output_metrics(reference_output, run_output, metrics)
    results = {name: [None if v is None else round(v, 2) for v in values] for name, values in raw.items()}
    if plot_path is not None:
        _plot(results, plot_path)
    return results


def _plot(results: dict[str, list[float | None]], path: str | os.PathLike[str]) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise MissingDependencyError("plotting", "matplotlib", "plot") from e
    figure = Figure(figsize=(8, 3 * max(1, len(results))))
    axes = figure.subplots(max(1, len(results)), 1, squeeze=False)[:, 0]
    for ax, (name, values) in zip(axes, results.items()):
        heights = [v if v is not None and math.isfinite(v) else 0.0 for v in values]
        bars = ax.bar(range(len(values)), heights, width=0.5)
        for bar, value in zip(bars, values):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), str(value), ha="center", va="bottom")
        ax.set_xticks(range(len(values)))
        ax.set_xlabel("Output value index")
        ax.set_ylabel(name)
        ax.set_title(f"Metric {name}")
        ax.grid(True, which="major", axis="y")
        if name == "cosine_similarity":
            ax.set_ylim(-1.0 if min(heights, default=0.0) < 0 else 0.0, 1.0)
    figure.tight_layout()
    figure.savefig(os.fspath(path))
