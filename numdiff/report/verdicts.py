"""What a person reads about a row or a run, in the CLI's words: every view (report, web pages) says it this way.

* ``culprit``: the op's local error (replayed on the runtime's own inputs) is beyond its expected noise;
* ``inherited``: the row's error is beyond its noise floor, but the op itself is within noise: the error
  came from its inputs (``numdiff culprits`` says "its error is inherited").

:func:`run_summary` is a run's verdict at a glance (the web pages' run lists): its first culprit op or
none, its lowest SNR and its total latency (the p50 of ``Method::execute``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from numdiff.analysis.noise import noise_floor_db

if TYPE_CHECKING:
    from numdiff.analysis.models import Analysis
    from numdiff.analysis.records import CulpritRow, GapRowModel

__all__ = ["CULPRIT", "CULPRIT_MEANS", "INHERITED", "INHERITED_MEANS", "RunSummary", "cause", "lowest_snr",
           "run_summary", "total_p50"]

CULPRIT = "culprit"
INHERITED = "inherited"
CULPRIT_MEANS = "local error beyond its expected noise"
INHERITED_MEANS = "error beyond the noise floor that came from the op's inputs (the op itself is within noise)"

#: Verdicts that clear the op itself (numdiff.culprits Verdict OK and EXPECTED_NOISE).
_WITHIN_NOISE = ("ok", "expected-noise")
#: The event whose p50 is a run's total latency.
EXECUTE = "Method::execute"


def lowest_snr(values: list[float]) -> float | None:
    """The lowest SNR of a row's outputs (NaN left out), or None."""
    finite = [v for v in values if not math.isnan(v)]
    return min(finite) if finite else None


def cause(row: GapRowModel, culprit: CulpritRow | None) -> str | None:
    """``"culprit"``, ``"inherited"`` or None (no error worth a word, or no culprit analysis for the row)."""
    if culprit is None:
        return None
    if culprit.is_culprit:
        return CULPRIT
    floor, _ = noise_floor_db(row)
    snr = lowest_snr(row.snr)
    if culprit.verdict in _WITHIN_NOISE and floor is not None and snr is not None and snr < floor:
        return INHERITED
    return None


def total_p50(analysis: Analysis) -> float | None:
    """The p50 of ``Method::execute`` (summed over its blocks' events), or None when not profiled."""
    for block in analysis.profile.blocks:
        vals = [e.p50 for e in block.events if e.p50 is not None and e.name.startswith(EXECUTE)]
        if vals:
            return float(sum(vals))
    return None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run's verdict at a glance."""

    culprit: str | None
    """The first culprit in one short line (its ops, or its delegate call: CulpritRow.title), None when there is none."""
    culprits: int
    culprits_available: bool
    worst_snr: float | None
    """Over the gap rows that compare the device with the model on its inputs (None when none does)."""
    latency: float | None
    time_unit: str
    inputs_in_doubt: bool = False
    """The run may have used other graph inputs: its SNRs in doubt are left out of ``worst_snr``."""


def run_summary(analysis: Analysis) -> RunSummary:
    """The verdict of ``analysis`` at a glance."""
    found = [c for c in analysis.culprits.rows if c.is_culprit]
    from numdiff.analysis.doubt import rows_clear_of_doubt

    snrs = [s for r in rows_clear_of_doubt(analysis) for s in [lowest_snr(r.snr)] if s is not None]
    return RunSummary(culprit=found[0].title or "(unnamed op)" if found else None, culprits=len(found),
                      culprits_available=analysis.culprits.available, worst_snr=min(snrs) if snrs else None,
                      latency=total_p50(analysis), time_unit=analysis.profile.time_unit,
                      inputs_in_doubt=bool(analysis.culprits.inputs_in_doubt))
