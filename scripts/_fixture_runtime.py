"""Export, lower and run a model with ExecuTorch 1.5.1, writing ETDump, debug buffer and ETRecord.

Dev-only helper of ``scripts/make_fixtures.py`` (oracle virtualenv).

The runtime calls used (ExecuTorch 1.5.1 Python bindings)::

    m = portable_lib._load_for_executorch_from_buffer(
        program_bytes, enable_etdump=True, debug_buffer_size=N)
    m.run_method("forward", inputs)            # once per run
    m.write_etdump_result_to_file(etdump_path, debug_buffer_path_or_None)

With ``debug_buffer_size > 0`` the bindings log every op's output (there is no
"program outputs only" level in the bindings), so ``cpp_runner`` compiles
``scripts/_fixture_runner.cpp`` against the wheel's headers and libraries and
sets ``ETDumpGen::set_event_tracer_debug_level`` itself. Either way the runtime
writes the whole allocated debug buffer, so the buffer is sized from a first,
generous probe run and the final run is checked to log the same bytes.
"""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

Inputs = tuple[Any, ...]

_ELEM_SIZE = {
    "BYTE": 1, "CHAR": 1, "BOOL": 1, "BITS16": 2, "UINT16": 2, "SHORT": 2,
    "HALF": 2, "INT": 4, "FLOAT": 4, "DOUBLE": 8, "LONG": 8,
}  # fmt: skip

PROBE_DEBUG_BUFFER_SIZE = 16 * 1024 * 1024


@dataclass
class Lowered:
    """A lowered program plus what the ETRecord needs."""

    buffer: bytes
    etrecord: Any | None  # executorch.devtools.etrecord.ETRecord
    reference_module: Callable[..., Any]  # what computes reference outputs
    notes: list[str] = field(default_factory=list)


def export_and_lower(
    model: torch.nn.Module,
    example_inputs: Inputs,
    *,
    partitioners: Sequence[Any] | None = None,
    quantizer: Any | None = None,
    calibration: Sequence[Inputs] = (),
    generate_etrecord: bool = True,
    use_to_edge: bool = False,
    core_aten_exceptions: Sequence[Any] = (),
) -> Lowered:
    """torch.export (optionally PT2E-quantize first), lower, emit.

    ``use_to_edge`` uses ``to_edge`` (no partitioner) instead of
    ``to_edge_transform_and_lower``.
    """
    from executorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower

    model = model.eval()
    reference_module: Callable[..., Any] = model
    if quantizer is not None:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        graph_module = torch.export.export(model, example_inputs).module()
        prepared = prepare_pt2e(graph_module, quantizer)
        for inp in calibration or (example_inputs,):
            prepared(*inp)
        converted = convert_pt2e(prepared)
        reference_module = converted
        ep = torch.export.export(converted, example_inputs)
    else:
        ep = torch.export.export(model, example_inputs)

    config = None
    if quantizer is not None:
        config = EdgeCompileConfig(_check_ir_validity=False)
    elif core_aten_exceptions:
        config = EdgeCompileConfig(_core_aten_ops_exception_list=list(core_aten_exceptions))
    if use_to_edge:
        edge = to_edge(ep, compile_config=config, generate_etrecord=generate_etrecord)
    else:
        edge = to_edge_transform_and_lower(
            ep,
            partitioner=list(partitioners or []),
            compile_config=config,
            generate_etrecord=generate_etrecord,
        )
    et_program = edge.to_executorch()
    etrecord = et_program.get_etrecord() if generate_etrecord else None
    return Lowered(et_program.buffer, etrecord, reference_module)


def flat_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def reference_outputs(lowered: Lowered, inputs: Inputs) -> list[Any]:
    with torch.no_grad():
        return [o.detach().clone() if isinstance(o, torch.Tensor) else o
                for o in flat_outputs(lowered.reference_module(*inputs))]


def save_etrecord(lowered: Lowered, path: Path, representative: Inputs) -> None:
    """Add one representative input and its reference output, then save."""
    assert lowered.etrecord is not None
    lowered.etrecord.update_representative_inputs([representative])
    lowered.etrecord.update_reference_outputs([reference_outputs(lowered, representative)])
    lowered.etrecord.save(str(path))


RunOnce = Callable[[bytes, Sequence[Inputs], Path, "Path | None", int], None]


def run_pybindings(
    program: bytes,
    runs: Sequence[Inputs],
    etdump_path: Path,
    debug_buffer_path: Path | None,
    debug_buffer_size: int,
) -> None:
    """Run with the Python bindings (which log every op's output when a debug buffer is set)."""
    from executorch.extension.pybindings.portable_lib import (
        _load_for_executorch_from_buffer,
    )

    module = _load_for_executorch_from_buffer(
        program, enable_etdump=True, debug_buffer_size=debug_buffer_size
    )
    for inp in runs:
        module.run_method("forward", tuple(inp))
    module.write_etdump_result_to_file(
        str(etdump_path), None if debug_buffer_path is None else str(debug_buffer_path)
    )


_RUNNER_SOURCE = Path(__file__).resolve().parent / "_fixture_runner.cpp"
_runner_binary: Path | None = None


def _build_cpp_runner() -> Path:
    """Compile scripts/_fixture_runner.cpp against the executorch wheel's headers and libs."""
    global _runner_binary
    if _runner_binary is not None:
        return _runner_binary
    import executorch

    root = Path(list(executorch.__path__)[0]).resolve()
    out = Path(tempfile.mkdtemp(prefix="numdiff-runner-")) / "runner"
    cmd = [
        "g++", "-std=c++17", "-O1", "-w",
        "-DC10_USING_CUSTOM_GENERATED_MACROS", "-DET_EVENT_TRACER_ENABLED",
        f"-I{root / 'include'}",
        f"-I{root / 'include/executorch/runtime/core/portable_type/c10'}",
        str(_RUNNER_SOURCE), "-o", str(out),
        f"-L{root / 'lib'}", "-Wl,--no-as-needed",
        "-lexecutorch", "-lexecutorch_etdump", "-lexecutorch_kernels_optimized",
        f"-Wl,-rpath,{root / 'lib'}",
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    _runner_binary = out
    return out


def cpp_runner(level: str) -> RunOnce:
    """A RunOnce using the C++ runner with ETDumpGen's debug log level set to ``level``.

    ``level`` is ``none``, ``program_outputs`` or ``intermediate_outputs``. The
    model must take a single float32 tensor.
    """

    def run(
        program: bytes,
        runs: Sequence[Inputs],
        etdump_path: Path,
        debug_buffer_path: Path | None,
        debug_buffer_size: int,
    ) -> None:
        first = runs[0]
        if len(first) != 1 or any(not torch.equal(r[0], first[0]) for r in runs):
            raise ValueError("the C++ runner takes one float32 input, the same for every run")
        binary = _build_cpp_runner()
        with tempfile.TemporaryDirectory() as tmp:
            pte = Path(tmp) / "model.pte"
            pte.write_bytes(program)
            inp = Path(tmp) / "input.f32"
            first[0].detach().to(torch.float32).contiguous().numpy().tofile(inp)
            dbg = debug_buffer_path if debug_buffer_path is not None else Path(tmp) / "unused.bin"
            cmd = [str(binary), str(pte), str(inp), str(etdump_path), str(dbg),
                   str(debug_buffer_size), str(len(runs)), level]  # fmt: skip
            subprocess.run(cmd, check=True)

    return run


def debug_payloads(etdump_path: Path, buffer_path: Path) -> list[list[bytes]]:
    """The bytes of every tensor each debug event points at, in event order."""
    from executorch.devtools.inspector._inspector_utils import gen_etdump_object

    etdump = gen_etdump_object(etdump_path=str(etdump_path))
    data = buffer_path.read_bytes()
    payloads = []
    for run in etdump.run_data:
        for event in run.events or []:
            dbg = event.debug_event
            if dbg is None:
                continue
            value = dbg.debug_entry
            tensors = []
            if value.tensor is not None:
                tensors.append(value.tensor)
            if value.tensor_list is not None:
                tensors.extend(value.tensor_list.tensors)
            chunks = []
            for t in tensors:
                if t.offset is None:
                    continue
                nbytes = math.prod(t.sizes) * _ELEM_SIZE[t.scalar_type.name]
                if t.offset + nbytes > len(data):
                    raise RuntimeError(f"debug tensor at {t.offset}+{nbytes} overflows the buffer")
                chunks.append(data[t.offset : t.offset + nbytes])
            payloads.append(chunks)
    return payloads


def run_with_etdump(
    program: bytes,
    runs: Sequence[Inputs],
    out_dir: Path,
    *,
    debug_buffer: bool,
    run_once: RunOnce = run_pybindings,
    probe_size: int = PROBE_DEBUG_BUFFER_SIZE,
) -> None:
    """Run ``program`` once per input tuple; write etdump.etdp (+ debug_buffer.bin).

    The debug buffer is sized to what a generous probe run used, rounded up to
    1 KiB, and the final run is checked to have logged the same tensors.
    """
    etdump_path = out_dir / "etdump.etdp"
    if not debug_buffer:
        run_once(program, runs, etdump_path, None, 0)
        return

    with tempfile.TemporaryDirectory() as tmp:
        probe_dump = Path(tmp) / "probe.etdp"
        probe_buf = Path(tmp) / "probe.bin"
        run_once(program, runs, probe_dump, probe_buf, probe_size)
        probe = debug_payloads(probe_dump, probe_buf)
    # Tensors are aligned in the buffer, so the used size depends a little on where
    # the allocation lands: leave headroom for that, then check nothing was lost.
    used = sum(len(c) + 64 for chunks in probe for c in chunks)
    size = (used + 256 + 1023) // 1024 * 1024
    buf_path = out_dir / "debug_buffer.bin"
    run_once(program, runs, etdump_path, buf_path, size)
    final = debug_payloads(etdump_path, buf_path)
    if final != probe:
        raise RuntimeError("the sized run logged different debug data than the probe run")
    if os.path.getsize(buf_path) != size:
        raise RuntimeError("debug buffer file is not the allocated size")


def build_main(description: str, builders: dict[str, Callable[[Path], Any]], default_out: Path,
               argv: list[str] | None = None) -> int:
    """The command line of a fixture script: build every fixture of ``builders`` (or ``--only`` the
    named ones) under ``--out`` and print what each wrote."""
    import argparse
    import json
    import logging
    import sys
    import warnings

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    for name, build in builders.items():
        if args.only and name not in args.only:
            continue
        print(f"{name}: {json.dumps(build(args.out), default=str)}", file=sys.stderr)
    return 0

