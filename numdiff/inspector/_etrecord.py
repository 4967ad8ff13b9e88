"""How the Inspector consumes an ETRecord (a private helper of :mod:`numdiff.inspector`).

Everything the drop-in ``Inspector`` does with the ETRecord when it is built: check that it
describes the model in the ETDump, tie each execution block to its program method, set debug
handles and graph metadata (op types, stack traces, module hierarchy) on every event, and install
lazy reference-output loaders. Also the small helpers the facade needs (loading an ETRecord
argument, module membership for ``module_total``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from numdiff._core.events import DELEGATE_CALL, FRAMEWORK_EVENTS

from numdiff.errors import MismatchedArtifactsError, UnknownNameError, UsageTypeError
from numdiff.profile.symbolicate import (
    FORWARD,
    attach_graph_metadata,
    graph_op_nodes,
    op_name_mismatches,
    op_nodes_from_graph,
    resolve_debug_handles,
)
from numdiff.profile.events import EventBlock
from numdiff.profile.methods import assign_methods
from numdiff.profile.op_graph import EDGE_DIALECT_GRAPH_KEY
from numdiff.schema.etdump import EventKind

# Imported with the Inspector, as the reference imports what its constructor uses: the ETRecord
# reader brings pydantic and builds its entry models (about 0.1 s, once per process).
from numdiff.schema.etrecord import ETRecord, parse_etrecord

if TYPE_CHECKING:
    from numdiff._core.etrecord import ETRecordLike
    from numdiff._core.types import ProgramOutput
    from numdiff.profile.symbolicate import OpNode
    from numdiff.program.graph_meta import OpNodeInfo
    from numdiff.schema.etdump import ETDump

__all__ = ["consume_etrecord", "edge_op_nodes", "in_module", "load_etrecord", "logs_tensors"]


def consume_etrecord(rec: ETRecordLike, blocks: list[EventBlock], *, etdump_path: str | None,
                     enable_module_hierarchy: bool, reference_graph_name: str) -> list[str]:
    """Link the events to the ETRecord: debug handles, methods, op types, reference outputs.

    Each execution block is tied to its method (``EventBlock.method_name``) and symbolicated
    with that method's maps and graph; blocks of no known method use ``forward``'s, as the
    reference does for every block. Returns notes for the Inspector's one warning.

    Raises:
        MismatchedArtifactsError: The ETRecord does not describe the model in the ETDump.
        UnknownNameError: ``reference_graph_name`` is not a graph of the ETRecord.
    """
    handle_maps = rec._debug_handle_map or {}
    _check_same_model(blocks, {k: v for m in handle_maps.values() for k, v in m.items()},
                      etdump_path)
    custom = reference_graph_name != EDGE_DIALECT_GRAPH_KEY
    infos = _graph_op_nodes(rec, reference_graph_name) if custom else None
    by_method: dict[str, dict[object, list[OpNode]] | None] = {}
    for method in list(handle_maps) or [FORWARD]:
        method_infos = infos if custom else edge_op_nodes(rec, method)
        by_method[method] = (None if method_infos is None
                             else graph_op_nodes(method_infos, enable_module_hierarchy))
        if len(handle_maps) <= 1:
            break  # one method: no matching needed
    notes = assign_methods(blocks, handle_maps, by_method)
    for method in list(handle_maps) or [FORWARD]:
        # Blocks of no known method are symbolicated with 'forward', as the reference does.
        group = [b for b in blocks if (b.method_name or FORWARD) == method]
        if not group:
            continue
        delegate_map = None if rec._delegate_map is None else rec._delegate_map.get(method)
        _check_delegates(group, handle_maps.get(method, {}), delegate_map, etdump_path)
        num_outs = (rec._instruction_id_to_num_outs_map or {}).get(method)
        notes += resolve_debug_handles(group, handle_maps.get(method, {}), delegate_map, num_outs)
        nodes = by_method[method] if method in by_method else _method_nodes(rec, method, infos, enable_module_hierarchy)
        if nodes is not None:
            attach_graph_metadata(group, nodes)
    if any(v is not None for v in by_method.values()):
        checked, bad = op_name_mismatches(blocks)
        if bad and len(bad) * 2 > checked:
            raise MismatchedArtifactsError(
                f"ETRecord and ETDump {etdump_path!r} do not describe the same model: {len(bad)} of "
                f"{checked} kernel events ran a different op than the ETRecord says, e.g. {bad[0]}\n"
                "Pass the ETRecord written when this exact program was exported and lowered.")
        notes += [f"kernel event {b}: op name disagrees with the ETRecord" for b in bad]
    # numdiff's record tells without unpickling the outputs; the reference's holds them already
    if rec.has("_reference_outputs") if isinstance(rec, ETRecord) else rec._reference_outputs is not None:
        for block in blocks:
            if block.bundled_input_index is not None:
                block.set_reference_output_loader(_ReferenceOutput(rec, block.bundled_input_index, block.name))
    return notes


def edge_op_nodes(rec: ETRecordLike, method: str = FORWARD) -> list[OpNodeInfo] | None:
    """The Edge program's op nodes: from the JSON when numdiff parsed the record (no torch needed)."""
    infos = rec.op_nodes(method) if isinstance(rec, ETRecord) else None
    if infos is not None:
        return infos
    edge = rec.edge_dialect_program
    if isinstance(edge, dict):
        program = edge.get(method)
    elif method != FORWARD and edge is not None:
        return None
    else:
        program = edge
    return None if program is None else op_nodes_from_graph(program.graph_module)


def _graph_op_nodes(rec: ETRecordLike, name: str) -> list[OpNodeInfo]:
    """The op nodes of the ``graph_map`` entry ``name`` (``reference_graph_name``)."""
    graphs = rec.graph_map or {}
    if name not in graphs:
        raise UnknownNameError(
            f"reference_graph_name {name!r} is not a graph of the ETRecord\n"
            f"Use {EDGE_DIALECT_GRAPH_KEY!r} or one of its graph_map entries: {', '.join(graphs) or '(none)'}.")
    return op_nodes_from_graph(graphs[name].graph_module)


def _method_nodes(rec: ETRecordLike, method: str, infos: list[OpNodeInfo] | None,
                  hierarchy: bool) -> dict[object, list[OpNode]] | None:
    chosen = infos if infos is not None else edge_op_nodes(rec, method)
    return None if chosen is None else graph_op_nodes(chosen, hierarchy)


class _ReferenceOutput:
    """A block's reference output, read from the ETRecord when first asked for (it needs torch)."""

    def __init__(self, rec: ETRecordLike, index: int, block: str) -> None:
        self.rec, self.index, self.block = rec, index, block

    def __call__(self) -> ProgramOutput | None:
        outputs = (self.rec._reference_outputs or {}).get(FORWARD, [])
        if -len(outputs) <= self.index < len(outputs):
            output: ProgramOutput = outputs[self.index]
            return output
        warnings.warn(f"block {self.block!r}: bundled input {self.index} has no reference output "
                      f"(the ETRecord holds {len(outputs)})", stacklevel=3)
        return None


def in_module(stack: Mapping[str, object] | None, module_name: str) -> bool:
    if not stack:
        return False
    for key, value in stack.items():
        path = value[0] if isinstance(value, (tuple, list)) and value else value
        if key == module_name or path == module_name:
            return True
    return False


def load_etrecord(etrecord: object) -> ETRecordLike | None:
    if etrecord is None:
        return None
    if isinstance(etrecord, (str, os.PathLike)):
        return parse_etrecord(etrecord)  # (the Inspector pauses the cyclic collector around its loading)
    if isinstance(etrecord, ETRecord):
        return etrecord  # (hasattr would build its Edge program now, which the profiling view never needs)
    if hasattr(etrecord, "_debug_handle_map") and hasattr(etrecord, "edge_dialect_program"):
        return etrecord  # type: ignore[return-value]  # numdiff's or the reference's record (duck-typed, as before)
    raise UsageTypeError(f"Unsupported ETRecord type: etrecord must be a path or a parsed ETRecord, not "
                         f"{type(etrecord).__name__}\n"
                         "Pass the .bin path the export step wrote, or numdiff.parse_etrecord(path).")


def logs_tensors(dump: ETDump) -> bool:
    return any(bool((r.columns.kind == EventKind.DEBUG).any()) for r in dump.run_data)


def _check_delegates(blocks: list[EventBlock], handle_map: Mapping[str, object],
                     delegate_map: Mapping[Any, Any] | None, etdump_path: str | None) -> None:
    """The runtime's delegate calls are the ETRecord's: an instruction the runtime ran as a delegate
    call is a delegate of the same backend in the ETRecord's ``delegate_map``, and a kernel call is
    not. The same model lowered another way (portable, or with a partitioner) shares instruction
    ids and op names often enough to pass the checks above, so the calls themselves are compared."""
    if not isinstance(delegate_map, Mapping):
        return  # an ETRecord without a delegate map says nothing
    delegates = {str(k): v for k, v in delegate_map.items()}
    for block in blocks:
        for ev in block._link_records():
            if not delegates and ev.name != DELEGATE_CALL:
                continue  # no delegate in the ETRecord: only a delegate call can disagree
            iid = ev._instruction_id
            if iid is None or iid < 0 or ev.is_delegated_op or str(iid) not in handle_map:
                continue
            entry = delegates.get(str(iid))
            recorded = entry.get("name") if isinstance(entry, Mapping) else None
            if ev.name == DELEGATE_CALL and entry is None:
                what = f"the runtime called a delegate at instruction {iid}, where the ETRecord's program runs a kernel"
            elif ev.name == DELEGATE_CALL and isinstance(recorded, str) and ev.delegate_backend_name \
                    and recorded != ev.delegate_backend_name:
                what = (f"the runtime called a {ev.delegate_backend_name} delegate at instruction {iid}, where the "
                        f"ETRecord's program calls {recorded}")
            elif ev.name.startswith("native_call_") and entry is not None:
                what = (f"the runtime ran kernel {ev.name} at instruction {iid}, where the ETRecord's program calls a "
                        f"{recorded or 'delegate'} delegate")
            else:
                continue
            raise MismatchedArtifactsError(
                f"ETRecord and ETDump {etdump_path!r} do not describe the same program: {what}\n"
                "Pass the ETRecord written when this exact program (.pte) was exported and lowered (the same model "
                "lowered another way, e.g. with or without a partitioner, is another program).")


def _check_same_model(blocks: list[EventBlock], handle_map: Mapping[str, object] | None,
                      etdump_path: str | None) -> None:
    """The ETDump's instructions are the ETRecord's: the kernel and delegate calls the runtime ran have
    entries in the ETRecord's ``debug_handle_map``. Not all of them do (a ``cond`` branch's kernels,
    3 of 10 in the real_cond fixture), so the files disagree when most do not."""
    seen: set[int] = set()
    calls: set[tuple[str, int]] = set()  # (name, instruction) of kernel and delegate calls
    for block in blocks:
        for ev in block._link_records():
            if ev._instruction_id is None or ev._instruction_id < 0 or ev.name in FRAMEWORK_EVENTS:
                continue
            seen.add(ev._instruction_id)
            if not ev.is_delegated_op and (ev.name == DELEGATE_CALL or ev.name.startswith("native_call_")):
                calls.add((ev.name, ev._instruction_id))
    ids = {str(iid) for iid in seen}
    if ids and handle_map is not None and not ids & set(handle_map):
        raise MismatchedArtifactsError(
            f"ETRecord and ETDump {etdump_path!r} do not describe the same model: none of the "
            f"{len(ids)} instruction ids in the ETDump appear in the ETRecord's debug_handle_map\n"
            "Pass the ETRecord written when this exact program was exported and lowered."
        )
    if handle_map is None:
        return
    unknown = sorted((iid, name) for name, iid in calls if str(iid) not in handle_map)
    if len(unknown) * 2 > len(calls):
        iid, name = unknown[0]
        raise MismatchedArtifactsError(
            f"ETRecord and ETDump {etdump_path!r} do not describe the same model: {len(unknown)} of the "
            f"{len(calls)} kernel and delegate calls the runtime ran are instructions the ETRecord's "
            f"debug_handle_map does not have, e.g. {name} (instruction {iid})\n"
            "Pass the ETRecord written when this exact program was exported and lowered."
        )
