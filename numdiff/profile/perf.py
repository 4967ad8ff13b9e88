"""Summary statistics of one event's durations across runs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PerfData"]


@dataclass(frozen=True, slots=True)
class PerfData:
    """Durations of one event, one sample per run, in the Inspector's target time scale.

    Percentiles use numpy's linear interpolation, as the reference does. Two ``PerfData`` are
    equal when their samples are; like the reference's, they are unhashable. (The reference's
    dataclass has no fields, so there any two compare equal; numdiff compares the samples.)

    Example:
        >>> p = PerfData([1.0, 2.0, 3.0, 4.0])
        >>> float(p.p50), float(p.avg), p.min, p.max
        (2.5, 2.5, 1.0, 4.0)
    """

    raw: list[float]

    __hash__ = None  # type: ignore[assignment]  # a list of samples: unhashable, as the reference's

    @property
    def p10(self) -> float:
        return float(np.percentile(self.raw, 10))

    @property
    def p50(self) -> float:
        return float(np.percentile(self.raw, 50))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.raw, 90))

    @property
    def avg(self) -> float:
        return float(np.mean(self.raw))

    @property
    def min(self) -> float:
        return min(self.raw)

    @property
    def max(self) -> float:
        return max(self.raw)
