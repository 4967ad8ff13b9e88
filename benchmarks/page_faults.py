"""What fresh memory costs on this machine, and what numdiff's background heap prefault saves the gap.

Dev measurement for issue 21 item 2 (not part of ``run.py``)::

    .venv/bin/python benchmarks/page_faults.py micro [--repeat 7] [--mib 320]
    .venv/bin/python benchmarks/page_faults.py gap [--repeat 8] [--case-dir DIR] [--threads 0]

``micro``: cost per 4 KiB page of private anonymous memory (one process, variants interleaved,
each on a fresh mapping): first write to each page (one fault per page), ``MADV_POPULATE_WRITE``
over the range, ``mmap(MAP_POPULATE)``, ``MADV_HUGEPAGE`` then first writes (2 MiB pages; the
line says whether the kernel gave them), and rewriting memory that is already faulted in.

``gap``: ``Inspector()`` + ``calculate_numeric_gap("SNR")`` on ``run.py``'s gap case, each run in a
fresh process with torch imported before the timer, modes interleaved: ``off``
(``NUMDIFF_PREFAULT=0``) and ``on`` (numdiff's default: :mod:`numdiff._core.heap` faults the heap
memory the graph's outputs will take in on a second thread while the graph is built and run).
``--threads 0`` (the default) leaves the libraries' thread settings alone, as users run it; with
``--threads 1`` numdiff uses one thread and does not prefault, so both modes should match.
Each line gives the min and median of wall and CPU seconds, minor faults (the populate's
included) and those of the calling thread (which builds and runs the graph), peak RSS, and the load
average during the runs (compare modes of the same run only).

Measured on the 2-CPU dev VM (2026-11-28): ``micro`` at load 1.1-1.6, 320 MiB, median per 4 KiB
page: first write 2.22 us, ``MADV_POPULATE_WRITE`` 1.63 us, ``MAP_POPULATE`` 1.66 us, rewrite of
faulted memory 0.62 us; 2 MiB pages 0.63 us when the kernel has them free, 4.5-19 us when it must
compact first (2 of 5 and 4 of 5 runs in two samples); a later sample gave 3.10 us a page for a
first write. ``perf``: clear_page is 44 % of a populate and 47 % of a fault-by-fault touch, the
trap itself ~6 %: bulk faulting saves the trap, not the per-page work, so a prefault done in the
calling thread gained 0-9 % (a trial, not kept). Done on the second core instead, ``gap`` at the
default threads, 8 runs per mode, load 0.3-0.7: median wall 0.423 s off, 0.361 s on (0.85), the
same gap values, peak RSS 733 and 735 MiB; the calling thread took 29.8k page faults instead of
108.1k (an earlier run in a slower state of the VM: 0.635 s and 0.537 s).
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

PAGE = 4096
HUGE = 2 << 20
MADV_POPULATE_WRITE = 23  # Linux >= 5.14
MAP_POPULATE = 0x8000
PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS  # Python's default for -1 is MAP_SHARED (shmem)


def _anon_huge_kib() -> int:
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages"))


def micro(mib: int, repeat: int) -> None:
    import numpy as np

    size = mib << 20

    def touch(m: mmap.mmap, start: int = 0) -> None:
        a = np.frombuffer(m, dtype=np.uint8)
        a[start::PAGE] = 1
        del a

    def first_write() -> tuple[float, str]:
        m = mmap.mmap(-1, size, flags=PRIVATE)
        t = time.perf_counter()
        touch(m)
        d = time.perf_counter() - t
        m.close()
        return d, ""

    def populate_write() -> tuple[float, str]:
        m = mmap.mmap(-1, size, flags=PRIVATE)
        t = time.perf_counter()
        m.madvise(MADV_POPULATE_WRITE)
        d = time.perf_counter() - t
        m.close()
        return d, ""

    def map_populate() -> tuple[float, str]:
        t = time.perf_counter()
        m = mmap.mmap(-1, size, flags=PRIVATE | MAP_POPULATE)
        d = time.perf_counter() - t
        m.close()
        return d, ""

    def thp_first_write() -> tuple[float, str]:
        m = mmap.mmap(-1, size + HUGE, flags=PRIVATE)
        t = time.perf_counter()
        m.madvise(mmap.MADV_HUGEPAGE)
        touch(m)
        d = time.perf_counter() - t
        got = _anon_huge_kib() >> 10
        m.close()
        return d, f"{got} MiB in 2 MiB pages"

    def rewrite_faulted() -> tuple[float, str]:
        m = mmap.mmap(-1, size, flags=PRIVATE)
        m.madvise(MADV_POPULATE_WRITE)
        a = np.frombuffer(m, dtype=np.uint8)
        t = time.perf_counter()
        a[:] = 1  # every byte, as an op writing its output does
        d = time.perf_counter() - t
        del a
        m.close()
        return d, ""

    def first_write_every_byte() -> tuple[float, str]:
        m = mmap.mmap(-1, size, flags=PRIVATE)
        a = np.frombuffer(m, dtype=np.uint8)
        t = time.perf_counter()
        a[:] = 1
        d = time.perf_counter() - t
        del a
        m.close()
        return d, ""

    variants = [first_write, populate_write, map_populate, thp_first_write, rewrite_faulted, first_write_every_byte]
    times: dict[str, list[float]] = {v.__name__: [] for v in variants}
    notes: dict[str, list[str]] = {v.__name__: [] for v in variants}
    for _ in range(repeat):
        for v in variants:
            d, note = v()
            times[v.__name__].append(d)
            notes[v.__name__].append(note)
    pages = size // PAGE
    print(f"{mib} MiB of private anonymous memory, {repeat} runs each, interleaved")
    for name, ts in times.items():
        med, low = statistics.median(ts), min(ts)
        extra = f"  ({', '.join(sorted(set(notes[name])))})" if any(notes[name]) else ""
        print(f"  {name:24s} median {med * 1e3:7.1f} ms = {med / pages * 1e6:5.2f} us/page   min {low / pages * 1e6:5.2f}"
              f"   runs ms {[round(x * 1e3) for x in ts]}{extra}")
    print(f"  load average {os.getloadavg()}")


# --- the gap with numdiff's background prefault off and on -------------------------------------

_CHILD = r'''
import os, resource, sys, time
import torch
from numdiff.inspector import Inspector
case = sys.argv[1]

def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_minflt

c0, f0 = usage()
m0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt  # the thread that builds and runs the graph
t0 = time.perf_counter()
inspector = Inspector(etdump_path=f"{case}/etdump.etdp", etrecord=f"{case}/etrecord.bin",
                      debug_buffer_path=f"{case}/debug_buffer.bin")
frame = inspector.calculate_numeric_gap("SNR")
t1 = time.perf_counter()
c1, f1 = usage()
m1 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
gaps = [float(g[0]) for g in frame["gap"]]
print("@@", t1 - t0, c1 - c0, f1 - f0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10,
      os.getloadavg()[0], m1 - m0, hash(tuple(gaps)))
'''

def _default_case() -> Path:
    root = Path(os.environ.get("NUMDIFF_BENCH_CACHE", Path.home() / ".cache" / "numdiff-bench"))
    found = sorted(root.glob("artifacts-*/gap/debug_buffer.bin"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit(f"no gap case under {root}: run benchmarks/run.py once")
    return found[-1].parent


def _warm(case: Path) -> None:
    for path in sorted(case.iterdir()):
        with open(path, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


MODES = {"off": "0", "on": ""}  # NUMDIFF_PREFAULT per mode ("" = unset: numdiff's default)


def gap(case: Path, repeat: int, threads: int) -> None:
    env = dict(os.environ)
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    repo = Path(__file__).resolve().parent.parent
    runs: dict[str, list[tuple[float, ...]]] = {m: [] for m in MODES}
    answers: dict[str, set[str]] = {m: set() for m in MODES}
    for _ in range(repeat):
        for mode, value in MODES.items():
            _warm(case)
            child_env = dict(env, NUMDIFF_PREFAULT=value) if value else {k: v for k, v in env.items()
                                                                        if k != "NUMDIFF_PREFAULT"}
            done = subprocess.run([sys.executable, "-c", _CHILD, str(case)], env=child_env, cwd=repo,
                                  capture_output=True, text=True, check=False)
            line = next((ln for ln in done.stdout.splitlines() if ln.startswith("@@ ")), None)
            if line is None:
                raise SystemExit(f"{mode} failed: {done.stderr.strip()[-500:]}")
            *numbers, answer = line.split()[1:]
            runs[mode].append(tuple(float(x) for x in numbers))
            answers[mode].add(answer)
    loads = [r[4] for rs in runs.values() for r in rs]
    setting = f"{threads} intra-op thread(s)" if threads else "the libraries' default threads"
    print(f"gap case {case}, {setting}, {repeat} fresh processes per mode, interleaved; "
          "off = NUMDIFF_PREFAULT=0, on = numdiff's default")
    for mode, rs in runs.items():
        wall, cpu = [r[0] for r in rs], [r[1] for r in rs]
        print(f"  {mode:4s} wall min {min(wall):.3f} med {statistics.median(wall):.3f} s | cpu min {min(cpu):.3f} "
              f"med {statistics.median(cpu):.3f} s | minor faults {int(statistics.median(r[2] for r in rs))}, "
              f"{int(statistics.median(r[5] for r in rs))} in the calling thread | "
              f"peak RSS {int(max(r[3] for r in rs))} MiB | wall runs {[round(w, 3) for w in wall]}")
    off, on = (statistics.median(r[0] for r in runs[m]) for m in ("off", "on"))
    same = len(set().union(*answers.values())) == 1
    print(f"  on/off median wall: {on / off:.2f}; gap values {'identical in every run' if same else 'DIFFER between runs'}; "
          f"load average during the runs: min {min(loads):.2f} median {statistics.median(loads):.2f} max {max(loads):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("micro")
    m.add_argument("--repeat", type=int, default=7)
    m.add_argument("--mib", type=int, default=320)
    g = sub.add_parser("gap")
    g.add_argument("--repeat", type=int, default=8)
    g.add_argument("--case-dir", type=Path)
    g.add_argument("--threads", type=int, default=0, help="intra-op threads (default 0: the libraries' default)")
    args = parser.parse_args()
    if args.what == "micro":
        micro(args.mib, args.repeat)
    else:
        gap(args.case_dir or _default_case(), args.repeat, args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
