"""Write the benchmark's real artifacts with ExecuTorch 1.5.1 (runs in the oracle virtualenv).

Dev-only helper of ``benchmarks/run.py``; not part of numdiff or its tests::

    ORACLE_PYTHON benchmarks/_generate.py OUT_DIR

Writes two cases under ``OUT_DIR``:

``profiling/``
    ``AddReluChain``: 500 × (add, relu) on a (4, 4) fp32 tensor = 1,000 portable ops, run
    ``PROFILING_RUNS`` times with ETDump profiling and no debug buffer; ``etdump.etdp`` +
    ``etrecord.bin``.
``gap/``
    ``ConvStack``: 40 × (conv2d 8→8 3×3, add residual, relu, mul) on (1, 8, 256, 256) fp32
    tensors (2 MiB each) = 160 ops whose logged outputs total ≥ 300 MiB, run once with a debug
    buffer; ``etdump.etdp`` + ``debug_buffer.bin`` + ``etrecord.bin`` (with one representative
    input and its reference output, so ``calculate_numeric_gap`` runs).

It export/lowers with ``scripts/_fixture_runtime.py`` (the fixture script's working 1.5.1 calls)
and prints one JSON line describing what it wrote.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import _fixture_runtime as rt

#: Parameters of the two cases; ``run.py`` hashes this file, so changing them regenerates.
CHAIN_LENGTH = 500
CHAIN_SHAPE = (4, 4)
PROFILING_RUNS = 100
CONV_BLOCKS = 40
CONV_SHAPE = (1, 8, 256, 256)


class AddReluChain(nn.Module):
    """``CHAIN_LENGTH`` × ``relu(x + b)``: 2 portable ops per step."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.full(CHAIN_SHAPE, 0.01))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(CHAIN_LENGTH):
            x = torch.relu(x + self.b)
        return x


class ConvBlock(nn.Module):
    """conv → add residual → relu → mul: 4 ops, each output the size of the input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.register_buffer("scale", torch.full((channels, 1, 1), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + x) * self.scale


class ConvStack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(ConvBlock(CONV_SHAPE[1]) for _ in range(CONV_BLOCKS)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def _run(program: bytes, runs: int, inputs: rt.Inputs, out: Path, debug_buffer_size: int) -> None:
    from executorch.extension.pybindings.portable_lib import (
        _load_for_executorch_from_buffer,
    )

    module = _load_for_executorch_from_buffer(
        program, enable_etdump=True, debug_buffer_size=debug_buffer_size
    )
    for _ in range(runs):
        module.run_method("forward", inputs)
    buffer = str(out / "debug_buffer.bin") if debug_buffer_size else None
    module.write_etdump_result_to_file(str(out / "etdump.etdp"), buffer)


def make_profiling(out: Path) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(*CHAIN_SHAPE)
    lowered = rt.export_and_lower(AddReluChain().eval(), (x,))
    rt.save_etrecord(lowered, out / "etrecord.bin", (x,))
    _run(lowered.buffer, PROFILING_RUNS, (x,), out, 0)
    return {"ops": 2 * CHAIN_LENGTH, "runs": PROFILING_RUNS}


def make_gap(out: Path) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(1)
    model = ConvStack().eval()
    x = torch.randn(*CONV_SHAPE)
    lowered = rt.export_and_lower(model, (x,))
    rt.save_etrecord(lowered, out / "etrecord.bin", (x,))
    tensor_bytes = x.numel() * x.element_size()
    ops = 4 * CONV_BLOCKS
    # Every op output plus the input and some weights, each aligned: leave generous headroom.
    size = (ops + 8) * (tensor_bytes + 4096) + 16 * 1024 * 1024
    _run(lowered.buffer, 1, (x,), out, size)
    return {"ops": ops, "runs": 1, "intermediate_bytes": ops * tensor_bytes, "debug_buffer_size": size}


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    info: dict[str, object] = {"torch": torch.__version__}
    for name, make in (("profiling", make_profiling), ("gap", make_gap)):
        start = time.perf_counter()
        info[name] = make(out / name)
        info[name]["seconds"] = round(time.perf_counter() - start, 1)  # type: ignore[index]
        info[name]["files"] = {p.name: p.stat().st_size for p in sorted((out / name).iterdir())}  # type: ignore[index]
        print(f"generated {name}: {info[name]}", file=sys.stderr)
    with open(out / "generated.json", "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCH_LOGS", "")
    raise SystemExit(main(sys.argv))
