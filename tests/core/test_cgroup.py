"""numdiff._core.cgroup: the memory and CPU a process's cgroup allows, read from fake cgroup trees."""

from __future__ import annotations

from pathlib import Path

from numdiff._core.cgroup import cpu_limit, memory_headroom


def _tree(tmp_path: Path, files: dict[str, str], proc: str) -> tuple[str, str]:
    for name, text in files.items():
        (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / name).write_text(text)
    (tmp_path / "cgroup").write_text(proc)
    return str(tmp_path / "cgroup"), str(tmp_path / "fs")


def test_v2_limits(tmp_path: Path) -> None:
    args = _tree(tmp_path, {"svc/memory.max": "1073741824\n", "svc/memory.current": "268435456\n",
                            "svc/cpu.max": "150000 100000\n"}, "0::/svc\n")
    assert memory_headroom(*args) == 768 << 20
    assert cpu_limit(*args) == 1.5


def test_v2_without_limits(tmp_path: Path) -> None:
    args = _tree(tmp_path, {"svc/memory.max": "max\n", "svc/memory.current": "1\n", "svc/cpu.max": "max 100000\n"},
                 "0::/svc\n")
    assert memory_headroom(*args) is None and cpu_limit(*args) is None


def test_v1_limits_in_combined_hierarchies(tmp_path: Path) -> None:
    args = _tree(tmp_path, {"memory/job/memory.limit_in_bytes": str(512 << 20),
                            "memory/job/memory.usage_in_bytes": str(600 << 20),
                            "cpu,cpuacct/job/cpu.cfs_quota_us": "50000", "cpu,cpuacct/job/cpu.cfs_period_us": "100000"},
                 "12:cpu,cpuacct:/job\n4:memory:/job\n")
    assert memory_headroom(*args) == 0  # over its limit: nothing to spare
    assert cpu_limit(*args) == 0.5


def test_v1_without_limits(tmp_path: Path) -> None:
    args = _tree(tmp_path, {"memory/job/memory.limit_in_bytes": str(1 << 62), "memory/job/memory.usage_in_bytes": "1",
                            "cpu/job/cpu.cfs_quota_us": "-1", "cpu/job/cpu.cfs_period_us": "100000"},
                 "4:memory:/job\n3:cpu:/job\n")
    assert memory_headroom(*args) is None and cpu_limit(*args) is None


def test_nothing_to_read(tmp_path: Path) -> None:
    assert memory_headroom(str(tmp_path / "missing")) is None and cpu_limit(str(tmp_path / "missing")) is None
    args = _tree(tmp_path, {}, "0::/gone\n")
    assert memory_headroom(*args) is None and cpu_limit(*args) is None
