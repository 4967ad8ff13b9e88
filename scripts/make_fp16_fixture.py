"""Write tests/fixtures/fp16_debug: a half-precision model run with intermediate-output logging.

Dev-only (oracle virtualenv, never in CI)::

    /root/.cache/numdiff-oracle/bin/python scripts/make_fp16_fixture.py [--out DIR]

ExecuTorch 1.5.1's runtime cannot log half-precision tensors: for every one it prints
``ScalarType = 5 is not yet supported in ETDump`` and the ETDump it writes cannot be parsed,
not even by ExecuTorch's own Inspector. This script keeps such a dump (and the debug buffer written
with it) so numdiff's reader can be tested on the real thing, plus ``reference.json`` recording
what the runtime printed and what the reference did with the files.

Files: ``etdump.etdp``, ``debug_buffer.bin`` (float16 model), ``bf16_etdump.etdp``,
``bf16_debug_buffer.bin`` (the same model in bfloat16), ``reference.json``, ``runtime_stderr.txt``
(the runtime's messages); also ``profile_only.etdp``: the float16 model run without a debug buffer,
which the reference reads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fixture_runtime import export_and_lower  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEBUG_BUFFER_SIZE = 4096


class HalfMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


_RUN = textwrap.dedent(
    """
    import sys, torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer
    program, etdump, buf, size, dtype = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    data = open(program, "rb").read()  # must outlive the module, which keeps a pointer into it
    m = _load_for_executorch_from_buffer(data, enable_etdump=True, debug_buffer_size=size)
    torch.manual_seed(1)
    m.run_method("forward", (torch.randn(1, 4).to(getattr(torch, dtype)),))
    m.write_etdump_result_to_file(etdump, buf if size else None)
    """
)


def _run(program: Path, etdump: Path, buf: Path | None, size: int, dtype: str = "float16") -> str:
    """Run in a child process so the runtime's stderr can be kept."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(program), str(etdump), str(buf or ""), str(size), dtype],
        capture_output=True, text=True, check=True,
    )
    return proc.stderr


def _reference(etdump: Path, buf: Path | None) -> dict[str, object]:
    from executorch.devtools import Inspector

    try:
        Inspector(etdump_path=str(etdump), debug_buffer_path=None if buf is None else str(buf))
    except Exception as e:  # noqa: BLE001 - recording what the reference does
        where = traceback.extract_tb(e.__traceback__)[-1]
        message = re.sub(r"/tmp/[\w.-]+", "<tmp>", str(e))
        message = re.sub(r"/\S*/site-packages/", "<site-packages>/", message)
        return {"error_type": type(e).__name__, "error": message[:500],
                "raised_in": f"{Path(where.filename).name}:{where.name}"}
    return {"error_type": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/fp16_debug")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = HalfMLP().half()
    lowered = export_and_lower(model, (torch.randn(1, 4).half(),), generate_etrecord=False, use_to_edge=True)
    with tempfile.TemporaryDirectory() as tmp:
        pte = Path(tmp) / "model.pte"
        pte.write_bytes(lowered.buffer)
        stderr = _run(pte, out / "etdump.etdp", out / "debug_buffer.bin", DEBUG_BUFFER_SIZE)
        _run(pte, out / "profile_only.etdp", None, 0)
    torch.manual_seed(0)
    bf16 = HalfMLP().bfloat16()
    lowered = export_and_lower(bf16, (torch.randn(1, 4).bfloat16(),), generate_etrecord=False, use_to_edge=True)
    with tempfile.TemporaryDirectory() as tmp:
        pte = Path(tmp) / "model.pte"
        pte.write_bytes(lowered.buffer)
        stderr += _run(pte, out / "bf16_etdump.etdp", out / "bf16_debug_buffer.bin", DEBUG_BUFFER_SIZE, "bfloat16")
    (out / "runtime_stderr.txt").write_text(
        "\n".join(line for line in stderr.splitlines() if "not yet supported" in line) + "\n"
    )
    expected = {
        "runtime": "ExecuTorch 1.5.1 pybindings, portable kernels, model and input in float16 (bf16_*: bfloat16)",
        "runtime_messages": sorted(set(line.split("] ")[-1] for line in stderr.splitlines()
                                       if "not yet supported" in line)),
        "reference_with_debug_buffer": _reference(out / "etdump.etdp", out / "debug_buffer.bin"),
        "reference_profile_only": _reference(out / "profile_only.etdp", None),
        "reference_bf16_with_debug_buffer": _reference(out / "bf16_etdump.etdp", out / "bf16_debug_buffer.bin"),
        "sizes": {p.name: os.path.getsize(p) for p in sorted(out.iterdir()) if p.suffix in (".etdp", ".bin")},
    }
    (out / "reference.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(json.dumps(expected, indent=1))


if __name__ == "__main__":
    main()
