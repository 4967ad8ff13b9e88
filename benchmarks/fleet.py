#!/usr/bin/env python3
"""Runs-scaling benchmark of `numdiff batch`: 1 → 1,000 runs with 1 → N workers, on the pool and on local Ray.

  .venv/bin/python benchmarks/fleet.py                         # sizes 1,10,100,1000; workers 1,2; pool and ray
  .venv/bin/python benchmarks/fleet.py --sizes 1,10,100 --backends pool
  .venv/bin/python benchmarks/fleet.py --write-results         # also append the table to benchmarks/RESULTS.md

The fleet is made once by scripts/make_fleet.py (the planted_culprit example's ETRecord, varied
ETDumps and debug buffers, labels device/build/input_set) under --cache-dir. Each measurement runs
`run_batch` on the first N runs of the manifest into a fresh output folder, in a fresh process:
the time covers everything a user waits for (starting the pool or Ray, hashing, analysing profile +
gap + culprits, writing the saved analyses and the Parquet tables). Reported per row:

* throughput = runs / seconds; efficiency = throughput / (workers × throughput with 1 worker, same
  backend and size);
* marginal runs/s between this size and the previous one (start-up cost cancels out): the
  steady-state rate used for the cluster projection in the README;
* seconds per run inside a worker (wall, and CPU in brackets: the load-independent cost);
* peak RSS of the driver process, and the largest peak RSS a worker reported (``worker_peak_rss_mib``
  in runs.parquet).

Writes a plot (PNG) of throughput against runs to benchmarks/fleet.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _child(manifest: str, runs: int, backend: str, workers: int) -> None:
    sys.path.insert(0, str(REPO))
    from numdiff.batch import load_manifest, run_batch

    specs = load_manifest(manifest)[:runs]
    with tempfile.TemporaryDirectory(prefix="numdiff-fleet-bench-") as out:
        start = time.perf_counter()
        result = run_batch(specs, out, backend=backend, workers=workers)
        seconds = time.perf_counter() - start
        import pandas as pd

        table = pd.read_parquet(result.runs_path)
    print(json.dumps({
        "seconds": seconds, "ok": result.ok, "failed": result.failed,
        "driver_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_mib": float(table["worker_peak_rss_mib"].max()),
        "cpu_per_run": float(table["cpu_seconds"].mean()),
        "wall_per_run": float(table["seconds"].mean()),
    }))


def _measure(python: str, manifest: Path, runs: int, backend: str, workers: int) -> dict[str, Any]:
    done = subprocess.run([python, __file__, "--child", str(manifest), str(runs), backend, str(workers)],
                          capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"measurement failed ({backend}, {workers} workers, {runs} runs):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _fleet(cache: Path, size: int) -> Path:
    folder = cache / f"fleet-{size}"
    manifest = folder / "manifest.csv"
    if not manifest.is_file():
        sys.path.insert(0, str(REPO / "scripts"))
        from make_fleet import make_fleet  # type: ignore[import-not-found]

        print(f"making {size} runs in {folder} ...", file=sys.stderr, flush=True)
        make_fleet(folder, size, REPO / "numdiff/examples/planted_culprit")
    return manifest


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("| backend | workers | runs | seconds | runs/s | efficiency | marginal runs/s | worker s/run (CPU) "
            "| driver MiB | worker MiB |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        marginal = "-" if r["marginal"] is None else f"{r['marginal']:.1f}"
        lines.append(f"| {r['backend']} | {r['workers']} | {r['runs']} | {r['seconds']:.2f} | {r['rate']:.1f} | "
                     f"{r['efficiency']:.2f} | {marginal} | {r['wall_per_run']:.3f} ({r['cpu_per_run']:.3f}) | "
                     f"{r['driver_mib']:.0f} | {r['worker_mib']:.0f} |")
    return "\n".join(lines)


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for key in sorted({(r["backend"], r["workers"]) for r in rows}):
        mine = [r for r in rows if (r["backend"], r["workers"]) == key]
        ax.plot([r["runs"] for r in mine], [r["rate"] for r in mine], marker="o",
                label=f"{key[0]}, {key[1]} worker{'s' if key[1] > 1 else ''}")
    ax.set_xscale("log")
    ax.set_xlabel("runs in the batch")
    ax.set_ylabel("runs per second (incl. start-up)")
    ax.set_title("numdiff batch: throughput (profile + gap + culprits per run)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--backends", default="pool,ray")
    parser.add_argument("--cache-dir", type=Path, default=Path(os.environ.get(
        "NUMDIFF_BENCH_CACHE", Path.home() / ".cache" / "numdiff-bench")))
    parser.add_argument("--python", default=sys.executable, help="python that imports numdiff")
    parser.add_argument("--plot", type=Path, default=HERE / "fleet.png")
    parser.add_argument("--write-results", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    manifest = _fleet(args.cache_dir, max(sizes))
    rows: list[dict[str, Any]] = []
    for backend in backends:
        for w in workers:
            previous: dict[str, Any] | None = None
            for n in sizes:
                m = _measure(args.python, manifest, n, backend, w)
                if m["ok"] != n:
                    raise SystemExit(f"{backend}/{w}/{n}: only {m['ok']} of {n} runs analysed")
                base = next((r for r in rows if (r["backend"], r["workers"], r["runs"]) == (backend, 1, n)), None)
                rate = n / m["seconds"]
                gained = None if previous is None else m["seconds"] - previous["seconds"]
                marginal = None if gained is None or gained <= 0 else (n - previous["runs"]) / gained
                row = {"backend": backend, "workers": w, "runs": n, **m, "rate": rate, "marginal": marginal,
                       "efficiency": 1.0 if base is None else rate / (w * base["rate"])}
                rows.append(row)
                previous = row
                print(f"{backend:5} {w} workers {n:5} runs: {m['seconds']:7.2f} s  {rate:6.1f} runs/s  "
                      f"efficiency {row['efficiency']:.2f}", file=sys.stderr, flush=True)
    table = _table(rows)
    print(table)
    _plot(rows, args.plot)
    print(f"wrote {args.plot}", file=sys.stderr)
    if args.write_results:
        load = os.getloadavg()
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=REPO, check=False).stdout.strip()
        section = (
            "\n\n## Fleet: `numdiff batch` runs scaling (`benchmarks/fleet.py`)\n\n"
            "Each row: one fresh process running `run_batch` on the first N runs of a generated fleet "
            "(`scripts/make_fleet.py`: the planted_culprit example, 5 compared ops, 3 executions per ETDump; "
            "profile + gap + culprits per run) into an empty output folder; the time includes starting the "
            "pool or Ray. Marginal runs/s: (N − previous N) / (time − previous time), the steady-state rate. "
            f"Plot: `benchmarks/{args.plot.name}`.\n\n" + table + "\n\n"
            f"- Machine: {platform.platform()}; {os.cpu_count()} CPUs; load average at the end {list(round(x, 2) for x in load)}; "
            f"numdiff commit {commit}\n")
        with open(HERE / "RESULTS.md", "a", encoding="utf-8") as f:
            f.write(section)
        print("appended to benchmarks/RESULTS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
