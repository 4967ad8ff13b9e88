"""Scaling benchmarks (issue 13): profile load vs event count, streamed debug buffer vs its size.

```sh
.venv/bin/python benchmarks/scaling.py [--events 10000,...] [--buffers-mib 100,...] [--oracle-cap 120]
```

* **Events** 10k → 2M (``_scaling_generate.events_dump``: 100 runs of n/100 ops): ``Inspector()``
  and ``Inspector()`` + ``to_dataframe()``, wall time and peak RSS, each in a fresh process; the
  same for ExecuTorch 1.5.1's Inspector where it finishes within ``--oracle-cap`` seconds.
  "MiB per M events" is (peak RSS - RSS after import) per million events.
* **Debug buffer** 100 MiB → 4 GiB (``_scaling_generate.debug_dump``: float32 intermediates of at
  most 64 MiB in a sparse memory-mapped file): ``Inspector(debug_buffer_path=...)``, then every
  logged intermediate compared, one op at a time, with a reference tensor of its size (SNR in float32),
  its pages released after scoring (``DebugBuffer.release``, as ``calculate_numeric_gap`` does).
  The bound to meet: peak RSS below the RSS after import + a small multiple of the largest
  intermediate.

Prints the tables and writes ``benchmarks/scaling.png``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _scaling_generate import CACHE, debug_dump, events_dump  # noqa: E402

ORACLE = Path.home() / ".cache" / "numdiff-oracle" / "bin" / "python"
MIB = 2**20

_EVENTS_CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
{import_line}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
insp = Inspector(etdump_path=sys.argv[1])
t1 = time.perf_counter() - t
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rows = len(insp.to_dataframe())
t2 = time.perf_counter() - t
print(json.dumps({{"inspector_s": t1, "frame_s": t2, "rows": rows, "base_mib": base, "rss_inspector_mib": rss1,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

_DEBUG_CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import torch
from numdiff import Inspector
from numdiff.comparators import signal_to_noise_ratio
torch.set_num_threads(1)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
insp = Inspector(etdump_path=sys.argv[1], debug_buffer_path=sys.argv[2])
t1 = time.perf_counter() - t
buffer, compared, total = insp._debug_buffer, 0, 0.0
for block in insp.event_blocks:
    for ev in block.events:
        for runtime in ev.debug_data:
            if isinstance(runtime, torch.Tensor):
                reference = runtime * 1.0001  # stands in for the AOT intermediate of this op
                total += signal_to_noise_ratio(reference, runtime)
                compared += runtime.numel() * runtime.element_size()
                del reference
                buffer.release(runtime)
print(json.dumps({"inspector_s": t1, "total_s": time.perf_counter() - t, "compared_bytes": compared,
                  "base_mib": base, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _child(python: Path | str, code: str, args: list[str], cap: float) -> dict[str, Any] | None:
    try:
        done = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, timeout=cap,
                              check=False, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(f"measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _events(counts: list[int], cap: float, oracle: Path | None) -> list[dict[str, Any]]:
    rows = []
    oracle_gave_up = False
    for n in counts:
        path = events_dump(n)
        mine = _child(sys.executable, _EVENTS_CHILD.format(import_line="from numdiff import Inspector"), [str(path)], 3600)
        assert mine is not None
        theirs = None
        if oracle is not None and not oracle_gave_up:
            theirs = _child(oracle, _EVENTS_CHILD.format(import_line="from executorch.devtools import Inspector"),
                            [str(path)], cap)
            oracle_gave_up = theirs is None
            if theirs is not None and theirs["rows"] != mine["rows"]:
                raise RuntimeError(f"{n} events: numdiff has {mine['rows']} rows, the oracle {theirs['rows']}")
        rows.append({"events": n, "mib_file": path.stat().st_size / MIB, "numdiff": mine, "oracle": theirs})
        _print_event_row(rows[-1], cap)
    return rows


def _print_event_row(r: dict[str, Any], cap: float) -> None:
    m, o = r["numdiff"], r["oracle"]
    per_m = (m["rss_mib"] - m["base_mib"]) / (r["events"] / 1e6)
    oracle = (f"{o['inspector_s']:.2f} | {o['rss_mib']:.0f} | {o['inspector_s'] / m['inspector_s']:.0f}×"
              if o else f"> {cap:.0f} s cap | - | -")
    print(f"| {r['events']:,} | {r['mib_file']:.0f} | {m['inspector_s']:.3f} | {m['frame_s']:.3f} | "
          f"{m['rss_mib']:.0f} | {per_m:.0f} | {oracle} |", flush=True)


def _buffers(sizes_mib: list[int]) -> list[dict[str, Any]]:
    rows = []
    for mib in sizes_mib:
        etdump, buffer, largest = debug_dump(mib * MIB)
        m = _child(sys.executable, _DEBUG_CHILD, [str(etdump), str(buffer)], 3600)
        assert m is not None
        rows.append({"buffer_mib": buffer.stat().st_size / MIB, "largest_mib": largest / MIB, "numdiff": m})
        growth = m["rss_mib"] - m["base_mib"]
        print(f"| {rows[-1]['buffer_mib']:.0f} | {largest / MIB:.0f} | {m['inspector_s']:.2f} | {m['total_s']:.2f} | "
              f"{m['compared_bytes'] / MIB:.0f} | {m['rss_mib']:.0f} | {growth:.0f} | {growth / (largest / MIB):.1f} |",
              flush=True)
    return rows


def _plot(events: list[dict[str, Any]], buffers: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    n = [r["events"] for r in events]
    a.loglog(n, [r["numdiff"]["inspector_s"] for r in events], "o-", label="numdiff Inspector()")
    a.loglog(n, [r["numdiff"]["frame_s"] for r in events], "s-", label="numdiff + to_dataframe()")
    done = [r for r in events if r["oracle"]]
    if done:
        a.loglog([r["events"] for r in done], [r["oracle"]["inspector_s"] for r in done], "^-", label="ExecuTorch 1.5.1")
    a.set_xlabel("events"), a.set_ylabel("seconds"), a.set_title("Profile load time"), a.legend()
    size = [r["buffer_mib"] for r in buffers]
    b.plot(size, [r["numdiff"]["rss_mib"] for r in buffers], "o-", label="numdiff peak RSS")
    b.plot(size, size, ":", label="buffer size")
    b.set_xlabel("debug buffer MiB"), b.set_ylabel("MiB"), b.set_title("Streamed comparison: peak RSS"), b.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", default="10000,200000,500000,1000000,2000000")
    p.add_argument("--buffers-mib", default="100,500,1000,2000,4096")
    p.add_argument("--oracle-cap", type=float, default=120.0, help="seconds before the oracle's run is abandoned")
    p.add_argument("--no-oracle", action="store_true")
    p.add_argument("--json", type=Path, default=CACHE / "scaling.json", help="every figure, as JSON (default: in the cache)")
    a = p.parse_args()
    oracle = None if a.no_oracle or not ORACLE.exists() else ORACLE
    started = time.time()
    print("| events | file MiB | numdiff Inspector() s | + to_dataframe() s | numdiff peak MiB | MiB per M events "
          "| oracle s | oracle peak MiB | speed-up |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    events = _events([int(x) for x in a.events.split(",")], a.oracle_cap, oracle)
    print("\n| buffer MiB | largest intermediate MiB | Inspector() s | + compare all s | compared MiB | peak RSS MiB "
          "| growth over import MiB | growth / largest |\n|---|---|---|---|---|---|---|---|", flush=True)
    buffers = _buffers([int(x) for x in a.buffers_mib.split(",")])
    a.json.write_text(json.dumps({"events": events, "buffers": buffers}, indent=1))
    _plot(events, buffers, HERE / "scaling.png")
    print(f"\nwrote {HERE / 'scaling.png'} and {a.json} in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
