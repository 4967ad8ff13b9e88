"""Per-run figures: when the runs of one method saw different inputs, replay each run.

Each run's logged values are replayed as run 0's are; only the local error is meaningful per
run (the ETRecord holds one representative input, so the AOT run from the start exists for one
input only). Rows whose inputs include a graph input (the runtime does not log those) get no
per-run figure, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from numdiff.align import EventLike
from numdiff.culprits.report import CulpritReport, RunFigures

__all__ = ["per_run_figures", "run_count"]


class _RunView:
    """An event seen through one run: ``debug_data`` is that run's values."""

    def __init__(self, event: Any, run: int) -> None:
        self._event, self._run = event, run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._event, name)

    @property
    def debug_data(self) -> Any:
        return self._event.debug_data_for_run(self._run)


def run_count(events: Sequence[Any]) -> int:
    """How many runs logged their own values (1 when every run logged the same)."""
    return max((len(getattr(ev, "_run_debug_data", None) or ()) for ev in events), default=1) or 1


def per_run_figures(events: Sequence[Any], runs: int, first: CulpritReport,
                    analyse: Callable[[list[EventLike]], CulpritReport]) -> tuple[RunFigures, ...]:
    """:class:`RunFigures` for every run (run 0 from ``first``, the others replayed with ``analyse``)."""
    out = [_figures(0, first, first)]
    for run in range(1, runs):
        report = analyse([cast(EventLike, _RunView(ev, run)) for ev in events])
        out.append(_figures(run, report, first))
    return tuple(out)


def _figures(run: int, report: CulpritReport, first: CulpritReport) -> RunFigures:
    local, units, culprits = [], [], []
    for row in report.rows:
        if run > 0 and row.input_source != "runtime":
            local.append(math.nan)
            units.append(math.nan)
            continue
        local.append(row.local_gap)
        units.append(row.local_noise_units)
        if row.is_culprit:
            culprits.append(row.index)
    note = None
    if len(report.rows) != len(first.rows):
        note = f"run {run} aligned {len(report.rows)} pairs, run 0 {len(first.rows)}"
    elif run > 0:
        skipped = sum(1 for r in report.rows if r.input_source != "runtime")
        if skipped:
            note = (f"{skipped} row(s) consume graph inputs, which the runtime does not log: no figure "
                    "(the ETRecord's representative input is run 0's at best)")
    return RunFigures(run, tuple(local), tuple(units), tuple(culprits), note)
