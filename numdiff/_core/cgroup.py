"""What the process's cgroup allows: memory left under its limit, CPUs its quota buys.

Linux only; both read ``/proc/self/cgroup`` and the files of the process's own cgroup (v2, or v1's
``memory`` and ``cpu`` hierarchies) and answer None where there is no limit or nothing to read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["cpu_limit", "memory_headroom"]

_PROC = "/proc/self/cgroup"
_ROOT = "/sys/fs/cgroup"


def _folders(controller: str, proc_cgroup: str, root: str) -> Iterator[tuple[str, bool]]:
    """``(folder, is_v2)`` of the process's cgroups that may hold ``controller``'s files."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            yield root + path, True
        elif controller in controllers.split(","):
            yield f"{root}/{controllers}{path}", False


def _read(folder: str, name: str) -> str | None:
    try:
        with open(os.path.join(folder, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def memory_headroom(proc_cgroup: str = _PROC, root: str = _ROOT) -> int | None:
    """Bytes the process's memory cgroup still allows (limit less usage); None: no limit known."""
    for folder, v2 in _folders("memory", proc_cgroup, root):
        limit = _read(folder, "memory.max" if v2 else "memory.limit_in_bytes")
        usage = _read(folder, "memory.current" if v2 else "memory.usage_in_bytes")
        # v2 writes "max", v1 a huge number, for no limit
        if limit is not None and usage is not None and limit.isdigit() and usage.isdigit() and int(limit) < 1 << 60:
            return max(0, int(limit) - int(usage))
    return None


def cpu_limit(proc_cgroup: str = _PROC, root: str = _ROOT) -> float | None:
    """CPUs the process's cgroup quota buys (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / period); None: no quota."""
    for folder, v2 in _folders("cpu", proc_cgroup, root):
        if v2:
            quota, _, period = (_read(folder, "cpu.max") or "").partition(" ")
        else:
            quota, period = _read(folder, "cpu.cfs_quota_us") or "", _read(folder, "cpu.cfs_period_us") or ""
        if quota.isdigit() and period.isdigit() and int(period) > 0:
            return int(quota) / int(period)
    return None
