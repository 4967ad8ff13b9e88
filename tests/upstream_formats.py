"""Edit real oracle artifacts (ExecuTorch 1.5.1) into formats ExecuTorch writes after 1.5.

No released ExecuTorch writes these yet, so tests take a real fixture and change only what the
upstream change changes, as the upstream sources describe it:

* **VGF neural statistics, schema version 2** (Arm backend, ``backends/arm/runtime/VGFNeuralStatistics.cpp``
  at pytorch/executorch 39a501508b534c32db6d05fa5bd20eb184b577f9; the Inspector's parser
  ``devtools/inspector/vgf_neural_statistics.py`` at 7698e441f668): the backend logs a profiling
  event named ``VGF_NEURAL_STATISTICS`` whose delegate debug metadata is the JSON record.
  :func:`vgf_record` writes the record with the keys in the order that serializer writes them;
  :func:`with_vgf_events` adds one such event inside every delegate call of a real ETDump.
* **Delegate scratch buffers** (pytorch/executorch#21985, commit 358cba698703, export schema 5.5: ``exir/serde/schema.py``
  ``DelegateScratchSpec``, ``exir/emit/_emitter.py`` and ``runtime/executor/method.cpp``): a lowered module's
  JSON gains ``scratch_specs`` (``[{"nbytes": n, "mem_id": m or null}]``), and the delegate call
  gets one ``uint8[nbytes]`` argument per spec after its inputs and outputs; the runtime logs every
  argument of a delegate call, so the ETDump gains those values after the outputs.
  :func:`with_lowered_program` records a lowered program with ``scratch_specs`` in the ETRecord;
  :func:`with_delegate_scratch` adds the logged scratch values to the ETDump and debug buffer.
* **Aliased slices** (pytorch/executorch#21552, commit a5fda433b080: ``exir/emit/_emitter.py`` ``_emit_slice``
  emits no instruction): a contiguous ``slice_copy`` becomes an
  ``executorch.exir.memory.slice`` alias that emits no instruction, so the ETDump has no event for
  it and no instruction carries its debug handle. :func:`with_aliased_slice` removes them.
"""

from __future__ import annotations

import base64
import io
import json
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from numdiff.schema.etdump import DebugEvent, ETDumpDoc, Event, ProfileEvent, ScalarType, Tensor, Value, ValueType
from numdiff.schema.etdump import read_etdump
from numdiff.schema.etdump.writer import write_etdump

__all__ = ["vgf_record", "with_lowered_program", "with_aliased_slice", "with_delegate_scratch", "with_vgf_events"]

VGF_EVENT = "VGF_NEURAL_STATISTICS"


def _blob(data: bytes | None, *, is_text: bool = False) -> dict[str, Any]:
    return {"available": data is not None, "is_text": is_text, "vulkan_result": 0, "size": len(data or b""),
            "encoding": "base64", "reason": "" if data is not None else "Segment is not a data graph pipeline",
            "data": base64.b64encode(data or b"").decode()}


def vgf_record(version: int = 2, *, device_name: str = "Mali-G2-Pro-NX MC1", vendor_id: int = 0x13B5,
               device_id: int = 7, driver_version: int = 11, mode_index: int = 1) -> str:
    """A VGF statistics record as the backend serializes it (version 1 or 2; Mali-G2 layout when it applies)."""
    record: dict[str, Any] = {
        "schema": "executorch.vgf.neural_statistics", "schema_version": version, "backend": "VgfBackend",
        "api": "VK_ARM_data_graph", "event_name": VGF_EVENT, "api_available": True, "data_available": True,
        "available": True, "reason": "",
    }
    if version >= 2:
        layout = vendor_id == 0x13B5 and "Mali-G2" in device_name
        record["statistics_mode"] = {
            "executorch_index": mode_index, "vulkan_value": mode_index + 1,
            "vulkan_name": f"VK_NEURAL_ACCELERATOR_STATISTICS_MODE_STATISTICS{mode_index}_ARM"}
        record["target"] = {"available": True, "device_name": device_name, "vendor_id": vendor_id,
                            "device_id": device_id, "driver_version": driver_version}
        record["counter_layout"] = {
            "available": layout, "schema_id": f"arm.mali-g2.neural-statistics.mode{mode_index}" if layout else "",
            "schema_version": 1 if layout else 0, "endianness": "little", "word_type": "uint32",
            "words_per_task": 64 if layout else 0, "leading_block_count": 1 if layout else 0,
            "reason": "" if layout else "No registered neural statistics counter layout for target"}
    record["segments"] = [{
        "segment_id": 0, "is_data_graph_pipeline": True, "statistics_bind_point_available": True,
        "statistics_memory_host_visible": True, "statistics_memory_host_coherent": True,
        "statistics_bind_point_reason": "",
        "debug_database": _blob(b"\x01\x02\x03"), "statistics_info": _blob(b"info", is_text=True),
        "statistics_memory": _blob(b"\xde\xad"),
    }]
    return json.dumps(record, separators=(",", ":"))


def _edit_runs(etdump: bytes, edit: Callable[[list[Event]], list[Event]]) -> bytes:
    doc = read_etdump(etdump).to_doc()
    runs = [replace(run, events=edit(list(run.events or ()))) if run.events is not None else run
            for run in doc.run_data]
    return write_etdump(ETDumpDoc(doc.version, runs))


def with_vgf_events(etdump: bytes, metadata: str) -> bytes:
    """``etdump`` with a ``VGF_NEURAL_STATISTICS`` delegate event carrying ``metadata`` in each delegate call.

    The backend logs it as a delegate profiling event named by string (``delegate_debug_id_str``,
    integer id -1, no event name: how ETDumpGen stores a named delegate event), inside the call:
    after the backend's other events and before the call's logged arguments and its
    ``DELEGATE_CALL`` event.
    """

    def edit(events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            pe = event.profile_event
            if pe is not None and pe.name == "DELEGATE_CALL":
                at = len(out)
                while at > 0 and out[at - 1].debug_event is not None:
                    at -= 1
                out.insert(at, Event(profile_event=ProfileEvent(
                    None, pe.chain_index, pe.instruction_id, -1, VGF_EVENT, metadata.encode(),
                    pe.start_time, pe.end_time)))
            out.append(event)
        return out

    return _edit_runs(etdump, edit)


# ---- delegate scratch (pytorch/executorch#21985) ----------------------------------------------------

def _etrecord_entries(etrecord: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(etrecord)) as z:
        return {name: z.read(name) for name in z.namelist()}


def _etrecord_bytes(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return out.getvalue()


def with_lowered_program(etrecord: bytes, scratch: Sequence[Sequence[int]], *, name: str = "lowered",
                         backend_id: str = "XnnpackBackend", method: str = "forward",
                         scratch_args: Sequence[int] | None = None) -> bytes:
    """The ETRecord plus, in its ``graph_map``, a lowered program whose ``k``-th delegate call declares ``scratch[k]``.

    This is what ``etrecord.add_extra_export_modules({name: edge_manager_after_lowering})`` records
    (entry ``name/method`` and its ``_state_dict``, ``_constants``, ``_example_inputs`` companions).
    ExecuTorch serializes a delegate call as a ``torch.ops.higher_order.executorch_call_delegate``
    node whose first argument is the lowered module as JSON (``backend_id``, ``processed_bytes``,
    ``compile_specs``, ``original_module``: the partition's program, ``original_state_dict``,
    ``original_constants``, ``named_data_store``, and since export schema 5.5 ``scratch_specs``),
    then its inputs; the program's schema is 5.5.

    With one delegate call, the whole Edge program is its partition: the original program keeps its
    nodes' debug handles, whose union the runtime's ``DELEGATE_CALL`` carries. With several, the
    lowered modules store no original program (``original_module`` null, as ExecuTorch writes it
    when there is none), so their calls cannot be told apart by debug handle.

    ``scratch_args`` (sizes in bytes) makes the program one recorded after ``to_executorch``: the
    scratch pass has appended a ``memory.alloc`` buffer (``uint8``) per size to each delegate call's
    arguments.
    """
    entries = _etrecord_entries(etrecord)
    edge = f"edge_dialect_exported_program/{method}"
    inner = json.loads(entries[edge])
    whole = len(scratch) == 1

    def lowered(sizes: Sequence[int]) -> str:
        return json.dumps({
            "backend_id": backend_id,
            "processed_bytes": base64.b64encode(b"compiled partition").decode(),
            "compile_specs": [],
            "original_module": inner if whole else None,
            "original_state_dict": base64.b64encode(entries[edge + "_state_dict"] if whole else b"").decode(),
            "original_constants": base64.b64encode(entries[edge + "_constants"] if whole else b"").decode(),
            "named_data_store": None,
            "scratch_specs": [{"nbytes": n, "mem_id": None} for n in sizes],
        })

    user_inputs = [s["user_input"]["arg"] for s in inner["graph_module"]["signature"]["input_specs"] if "user_input" in s]
    user_names = [a["as_tensor"]["name"] for a in user_inputs]
    outer = json.loads(entries[edge])
    outer["schema_version"] = {"major": 5, "minor": 5}
    graph = outer["graph_module"]["graph"]
    outputs = [o["as_tensor"]["name"] for o in graph["outputs"]]
    values = graph["tensor_values"]
    graph["inputs"] = [{"as_tensor": {"name": n}} for n in user_names]
    graph["tensor_values"] = {k: v for k, v in values.items() if k in user_names or k in outputs}
    graph["nodes"] = []
    for k, sizes in enumerate(scratch):
        last = k == len(scratch) - 1
        names = outputs if last else [f"delegate_out_{k}"]
        if not last:
            graph["tensor_values"][names[0]] = values[outputs[0]]
        allocs = []
        for j, nbytes in enumerate(scratch_args or ()):
            allocs.append(f"scratch_{k}_{j}")
            graph["nodes"].append({"name": allocs[-1], "target": "memory.alloc",
                                   "inputs": [{"name": "alloc_arg", "arg": {"as_string": f"({nbytes},);1"}}],
                                   "outputs": [{"as_tensor": {"name": allocs[-1]}}], "metadata": {}})
            graph["tensor_values"][allocs[-1]] = {**values[outputs[0]], "dtype": 1, "sizes": [{"as_int": nbytes}],
                                                  "strides": [{"as_int": 1}], "requires_grad": False}
        graph["nodes"].append({
            "name": "executorch_call_delegate" + (f"_{k}" if k else ""),
            "target": "torch.ops.higher_order.executorch_call_delegate",
            "inputs": [{"name": f"lowered_module_{k}", "arg": {"as_string": lowered(sizes)}}]
            + [{"name": f"delegate_arg_{i}", "arg": {"as_tensor": {"name": n}}}
               for i, n in enumerate([*user_names, *allocs])],
            "outputs": [{"as_tensors": [{"name": n} for n in names]}],
            "metadata": {},
        })
    outer["graph_module"]["signature"]["input_specs"] = [{"user_input": {"arg": a}} for a in user_inputs]
    key = f"{name}/{method}"
    entries[key] = json.dumps(outer).encode()
    empty = io.BytesIO()
    torch.save({}, empty)
    entries[key + "_state_dict"] = empty.getvalue()
    entries[key + "_constants"] = entries[edge + "_constants"]
    entries[key + "_example_inputs"] = entries[edge + "_example_inputs"]
    return _etrecord_bytes(entries)


def with_delegate_scratch(etdump: bytes, debug_buffer: bytes, scratch: Sequence[Sequence[int]], *,
                          fill: int = 0xA5) -> tuple[bytes, bytes]:
    """Every run's ``k``-th ``DELEGATE_CALL`` logs one more ``uint8`` value per size in ``scratch[k]``.

    The values come after the call's logged inputs and outputs, as the runtime logs a delegate's
    arguments; their bytes are appended to the debug buffer (all ``fill``: scratch holds whatever the
    backend left there, which may differ from run to run).
    """
    buffer = bytearray(debug_buffer)

    def scratch_value(nbytes: int) -> Value:
        offset = len(buffer)
        buffer.extend(bytes([fill]) * nbytes)
        while len(buffer) % 16:
            buffer.append(0)
        return Value(ValueType.TENSOR, tensor=Tensor(int(ScalarType.BYTE), (nbytes,), (1,), offset), output=False)

    def edit(events: list[Event]) -> list[Event]:
        # The runtime writes a delegate call's logged arguments as debug events just before the
        # call's DELEGATE_CALL profiling event (written when the call's scope ends).
        calls: dict[int, int] = {}  # instruction id -> index of that delegate call in the run
        out: list[Event] = []
        for event in events:
            pe = event.profile_event
            if pe is not None and pe.name == "DELEGATE_CALL":
                call = calls.setdefault(pe.instruction_id, len(calls))
                previous = out[-1].debug_event if out else None
                assert previous is not None and previous.instruction_id == pe.instruction_id, "no logged arguments"
                out.extend(Event(debug_event=replace(previous, debug_entry=scratch_value(n))) for n in scratch[call])
            out.append(event)
        return out

    new_etdump = _edit_runs(etdump, edit)
    return new_etdump, bytes(buffer)


# ---- aliased slices (pytorch/executorch#21552) -------------------------------------------------------

def with_aliased_slice(etrecord: bytes, etdump: bytes, instruction_id: int, *, method: str = "forward") -> tuple[bytes, bytes]:
    """Make instruction ``instruction_id`` (a contiguous ``slice_copy``) an alias that emits no instruction.

    Its events leave the ETDump, and its entries leave the ETRecord's debug-handle and
    output-count maps (the program numbers its other instructions as before).
    """
    entries = _etrecord_entries(etrecord)
    for name in ("debug_handle_map", "instruction_id_to_num_outs_map"):
        if name in entries:
            maps = json.loads(entries[name])
            maps[method].pop(str(instruction_id), None)
            entries[name] = json.dumps(maps).encode()

    def edit(events: list[Event]) -> list[Event]:
        return [e for e in events if not _at_instruction(e, instruction_id)]

    return _etrecord_bytes(entries), _edit_runs(etdump, edit)


def _at_instruction(event: Event, instruction_id: int) -> bool:
    record: ProfileEvent | DebugEvent | None = event.profile_event or event.debug_event
    return record is not None and record.instruction_id == instruction_id
