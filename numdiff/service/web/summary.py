"""Each run's verdict at a glance for the run lists: culprit op or none, lowest SNR, total latency (the p50
of ``Method::execute``) and the change against the model's baseline run.

Read from the run's saved analysis (the file the compare page and the report already read), once per
analysis: a saved analysis never changes under its sha256, so its summary is kept in memory by that
digest (:data:`_CACHE_SIZE` of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from numdiff.errors import NumdiffError
from numdiff.report import Analysis
from numdiff.report.verdicts import RunSummary, run_summary
from numdiff.service import db
from numdiff.service.status import Status
from numdiff.service.store import Store

__all__ = ["RunRow", "run_rows"]

_CACHE_SIZE = 2048
#: The runs of one list that get a summary (newest first); older ones show their status only.
SUMMARISED = 200


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run of a list with its summary (None when not done or not readable) and its change against the baseline."""

    run: db.Run
    summary: RunSummary | None
    snr_change: float | None
    """Lowest SNR minus the baseline's (dB; negative is worse)."""
    latency_change: float | None
    """Latency against the baseline's, as a fraction (0.1 is 10 % slower)."""
    is_baseline: bool


@lru_cache(maxsize=_CACHE_SIZE)
def _summary(path: str) -> RunSummary | None:
    try:
        return run_summary(Analysis.load(path))
    except (NumdiffError, OSError, ValueError):
        return None  # an unreadable analysis: the list shows its status; the run's page tells why


def summary_of(store: Store, run: db.Run) -> RunSummary | None:
    """The run's summary once it is done, else None."""
    if run.status != Status.DONE or run.analysis_sha256 is None:
        return None
    return _summary(str(store.path(run.analysis_sha256)))


def run_rows(store: Store, runs: Sequence[db.Run], baseline: db.Run | None) -> list[RunRow]:
    """``runs`` (newest first) with their summaries and their change against ``baseline``."""
    base = summary_of(store, baseline) if baseline is not None else None
    rows = []
    for k, run in enumerate(runs):
        s = summary_of(store, run) if k < SUMMARISED else None
        is_baseline = baseline is not None and run.id == baseline.id
        snr_change = latency_change = None
        if s is not None and base is not None and not is_baseline:
            if s.worst_snr is not None and base.worst_snr is not None:
                snr_change = s.worst_snr - base.worst_snr
            if s.latency is not None and base.latency and s.time_unit == base.time_unit:
                latency_change = s.latency / base.latency - 1
        rows.append(RunRow(run=run, summary=s, snr_change=snr_change, latency_change=latency_change,
                           is_baseline=is_baseline))
    return rows
