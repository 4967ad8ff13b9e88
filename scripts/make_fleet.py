#!/usr/bin/env python3
"""Make a synthetic device-lab fleet from the oracle's committed artifacts, for `numdiff batch`.

Every run reuses one real ETRecord (copied once) and a variant of the real ETDump and debug buffer:
the logged float32 intermediates get noise (a small base level per input set, a large one on chosen
ops of chosen devices and builds, so that the fleet has ops that diverge on some devices only) and the
profile timestamps are rescaled per device and build with jitter per execution. The ETDump is written
with numdiff.schema.etdump.writer (byte-compatible with the runtime's). Labels: device, build,
input_set. A manifest (CSV, paths relative to it) is written beside the runs.

  .venv/bin/python scripts/make_fleet.py --out /tmp/fleet --runs 1000
  .venv/bin/python scripts/make_fleet.py --out /tmp/fleet12 --runs 10 --broken 1 --missing 1

The noise goes into the logged values only (downstream values are not recomputed), so the op after a
noisy one also looks wrong to culprit localization (it is replayed on the noisy input but its logged
output is clean): expect the next op to be flagged too on those devices.

--broken K truncates the ETDump of K runs; --missing K names a debug buffer that does not exist.
The default source is numdiff/examples/planted_culprit (linear_1 is a planted culprit everywhere).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from numdiff.schema.etdump import ETDumpDoc, Event, RunDoc, ScalarType, read_etdump  # noqa: E402
from numdiff.schema.etdump.writer import write_etdump  # noqa: E402

#: device → (speed factor, {runtime kernel: relative noise}); a kernel's noise only on the builds listed.
DEVICES: dict[str, tuple[float, dict[str, tuple[float, tuple[str, ...]]]]] = {
    "pixel8": (1.0, {}),
    "pixel7": (1.35, {}),
    "galaxy-s24": (0.85, {"addmm": (3e-3, ("b102",))}),
    "rpi5": (3.2, {"relu": (5e-2, ("b100", "b101", "b102"))}),
    "jetson-orin": (0.6, {}),
    "imx8": (4.5, {"tanh": (2e-2, ("b101", "b102"))}),
}
BUILDS = {"b100": 1.0, "b101": 0.97, "b102": 1.05}
INPUT_SETS = {"calib": 1e-7, "val": 3e-7, "edge": 1e-6}
_KERNEL = re.compile(r"native_call_(\w+?)(_copy)?\.")


def _float_tensors(doc: ETDumpDoc) -> list[tuple[int, int, int, bool]]:
    """(instruction id, byte offset, element count, is program output) of every float32 debug tensor."""
    out = []
    for run in doc.run_data:
        for ev in run.events or ():
            d = ev.debug_event
            if d is None or d.debug_entry is None or d.debug_entry.tensor is None:
                continue
            t = d.debug_entry.tensor
            if t.scalar_type == ScalarType.FLOAT:
                out.append((d.instruction_id, t.offset, int(np.prod(t.sizes)), bool(d.debug_entry.output)))
    return sorted(set(out))


def _kernels(doc: ETDumpDoc) -> dict[int, str]:
    names = {}
    for run in doc.run_data:
        for ev in run.events or ():
            p = ev.profile_event
            if p is not None and p.name and (m := _KERNEL.match(p.name)):
                names[p.instruction_id] = m.group(1)
    return names


def _debug_buffer(raw: bytes, tensors: list[tuple[int, int, int, bool]], kernels: dict[int, str], device: str,
                  build: str, input_set: str, rng: np.random.Generator) -> bytes:
    buf = bytearray(raw)
    noisy = DEVICES[device][1]
    for instruction, offset, numel, output in tensors:
        if output:
            continue  # the program output stays as the runtime wrote it
        x = np.frombuffer(buf, dtype="<f4", count=numel, offset=offset).astype(np.float64)
        level = INPUT_SETS[input_set]
        kernel = kernels.get(instruction, "")
        if kernel in noisy and build in noisy[kernel][1]:
            level = noisy[kernel][0]
        scale = float(np.std(x)) or 1.0
        x = x + rng.standard_normal(numel) * level * scale
        buf[offset:offset + 4 * numel] = x.astype("<f4").tobytes()
    return bytes(buf)


def _runs(doc: ETDumpDoc, factor: float, iterations: int, rng: np.random.Generator) -> list[RunDoc]:
    out: list[RunDoc] = []
    for run in doc.run_data:
        copies = iterations if run.name != "Default" else 1
        times = [p.start_time for ev in run.events or () if (p := ev.profile_event) is not None]
        t0 = min(times, default=0)
        span = max((p.end_time for ev in run.events or () if (p := ev.profile_event) is not None), default=t0) - t0
        for k in range(copies):
            scale = factor * float(np.exp(rng.normal(0.0, 0.05)))
            base = t0 + int(k * (span * factor * 1.5 + 1000))
            events: list[Event] = []
            for ev in run.events or ():
                p = ev.profile_event
                if p is not None:
                    ev = Event(profile_event=dataclasses.replace(
                        p, start_time=base + int((p.start_time - t0) * scale),
                        end_time=base + int((p.end_time - t0) * scale)))
                events.append(ev)
            out.append(RunDoc(run.name, events, run.bundled_input_index, tuple(run.allocators)))
    return out


def make_fleet(out: Path, runs: int, source: Path, iterations: int = 3, seed: int = 0, broken: int = 0,
               missing: int = 0) -> Path:
    """Write ``runs`` runs under ``out`` and return the manifest's path."""
    etdump_raw = (source / "etdump.etdp").read_bytes()
    debug_raw = (source / "debug_buffer.bin").read_bytes()
    doc = read_etdump(etdump_raw).to_doc()
    tensors, kernels = _float_tensors(doc), _kernels(doc)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "etrecord.bin", out / "etrecord.bin")
    devices, builds, inputs = list(DEVICES), list(BUILDS), list(INPUT_SETS)
    rows: list[dict[str, Any]] = []
    for i in range(runs):
        rng = np.random.default_rng([seed, i])
        device = devices[i % len(devices)]
        build = builds[(i // len(devices)) % len(builds)]
        input_set = inputs[(i // (len(devices) * len(builds))) % len(inputs)]
        name = f"run-{i:05d}"
        folder = out / "runs" / name
        folder.mkdir(parents=True, exist_ok=True)
        factor = DEVICES[device][0] * BUILDS[build]
        dump = write_etdump(ETDumpDoc(doc.version, _runs(doc, factor, iterations, rng)))
        if i < broken:
            dump = dump[: len(dump) // 3]
        (folder / "etdump.etdp").write_bytes(dump)
        debug_name = "debug_buffer.bin"
        if broken <= i < broken + missing:
            debug_name = "missing_debug_buffer.bin"
        else:
            (folder / debug_name).write_bytes(
                _debug_buffer(debug_raw, tensors, kernels, device, build, input_set, rng))
        rows.append({"run": name, "etdump": f"runs/{name}/etdump.etdp", "etrecord": "etrecord.bin",
                     "debug_buffer": f"runs/{name}/{debug_name}", "device": device, "build": build,
                     "input_set": input_set})
    manifest = out / "manifest.csv"
    with open(manifest, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return manifest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="folder to write (outside the repository)")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--source", type=Path, default=REPO / "numdiff/examples/planted_culprit",
                        help="folder with etdump.etdp, debug_buffer.bin, etrecord.bin (committed oracle artifacts)")
    parser.add_argument("--iterations", type=int, default=3, help="executions per ETDump (latency samples)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--broken", type=int, default=0, help="runs whose ETDump is truncated")
    parser.add_argument("--missing", type=int, default=0, help="runs whose debug buffer is missing")
    args = parser.parse_args()
    out = args.out.resolve()
    if out == REPO or REPO in out.parents:
        parser.error(f"--out {out} is inside the repository; write the fleet elsewhere (e.g. /tmp/fleet)")
    manifest = make_fleet(out, args.runs, args.source, args.iterations, args.seed, args.broken, args.missing)
    print(f"wrote {args.runs} runs and {manifest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
