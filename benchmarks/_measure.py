"""Measure one side (numdiff or the ExecuTorch oracle) on one case, in this fresh process.

Dev-only helper of ``benchmarks/run.py``: it runs under numdiff's interpreter or the oracle's,
so it imports only the standard library at the top::

    PYTHON benchmarks/_measure.py {numdiff,oracle} {profiling,gap} CASE_DIR {time,time-torch,summary,profile}

Modes:
    time: import time, ``Inspector(...)`` build time (wall and CPU), for ``profiling`` also the time
        of a loop reading every event's ``name``, ``perf_data`` and ``op_types``, for ``gap`` also
        ``calculate_numeric_gap("SNR")`` time; cold figures (import included); then peak RSS (``ru_maxrss``) *before* anything
        else runs, then a small digest of the gap rows for the correctness check.
    time-torch: as ``time``, but ``import torch`` happens with the import, before the timer (the
        oracle's ``from executorch.devtools import Inspector`` always imports torch).
    summary: the facts both sides must agree on (blocks, event counts, a few events' perf values).
    profile: cProfile of what ``time`` times (``Inspector(...)``, plus the gap for ``gap``),
        top functions by cumulative and by own time.

The answer is the last stdout line, prefixed with ``@@RESULT `` (libraries print to stdout too).
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

MARK = "@@RESULT "
SAMPLE_EVENTS = (0, 1, 2, 3, 500, 1000, 1999, -1)


def _import_inspector(side: str, torch_first: bool = False) -> Any:
    if torch_first:
        import torch  # noqa: F401
    if side == "numdiff":
        from numdiff.inspector import Inspector
    else:
        from executorch.devtools import Inspector
    return Inspector


def _kwargs(case: str, case_dir: Path) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "etdump_path": str(case_dir / "etdump.etdp"),
        "etrecord": str(case_dir / "etrecord.bin"),
    }
    buffer = case_dir / "debug_buffer.bin"
    if case == "gap":
        kwargs["debug_buffer_path"] = str(buffer)
    return kwargs


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _number(x: Any) -> Any:
    x = float(x)
    return x if math.isfinite(x) else repr(x)


def _gap_digest(frame: Any) -> dict[str, Any]:
    gaps = [_number(g[0] if isinstance(g, (list, tuple)) else g) for g in frame["gap"]]
    return {"rows": len(frame), "columns": list(frame.columns), "gaps": gaps}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime  # all threads


def measure_time(side: str, case: str, case_dir: Path, torch_first: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    inspector_cls = _import_inspector(side, torch_first)
    c1, t1 = _cpu_s(), time.perf_counter()
    inspector = inspector_cls(**_kwargs(case, case_dir))
    c2, t2 = _cpu_s(), time.perf_counter()
    result: dict[str, Any] = {"import_s": t1 - t0, "build_s": t2 - t1, "build_cpu_s": c2 - c1,
                              "cold_build_s": t2 - t0}
    if case == "profiling":
        # What the seeds' own examples do: walk every event reading its name, perf data and op types.
        touched = 0
        for block in inspector.event_blocks:
            for event in block.events:
                _ = (event.name, event.perf_data, event.op_types)
                touched += 1
        c3, t3 = _cpu_s(), time.perf_counter()
        result["touch_s"] = t3 - t2
        result["build_touched_s"] = t3 - t1
        result["events_touched"] = touched
    if case == "gap":
        frame = inspector.calculate_numeric_gap("SNR")
        c3, t3 = _cpu_s(), time.perf_counter()
        result["gap_s"] = t3 - t2
        result["end_to_end_s"] = t3 - t1
        result["end_to_end_cpu_s"] = c3 - c1
        result["cold_end_to_end_s"] = t3 - t0
    result["peak_mib"] = _peak_mib()
    result["load_avg"] = os.getloadavg()[0]
    if case == "gap":
        result["digest"] = _gap_digest(frame)
    return result


def _handles(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_handles(v) for v in value]
    return value


def summary(side: str, case: str, case_dir: Path) -> dict[str, Any]:
    inspector = _import_inspector(side)(**_kwargs(case, case_dir))
    blocks = []
    for block in inspector.event_blocks:
        events = block.events
        samples = []
        for index in SAMPLE_EVENTS:
            if not -len(events) <= index < len(events):
                continue
            ev = events[index]
            perf = ev.perf_data
            samples.append({
                "index": index,
                "name": ev.name,
                "op_types": list(ev.op_types or []),
                "debug_handles": _handles(ev.debug_handles),
                "raw": None if perf is None else [float(v) for v in perf.raw[:5]],
                "avg": None if perf is None else float(perf.avg),
                "p50": None if perf is None else float(perf.p50),
                "count": None if perf is None else len(perf.raw),
            })
        blocks.append({"name": block.name, "events": len(events), "samples": samples})
    return {"blocks": blocks, "dataframe_rows": len(inspector.to_dataframe())}


def profile(side: str, case: str, case_dir: Path, top: int = 15) -> dict[str, Any]:
    import cProfile
    import pstats

    inspector_cls = _import_inspector(side)
    kwargs = _kwargs(case, case_dir)
    profiler = cProfile.Profile()
    profiler.enable()
    inspector = inspector_cls(**kwargs)
    if case == "gap":
        inspector.calculate_numeric_gap("SNR")
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    tottime = io.StringIO()
    pstats.Stats(profiler, stream=tottime).sort_stats("tottime").print_stats(top)
    return {"cumulative": _trim(out.getvalue()), "tottime": _trim(tottime.getvalue())}


def _trim(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    head = [line for line in lines[:start] if "function calls" in line]
    return "\n".join(head + lines[start:]).rstrip() + "\n"


def measure_time_torch_first(side: str, case: str, case_dir: Path) -> dict[str, Any]:
    return measure_time(side, case, case_dir, torch_first=True)


MODES = {"time": measure_time, "time-torch": measure_time_torch_first, "summary": summary, "profile": profile}


def main(argv: list[str]) -> int:
    side, case, case_dir, mode = argv[1], argv[2], Path(argv[3]), argv[4]
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    result = MODES[mode](side, case, case_dir)
    sys.stdout.flush()
    print(MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
