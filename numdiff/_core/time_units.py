"""Time units of profiling data: the one table of their lengths, and conversions between them."""

from __future__ import annotations

from enum import Enum

from numdiff.errors import UsageError

__all__ = ["TICKS_PER_SECOND", "TimeScale", "seconds_per_unit", "time_scale_factor", "unit_factor"]


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


#: Units of each time scale in one second; cycles have no fixed duration and are not here. Every
#: conversion factor is one division of two of these (exact integers), so it is correctly rounded.
TICKS_PER_SECOND: dict[str, float] = {"ns": 1e9, "us": 1e6, "ms": 1e3, "s": 1.0}


def unit_factor(source: str | TimeScale, target: str | TimeScale) -> float | None:
    """How many ``target`` units one ``source`` unit makes (``"ns"`` to ``"us"``: 0.001); None for cycles
    or an unknown unit."""
    s = TICKS_PER_SECOND.get(source.value if isinstance(source, TimeScale) else str(source))
    t = TICKS_PER_SECOND.get(target.value if isinstance(target, TimeScale) else str(target))
    return None if s is None or t is None else t / s


def seconds_per_unit(unit: str | TimeScale) -> float | None:
    """Seconds in one ``unit`` ("ns", "us", "ms", "s"), or None for cycles and unknown units."""
    return unit_factor(unit, "s")


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
    return TICKS_PER_SECOND[source.value] / TICKS_PER_SECOND[target.value]
