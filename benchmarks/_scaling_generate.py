"""Synthetic artifacts for ``benchmarks/scaling.py`` (written with numdiff's own ETDump writer).

* ``events_dump(n)``: an ETDump of ``n`` profile events, 100 runs of ``n / 100`` ops (the shape of
  ``run.py``'s profiling case: every run executes the same ops, so the runs merge into one block).
* ``_gap_generate.streaming_case`` (its own module) makes the streaming-gap case.

Files are cached under ``~/.cache/numdiff-bench/scaling`` (``NUMDIFF_BENCH_CACHE``); nothing is
written into the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from numdiff.schema.etdump import ETDumpDoc, Event, ProfileEvent, RunDoc
from numdiff.schema.etdump.writer import write_etdump

CACHE = Path(os.environ.get("NUMDIFF_BENCH_CACHE", Path.home() / ".cache" / "numdiff-bench")) / "scaling"
RUNS = 100
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


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
