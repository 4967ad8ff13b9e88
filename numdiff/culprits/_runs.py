"""Per-run figures: when the runs of one method saw different inputs, replay each run.

Each run's logged values are replayed as run 0's are; only the local error is meaningful per
run (the ETRecord holds one representative input, so the AOT run from the start exists for one
input only). Rows whose inputs include a graph input (the runtime does not log those) get no
per-run figure, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from numdiff.align import EventLike
from numdiff.culprits.report import CulpritReport, RunFigures
from numdiff.profile.events import logged_runs

if TYPE_CHECKING:
    from numdiff._core.types import ProgramOutput
    from numdiff.profile.perf import PerfData

__all__ = ["EventInRun", "RunEvent", "figures", "in_run", "per_run_figures", "run_count"]


class RunEvent(EventLike, Protocol):
    """An Inspector event with its per-run values (numdiff's ``Event``)."""

    @property
    def perf_data(self) -> PerfData | None: ...
    def debug_data_for_run(self, run: int) -> ProgramOutput: ...


class EventInRun:
    """One event as one run saw it: the event's own fields, and that run's logged values as
    ``debug_data`` (read when asked for, as the event reads its own)."""

    __slots__ = ("_event", "_run")

    def __init__(self, event: RunEvent, run: int) -> None:
        self._event, self._run = event, run

    @property
    def name(self) -> str:
        return self._event.name

    @property
    def op_types(self) -> Sequence[str] | None:
        return self._event.op_types

    @property
    def debug_handles(self) -> int | Sequence[int] | None:
        return self._event.debug_handles

    @property
    def _instruction_id(self) -> int | None:
        return self._event._instruction_id

    @property
    def num_outputs(self) -> int:
        return self._event.num_outputs

    @property
    def is_delegated_op(self) -> bool | None:
        return self._event.is_delegated_op

    @property
    def delegate_backend_name(self) -> str | None:
        return self._event.delegate_backend_name

    @property
    def perf_data(self) -> PerfData | None:
        return self._event.perf_data

    @property
    def debug_data(self) -> ProgramOutput:
        return self._event.debug_data_for_run(self._run)


def in_run(events: Sequence[RunEvent], run: int) -> list[EventLike]:
    """``events`` as the ``run``-th run saw them."""
    return [EventInRun(ev, run) for ev in events]


def run_count(events: Sequence[RunEvent]) -> int:
    """How many runs logged their own values (1 when every run logged the same)."""
    return max((logged_runs(ev) for ev in events), default=1)


def per_run_figures(events: Sequence[RunEvent], runs: int, first: CulpritReport,
                    analyse: Callable[[list[EventLike]], CulpritReport]) -> tuple[RunFigures, ...]:
    """:class:`RunFigures` for every run (run 0 from ``first``, the others replayed with ``analyse``)."""
    out = [figures(0, first, first)]
    for run in range(1, runs):
        report = analyse(in_run(events, run))
        out.append(figures(run, report, first))
    return tuple(out)


def figures(run: int, report: CulpritReport, first: CulpritReport) -> RunFigures:
    """One run's :class:`RunFigures`: local figures only for rows whose inputs all came from the runtime."""
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
