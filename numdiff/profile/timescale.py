"""Time units of profiling data (defined once in :mod:`numdiff._core.time_units`; this is their public path)."""

from __future__ import annotations

from numdiff._core.time_units import TimeScale, time_scale_factor

__all__ = ["TimeScale", "time_scale_factor"]
