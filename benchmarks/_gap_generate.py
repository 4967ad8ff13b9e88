"""A real ETRecord whose intermediates total 4 GiB, and ETDumps + debug buffers that log them.

``streaming_case(total)`` gives ``(etdump, etrecord, debug_buffer, largest)`` for
``benchmarks/scaling.py --gap``:

* The ETRecord is written once by ExecuTorch 1.5.1 (the oracle virtualenv, ``ORACLE``): a chain
  of ``OPS`` elementwise ops (mul, add, relu in turn) on a float32 vector of 64 MiB, exported with
  ``to_edge`` and emitted with ``to_executorch``; each op's output is 64 MiB, so the graph's
  intermediates total ``OPS`` × 64 MiB = 4 GiB. Its representative input is the model input.
* The ETDump and debug buffer stand in for what the runtime logs: numdiff runs the ETRecord's Edge
  graph on the representative input, op by op, and writes each of the first ``total / 64 MiB``
  instructions' outputs (with a relative error of about 1e-4, so the gap is finite) into the
  debug buffer, with one debug event per instruction (its instruction id from the ETRecord's
  ``debug_handle_map``) written by numdiff's ETDump writer. Nothing is held in memory at once.

Files are cached under ``~/.cache/numdiff-bench/scaling`` (``NUMDIFF_BENCH_CACHE``); nothing is
written into the repository.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _scaling_generate import CACHE, _write

ORACLE = Path.home() / ".cache" / "numdiff-oracle" / "bin" / "python"
OPS = 64
EACH = 64 * 2**20
ELEMENTS = EACH // 4

_EXPORT = r"""
import sys, torch
from executorch.exir import to_edge

class Chain(torch.nn.Module):
    def forward(self, x):
        for i in range({ops}):
            kind = i % 3
            x = x * 1.0001 if kind == 0 else (x + 0.001 if kind == 1 else torch.relu(x))
        return x

x = torch.rand({elements}) + 0.5
ep = torch.export.export(Chain().eval(), (x,))
program = to_edge(ep, generate_etrecord=True).to_executorch()
record = program.get_etrecord()
record.update_representative_inputs([(x,)])
record.save(sys.argv[1])
"""


def etrecord() -> Path:
    """The cached 4 GiB-of-intermediates ETRecord (made with the oracle on first use)."""
    path = CACHE / f"gap-chain-{OPS}x{EACH >> 20}MiB.etrecord"
    if not path.exists():
        if not ORACLE.exists():
            raise SystemExit(f"the streaming-gap case needs ExecuTorch to write its ETRecord once: run "
                             f"../shared/oracle-venv.sh (it makes {ORACLE})")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        subprocess.run([str(ORACLE), "-c", _EXPORT.format(ops=OPS, elements=ELEMENTS), str(tmp)], check=True)
        tmp.replace(path)
    return path


def streaming_case(total: int) -> tuple[Path, Path, Path, int]:
    """ETDump, ETRecord and debug buffer logging the first ``total / 64 MiB`` ops' outputs; largest tensor size."""
    import torch

    from numdiff.capture import capture_intermediate_outputs
    from numdiff.schema.etdump import (
        DebugEvent,
        ETDumpDoc,
        Event,
        RunDoc,
        ScalarType,
        Tensor,
        Value,
        ValueType,
    )
    from numdiff.schema.etdump.writer import write_etdump
    from numdiff.schema.etrecord import parse_etrecord

    count = max(1, min(OPS, total // EACH))
    record_path = etrecord()
    etdump, buffer = CACHE / f"gap-{count}ops.etdp", CACHE / f"gap-{count}ops.bin"
    if etdump.exists() and buffer.exists():
        return etdump, record_path, buffer, EACH
    record = parse_etrecord(record_path)
    by_handle = {int(h): int(iid) for iid, h in record._debug_handle_map["forward"].items() if isinstance(h, int)}
    order = sorted(by_handle, key=by_handle.__getitem__)[:count]
    slot = {h: k for k, h in enumerate(order)}
    rng = torch.Generator().manual_seed(count)
    tmp = buffer.with_suffix(".bin-tmp")
    with open(tmp, "wb") as f:
        f.truncate(count * EACH)

        def write(handle: tuple[int, ...], node: object, value: object) -> None:
            k = slot.get(handle[0]) if len(handle) == 1 else None
            if k is not None and isinstance(value, torch.Tensor):
                noisy = value * (1 + 1e-4 * torch.randn(value.shape, generator=rng))
                f.seek(k * EACH)
                f.write(noisy.numpy().tobytes())

        capture_intermediate_outputs(record.edge_dialect_program.module(), [tuple(record._representative_inputs[0])],
                                     on_output=write)
    events = [Event(debug_event=DebugEvent(0, by_handle[h], Value(val=ValueType.TENSOR, tensor=Tensor(
        int(ScalarType.FLOAT), (ELEMENTS,), (1,), slot[h] * EACH)), -1, None, None)) for h in order]
    _write(etdump, write_etdump(ETDumpDoc(0, [RunDoc("Execute", events)])))
    tmp.replace(buffer)
    return etdump, record_path, buffer, EACH


if __name__ == "__main__":
    print(streaming_case(int(float(sys.argv[1]) * 2**30) if len(sys.argv) > 1 else 4 * 2**30))

