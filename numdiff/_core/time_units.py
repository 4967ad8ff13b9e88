"""Time units of profiling data: the one table of their lengths, and conversions between them."""

from __future__ import annotations

from enum import Enum

from numdiff.errors import UsageError

__all__ = ["SECONDS_PER_UNIT", "TimeScale", "seconds_per_unit", "time_scale_factor"]


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


#: Seconds in one unit of each time scale; cycles have no fixed duration and are not here.
SECONDS_PER_UNIT: dict[str, float] = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds_per_unit(unit: str | TimeScale) -> float | None:
    """Seconds in one ``unit`` ("ns", "us", "ms", "s"), or None for cycles and unknown units."""
    return SECONDS_PER_UNIT.get(unit.value if isinstance(unit, TimeScale) else str(unit))


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
    if source == target:
        return 1.0
    return SECONDS_PER_UNIT[target.value] / SECONDS_PER_UNIT[source.value]
