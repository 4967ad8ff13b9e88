"""Scaling benchmarks (issue 13): profile load vs event count, streamed numerical gap vs debug-buffer size.

```sh
.venv/bin/python benchmarks/scaling.py [--events 10000,...] [--buffers-mib 100,...] [--oracle-cap 120]
```

* **Events** 10k → 2M (``_scaling_generate.events_dump``: 100 runs of n/100 ops): ``Inspector()``
  and ``Inspector()`` + ``to_dataframe()``, wall time and peak RSS, each in a fresh process; the
  same for ExecuTorch 1.5.1's Inspector where it finishes within ``--oracle-cap`` seconds.
  "MiB per M events" is (peak RSS - RSS after import) per million events.
* **Streaming gap** 256 MiB → 4 GiB of debug buffer (``_gap_generate.streaming_case``: a real
  ETRecord written by ExecuTorch 1.5.1, a chain of 64 elementwise ops on a 64 MiB vector, so its
  intermediates total 4 GiB; the ETDump and buffer log the first n ops' outputs):
  ``Inspector()`` + ``stream_numeric_gap("SNR")``, wall time and peak RSS in a fresh process; the
  same with ``calculate_numeric_gap("SNR")`` (numdiff and, where it finishes within
  ``--oracle-cap``, ExecuTorch 1.5.1), whose DataFrame holds every intermediate. The bound to meet:
  peak RSS below the RSS after import + the model's weights (none here; its 64 MiB input) + a
  small multiple of the largest intermediate (64 MiB).

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
from _scaling_generate import CACHE, events_dump  # noqa: E402

ORACLE = Path.home() / ".cache" / "numdiff-oracle" / "bin" / "python"
MIB = 2**20

_EVENTS_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
{import_line}
{peak}
base = peak_mib()
t = time.perf_counter()
insp = Inspector(etdump_path=sys.argv[1])
t1 = time.perf_counter() - t
rss1 = peak_mib()
rows = len(insp.to_dataframe())
t2 = time.perf_counter() - t
print(json.dumps({{"inspector_s": t1, "frame_s": t2, "rows": rows, "base_mib": base, "rss_inspector_mib": rss1,
                  "rss_mib": peak_mib()}}))
"""

#: Peak RSS of the child itself: VmHWM starts afresh at exec, while Linux carries ru_maxrss over
#: from the parent (which may have just generated a multi-GiB case).
_PEAK = r"""
def peak_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
"""

_GAP_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
torch.set_num_threads(1)
{import_line}
{peak}
base = peak_mib()
t = time.perf_counter()
insp = Inspector(etdump_path=sys.argv[1], etrecord=sys.argv[2], debug_buffer_path=sys.argv[3])
df = getattr(insp, sys.argv[4])("SNR")
gaps = [float(g[0]) for g in df["gap"]]
print(json.dumps({{"total_s": time.perf_counter() - t, "rows": len(df), "min_snr": min(gaps), "base_mib": base,
                  "rss_mib": peak_mib()}}))
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
        mine = _child(sys.executable, _EVENTS_CHILD.format(import_line="from numdiff import Inspector", peak=_PEAK), [str(path)], 3600)
        assert mine is not None
        theirs = None
        if oracle is not None and not oracle_gave_up:
            theirs = _child(oracle, _EVENTS_CHILD.format(import_line="from executorch.devtools import Inspector", peak=_PEAK),
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


def _gaps(sizes_mib: list[int], full_mib: int, cap: float, oracle: Path | None) -> list[dict[str, Any]]:
    from _gap_generate import streaming_case

    rows = []
    for mib in sizes_mib:
        etdump, record, buffer, largest = streaming_case(mib * MIB)
        files = [str(etdump), str(record), str(buffer)]
        mine = _child(sys.executable, _GAP_CHILD.format(import_line="from numdiff import Inspector", peak=_PEAK),
                      [*files, "stream_numeric_gap"], 3600)
        assert mine is not None
        full = theirs = None
        if mib <= full_mib:  # the DataFrame of calculate_numeric_gap holds every intermediate: small sizes only
            full = _child(sys.executable, _GAP_CHILD.format(import_line="from numdiff import Inspector", peak=_PEAK),
                          [*files, "calculate_numeric_gap"], 3600)
            if oracle is not None:
                theirs = _child(oracle, _GAP_CHILD.format(import_line="from executorch.devtools import Inspector", peak=_PEAK),
                                [*files, "calculate_numeric_gap"], cap)
        for other in (full, theirs):
            if other is not None and (other["rows"], round(other["min_snr"], 3)) != (mine["rows"], round(mine["min_snr"], 3)):
                raise RuntimeError(f"{mib} MiB: streamed {mine['rows']} rows / {mine['min_snr']} dB, other {other}")
        rows.append({"buffer_mib": buffer.stat().st_size / MIB, "largest_mib": largest / MIB, "numdiff": mine,
                     "calculate": full, "oracle": theirs})
        growth = mine["rss_mib"] - mine["base_mib"]

        def cell(r: dict[str, Any] | None) -> str:
            return "-" if r is None else f"{r['total_s']:.1f} s, {r['rss_mib']:.0f} MiB"

        print(f"| {rows[-1]['buffer_mib']:.0f} | {mine['rows']} | {mine['total_s']:.1f} | {mine['rss_mib']:.0f} | "
              f"{growth:.0f} | {growth / (largest / MIB):.1f} | {cell(full)} | {cell(theirs)} |", flush=True)
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
    b.plot(size, [r["numdiff"]["rss_mib"] for r in buffers], "o-", label="numdiff stream_numeric_gap")
    for key, label in (("calculate", "numdiff calculate_numeric_gap"), ("oracle", "ExecuTorch 1.5.1")):
        done = [r for r in buffers if r[key]]
        if done:
            b.plot([r["buffer_mib"] for r in done], [r[key]["rss_mib"] for r in done], "s--", label=label)
    b.plot(size, size, ":", label="buffer size")
    b.set_xlabel("debug buffer MiB"), b.set_ylabel("peak RSS MiB"), b.set_title("Numerical gap: peak RSS"), b.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", default="10000,200000,500000,1000000,2000000")
    p.add_argument("--buffers-mib", default="256,1024,2048,4096")
    p.add_argument("--full-mib", type=int, default=1024,
                   help="largest buffer also run with calculate_numeric_gap (numdiff and the oracle)")
    p.add_argument("--oracle-cap", type=float, default=120.0, help="seconds before the oracle's run is abandoned")
    p.add_argument("--no-oracle", action="store_true")
    p.add_argument("--json", type=Path, default=CACHE / "scaling.json", help="every figure, as JSON (default: in the cache)")
    a = p.parse_args()
    oracle = None if a.no_oracle or not ORACLE.exists() else ORACLE
    started = time.time()
    print("| events | file MiB | numdiff Inspector() s | + to_dataframe() s | numdiff peak MiB | MiB per M events "
          "| oracle s | oracle peak MiB | speed-up |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    events = _events([int(x) for x in a.events.split(",")], a.oracle_cap, oracle)
    print("\n| buffer MiB | rows | stream_numeric_gap s | peak RSS MiB | growth over import MiB | growth / largest "
          "(64 MiB) | numdiff calculate_numeric_gap | oracle calculate_numeric_gap |\n|---|---|---|---|---|---|---|---|",
          flush=True)
    buffers = _gaps([int(x) for x in a.buffers_mib.split(",")], a.full_mib, a.oracle_cap, oracle)
    a.json.write_text(json.dumps({"events": events, "buffers": buffers}, indent=1))
    _plot(events, buffers, HERE / "scaling.png")
    print(f"\nwrote {HERE / 'scaling.png'} and {a.json} in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
