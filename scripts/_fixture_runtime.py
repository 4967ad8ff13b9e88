"""Export, lower and run a model with ExecuTorch 1.5.1, writing ETDump, debug buffer and ETRecord.

Dev-only helper of ``scripts/make_fixtures.py`` (oracle virtualenv).

The runtime calls used (ExecuTorch 1.5.1 Python bindings)::

    m = portable_lib._load_for_executorch_from_buffer(
        program_bytes, enable_etdump=True, debug_buffer_size=N)
    m.run_method("forward", inputs)            # once per run
    m.write_etdump_result_to_file(etdump_path, debug_buffer_path_or_None)

With ``debug_buffer_size > 0`` the bindings log every op's output (there is no
"program outputs only" level in the bindings); the runtime writes the whole
allocated buffer, so the buffer is sized from a first, generous run.
"""

from __future__ import annotations

import math
import os
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


def _run_once(
    program: bytes,
    runs: Sequence[Inputs],
    etdump_path: Path,
    debug_buffer_path: Path | None,
    debug_buffer_size: int,
) -> list[list[Any]]:
    from executorch.extension.pybindings.portable_lib import (
        _load_for_executorch_from_buffer,
    )

    module = _load_for_executorch_from_buffer(
        program, enable_etdump=True, debug_buffer_size=debug_buffer_size
    )
    outputs = [list(module.run_method("forward", tuple(inp))) for inp in runs]
    module.write_etdump_result_to_file(
        str(etdump_path), None if debug_buffer_path is None else str(debug_buffer_path)
    )
    return outputs


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
) -> list[list[Any]]:
    """Run ``program`` once per input tuple; write etdump.etdp (+ debug_buffer.bin).

    The debug buffer is sized to what a generous probe run used, rounded up to
    1 KiB, and the final run is checked to have logged the same tensors.
    """
    etdump_path = out_dir / "etdump.etdp"
    if not debug_buffer:
        return _run_once(program, runs, etdump_path, None, 0)

    with tempfile.TemporaryDirectory() as tmp:
        probe_dump = Path(tmp) / "probe.etdp"
        probe_buf = Path(tmp) / "probe.bin"
        _run_once(program, runs, probe_dump, probe_buf, PROBE_DEBUG_BUFFER_SIZE)
        probe = debug_payloads(probe_dump, probe_buf)
    # Tensors are aligned in the buffer, so the used size depends a little on where
    # the allocation lands: leave headroom for that, then check nothing was lost.
    used = sum(len(c) + 64 for chunks in probe for c in chunks)
    size = (used + 256 + 1023) // 1024 * 1024
    buf_path = out_dir / "debug_buffer.bin"
    outputs = _run_once(program, runs, etdump_path, buf_path, size)
    final = debug_payloads(etdump_path, buf_path)
    if final != probe:
        raise RuntimeError("the sized run logged different debug data than the probe run")
    if os.path.getsize(buf_path) != size:
        raise RuntimeError("debug buffer file is not the allocated size")
    return outputs
