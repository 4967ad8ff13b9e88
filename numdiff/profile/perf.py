"""Summary statistics of one event's durations across runs."""

# No ``from __future__ import annotations``: ``PerfData.__init__`` keeps the dataclass signature the
# drop-in froze (a quoted parameter annotation, an unquoted ``None`` return).

import dataclasses

import numpy as np
import numpy.typing as npt

__all__ = ["PerfData"]


class PerfData:
    """Durations of one event, one sample per run, in the Inspector's target time scale.

    Percentiles use numpy's linear interpolation, as the reference does. Two ``PerfData`` are
    equal when their samples are; like the reference's, they are unhashable. (The reference's
    dataclass has no fields, so there any two compare equal; numdiff compares the samples.)
    Immutable. The Inspector's events keep their samples as a numpy row until ``raw`` (or a
    statistic) is first read, so walking every event of a large dump makes no Python floats.

    Example:
        >>> p = PerfData([1.0, 2.0, 3.0, 4.0])
        >>> float(p.p50), float(p.avg), p.min, p.max
        (2.5, 2.5, 1.0, 4.0)
    """

    __slots__ = ("raw", "_row")
    __hash__ = None  # type: ignore[assignment]  # a list of samples: unhashable, as the reference's

    raw: list[float]
    """The samples, one per run (Python floats)."""
    _row: npt.NDArray[np.float64] | None

    def __init__(self, raw: "list[float]") -> None:  # the dataclass's signature, as the reference's
        object.__setattr__(self, "raw", raw)
        object.__setattr__(self, "_row", None)

    @classmethod
    def _of_row(cls, row: npt.NDArray[np.float64]) -> "PerfData":
        """Samples held as a float64 numpy row; ``raw`` is made from it on first read."""
        perf = cls.__new__(cls)
        object.__setattr__(perf, "_row", row)
        return perf

    @classmethod
    def _of_rows(cls, rows: "npt.NDArray[np.float64]") -> "list[PerfData]":
        """``_of_row`` of each row of a matrix, in one call (the Inspector makes thousands at once)."""
        new, set_row = cls.__new__, cls.__dict__["_row"].__set__  # the slot's descriptor
        out = []
        for row in rows:
            perf = new(cls)
            set_row(perf, row)
            out.append(perf)
        return out

    def __getattr__(self, name: str) -> list[float]:
        # Only reached while the ``raw`` slot is still empty (an event read from a dump).
        row = object.__getattribute__(self, "_row") if name == "raw" else None
        if row is None:
            raise AttributeError(f"'PerfData' object has no attribute {name!r}")
        raw: list[float] = row.tolist()
        object.__setattr__(self, "raw", raw)
        object.__setattr__(self, "_row", None)
        return raw

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, PerfData)
        return self.raw == other.raw

    def __repr__(self) -> str:
        return f"PerfData(raw={self.raw!r})"

    def __reduce__(self) -> "tuple[type[PerfData], tuple[list[float]]]":
        return (PerfData, (self.raw,))

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
