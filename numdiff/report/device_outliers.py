"""Device against device: per op, the group (device) whose op departs from every other group's.

A view over cells of op × group, each with its runs, the runs where the op diverges and the median
SNR against the reference: the fleet summary's (:mod:`numdiff.batch.fleet`) and the service's compare
page (one run per device). Two groups *disagree* on an op when the op diverges in at least half of one group's runs and
in none of the other's, or when their median SNRs (against the reference) are at least
:data:`OUTLIER_DB` apart, counting every SNR above :data:`SNR_CAP_DB` as that cap (an exact op and a
143 dB one agree). A group is the op's **outlier** when it disagrees with every other group that ran
the op while those all agree with each other. The device × device matrix counts, for each pair, the
ops they disagree on.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["OUTLIER_DB", "SNR_CAP_DB", "CellLike", "OpCell", "Outlier", "disagree", "outliers", "pair_matrix"]

#: Median SNRs this far apart (dB) disagree: 6 dB is a factor of 2 in the error's amplitude.
OUTLIER_DB = 6.0
#: SNRs above this count as this much (float32 rounding of an exact op lands anywhere above it).
SNR_CAP_DB = 100.0


class CellLike(Protocol):
    """One op on one group of runs (``numdiff.batch.fleet.Cell``)."""

    @property
    def runs(self) -> int: ...
    @property
    def diverging(self) -> int: ...
    @property
    def snr_median_db(self) -> float | None: ...


Cells = Mapping[tuple[str, str], CellLike]


@dataclass(frozen=True, slots=True)
class OpCell:
    """A :class:`CellLike` for views that hold one run per group (the service's compare page)."""

    runs: int
    diverging: int
    snr_median_db: float | None


def _share(cell: CellLike) -> float:
    return cell.diverging / cell.runs if cell.runs else 0.0


@dataclass(frozen=True, slots=True)
class Outlier:
    """The group whose op departs from every other group's.

    Attributes:
        op: The op (AOT op names, as in the fleet tables).
        group: The outlying group (a device).
        reason: What sets it apart, in words.
    """

    op: str
    group: str
    reason: str


def _snr(cell: CellLike) -> float | None:
    if cell.snr_median_db is None or math.isnan(cell.snr_median_db):
        return None
    return min(cell.snr_median_db, SNR_CAP_DB)


def disagree(a: CellLike, b: CellLike) -> bool:
    """Whether two groups' cells of one op disagree (see the module docstring)."""
    if (_share(a) >= 0.5 and b.diverging == 0) or (_share(b) >= 0.5 and a.diverging == 0):
        return True
    sa, sb = _snr(a), _snr(b)
    return sa is not None and sb is not None and abs(sa - sb) >= OUTLIER_DB


def _reason(op_cells: dict[str, CellLike], group: str, by: str) -> str:
    cell = op_cells[group]
    others = [c for g, c in op_cells.items() if g != group]
    if _share(cell) >= 0.5 and all(c.diverging == 0 for c in others):
        return f"diverges in {cell.diverging}/{cell.runs} runs, on no other {by}"
    snrs = [s for c in others if (s := _snr(c)) is not None]
    mine = _snr(cell)
    if mine is not None and snrs:
        low, high = min(snrs), max(snrs)
        span = f"{low:.3g} dB" if low == high else f"{low:.3g} to {high:.3g} dB"
        capped = " (capped)" if high >= SNR_CAP_DB else ""
        return f"median SNR {mine:.3g} dB, the others {span}{capped}"
    return f"disagrees with every other {by}"


def outliers(ops: Sequence[str], groups: Sequence[str], cells: Cells, by: str = "device") -> list[Outlier]:
    """Per op (in the order given), the outlying group, if one group alone departs (``by`` names the
    groups' label in the reasons)."""
    found: list[Outlier] = []
    for op in ops:
        op_cells = {g: c for g in groups if (c := cells.get((op, g))) is not None}
        if len(op_cells) < 3:  # with two groups there is no majority to depart from
            continue
        for group, cell in op_cells.items():
            others = {g: c for g, c in op_cells.items() if g != group}
            if all(disagree(cell, c) for c in others.values()) and \
                    not any(disagree(a, b) for a, b in itertools.combinations(others.values(), 2)):
                found.append(Outlier(op, group, _reason(op_cells, group, by)))
                break
    return found


def pair_matrix(ops: Sequence[str], groups: Sequence[str], cells: Cells) -> dict[tuple[str, str], list[str]]:
    """``{(group, other group): ops they disagree on}`` for every ordered pair of distinct groups."""
    out: dict[tuple[str, str], list[str]] = {(a, b): [] for a in groups for b in groups if a != b}
    for op in ops:
        for a, b in itertools.permutations(groups, 2):
            ca, cb = cells.get((op, a)), cells.get((op, b))
            if ca is not None and cb is not None and disagree(ca, cb):
                out[(a, b)].append(op)
    return out
