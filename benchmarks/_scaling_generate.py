"""Synthetic artifacts for ``benchmarks/scaling.py`` (written with numdiff's own ETDump writer).

* ``events_dump(n)``: an ETDump of ``n`` profile events, 100 runs of ``n / 100`` ops (the shape of
  ``run.py``'s profiling case: every run executes the same ops, so the runs merge into one block).
* ``debug_dump(total)``: an ETDump whose debug events log float32 tensors totalling ``total``
  bytes (at most 64 MiB each), and the debug buffer they point into. The buffer is written as a
  sparse file with a 1 MiB random pattern at the head of each tensor, so a 4 GiB buffer takes
  seconds to make and little disk.

Files are cached under ``~/.cache/numdiff-bench/scaling`` (``NUMDIFF_BENCH_CACHE``); nothing is
written into the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from numdiff.schema.etdump import DebugEvent, ETDumpDoc, Event, ProfileEvent, RunDoc, ScalarType, Tensor, Value, ValueType
from numdiff.schema.etdump_writer import write_etdump

CACHE = Path(os.environ.get("NUMDIFF_BENCH_CACHE", Path.home() / ".cache" / "numdiff-bench")) / "scaling"
RUNS = 100
MAX_TENSOR = 64 * 2**20
_NAMES = ("native_call_add.out", "native_call_relu.out", "OPERATOR_CALL", "native_call_mm.out")


def events_dump(n: int) -> Path:
    """Path of a cached ETDump with ``n`` profile events (``n`` a multiple of 100)."""
    path = CACHE / f"events-{n}.etdp"
    if path.exists():
        return path
    ops = max(1, n // RUNS)
    rng = np.random.default_rng(n)
    runs = []
    for _ in range(RUNS):
        starts = np.cumsum(rng.integers(1_000, 50_000, size=ops)).tolist()
        lengths = rng.integers(500, 900, size=ops).tolist()
        events = [Event(profile_event=ProfileEvent(_NAMES[i % 4], 0, i, -1, None, None, s, s + d))
                  for i, (s, d) in enumerate(zip(starts, lengths))]
        runs.append(RunDoc("Execute", events))
    _write(path, write_etdump(ETDumpDoc(0, runs)))
    return path


def debug_dump(total: int) -> tuple[Path, Path, int]:
    """Paths of a cached ETDump and debug buffer logging ``total`` bytes of tensors; largest tensor size."""
    each = min(MAX_TENSOR, total)
    count = max(1, -(-total // each))
    elements = each // 4
    etdump, buffer = CACHE / f"debug-{total}.etdp", CACHE / f"debug-{total}.bin"
    if not (etdump.exists() and buffer.exists()):
        events = []
        for i in range(count):
            tensor = Tensor(int(ScalarType.FLOAT), (elements,), (1,), i * each)
            value = Value(val=ValueType.TENSOR, tensor=tensor)
            events.append(Event(profile_event=ProfileEvent("native_call_add.out", 0, i, -1, None, None, 10 * i, 10 * i + 5)))
            events.append(Event(debug_event=DebugEvent(0, i, value, -1, None, None)))
        _write(etdump, write_etdump(ETDumpDoc(0, [RunDoc("Execute", events)])))
        pattern = np.random.default_rng(total).standard_normal(2**18).astype(np.float32).tobytes()  # 1 MiB
        tmp = buffer.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.truncate(count * each)
            for i in range(count):
                f.seek(i * each)
                f.write(pattern[: min(len(pattern), each)])
        tmp.replace(buffer)
    return etdump, buffer, each


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
