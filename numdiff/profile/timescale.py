"""Time units of profiling data and conversion between them."""

from __future__ import annotations

from enum import Enum

from numdiff.errors import UsageError

__all__ = ["TimeScale", "time_scale_factor"]


class TimeScale(Enum):
    """Unit of the runtime's timestamps (source) or of the reported durations (target)."""

    NS = "ns"
    US = "us"
    MS = "ms"
    S = "s"
    CYCLES = "cycles"

    @classmethod
    def parse(cls, value: TimeScale | str) -> TimeScale:
        """``value`` as a TimeScale; strings are matched case-insensitively ("ms", "MS")."""
        if isinstance(value, TimeScale):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError as e:
            raise UsageError(
                f"unknown time scale {value!r}\nValid choices: {', '.join(t.value for t in cls)}."
            ) from e


_TICKS_PER_SECOND = {TimeScale.NS: 1e9, TimeScale.US: 1e6, TimeScale.MS: 1e3, TimeScale.S: 1.0, TimeScale.CYCLES: 1.0}


def time_scale_factor(source: TimeScale, target: TimeScale) -> float:
    """How many ``source`` ticks make one ``target`` unit (durations are divided by this).

    Cycles cannot be converted to or from time: both scales must be cycles, or neither.

    Raises:
        UsageError: Exactly one of the scales is ``CYCLES``.
    """
    if (source == TimeScale.CYCLES) != (target == TimeScale.CYCLES):
        raise UsageError(
            f"cannot convert {source.value} to {target.value}: cycles have no fixed duration\n"
            "Use cycles for both source_time_scale and target_time_scale, or for neither."
        )
    return _TICKS_PER_SECOND[source] / _TICKS_PER_SECOND[target]
