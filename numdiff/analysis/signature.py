"""Which program an analysis is of: a signature of the ETRecord's Edge program(s).

Two analyses are comparable (``numdiff diff``, the service's compare) only when they analysed one
program. The signature is a SHA-256 over each method's op targets in graph order (method names
sorted), nothing else: not the weights, not the file names or paths, not debug handles or source
lines. So two runs of one program on two devices share it, and a rebuilt program with another
graph (an op added, removed, replaced or moved) does not. Ops inside a delegate's lowered module are
not in the Edge graph, and the ETRecord's Edge program is the one before partitioning (one model
lowered for the portable kernels and for XNNPACK has one Edge graph), so ``whole_sha256`` also covers
the ATen program's op targets and each method's instructions as lowered (debug handles and delegate
backend per instruction, from the ETRecord's maps). Analyses written before it have only ``sha256``:
:func:`same_program` compares the fullest signature both sides have.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from numdiff.analysis.records import ProgramSignature
from numdiff.errors import NumdiffError

if TYPE_CHECKING:
    from numdiff._core.etrecord import ETRecordLike

__all__ = ["program_signature", "same_program", "signature_of_ops"]


def _sha256(ops_by_method: dict[str, list[str]]) -> str:
    canonical = json.dumps({m: ops_by_method[m] for m in sorted(ops_by_method)}, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def signature_of_ops(ops_by_method: dict[str, list[str]],
                     aten_ops: dict[str, list[str]] | None = None,
                     instructions: dict[str, list[str]] | None = None) -> ProgramSignature:
    """The signature of programs given as ``{method: [op target, ...]}`` in graph order; ``aten_ops``
    (the ATen programs' op targets, likewise) and ``instructions`` (each method's instructions as
    lowered: debug handles and delegate backend per instruction) add ``whole_sha256``."""
    whole = None if not (aten_ops or instructions) else _sha256(
        {**{f"edge:{m}": o for m, o in ops_by_method.items()}, **{f"aten:{m}": o for m, o in (aten_ops or {}).items()},
         **{f"instructions:{m}": o for m, o in (instructions or {}).items()}})
    return ProgramSignature(sha256=_sha256(ops_by_method), whole_sha256=whole,
                            methods={m: len(ops) for m, ops in sorted(ops_by_method.items())})


def same_program(a: ProgramSignature, b: ProgramSignature) -> bool:
    """Whether two signatures are of one program, by the fullest signature both have."""
    if a.whole_sha256 is not None and b.whole_sha256 is not None:
        return a.whole_sha256 == b.whole_sha256
    return a.sha256 == b.sha256


def _instructions(rec: ETRecordLike) -> dict[str, list[str]]:
    """Each method's instructions as lowered: instruction id, its debug handles and, for a delegate
    call, the backend (from the ETRecord's maps). The Edge program an ETRecord holds is the one
    before partitioning, so the same model lowered for the portable kernels and for XNNPACK has one
    Edge graph; these maps tell the two programs apart."""
    handle_maps = rec._debug_handle_map or {}
    delegate_maps = rec._delegate_map or {}
    out: dict[str, list[str]] = {}
    for method, handles in handle_maps.items():
        delegates = delegate_maps.get(method) or {}
        rows = []
        for iid in sorted(handles, key=lambda k: (len(str(k)), str(k))):
            meta = delegates.get(iid)
            backend = meta.get("name", "") if isinstance(meta, Mapping) else ""
            rows.append(f"{iid}:{json.dumps(handles[iid], separators=(',', ':'))}:{backend}")
        out[str(method)] = rows
    return out


def _aten_ops(rec: ETRecordLike) -> dict[str, list[str]]:
    """The ATen program's op targets in graph order (``forward``), or {} without one: from its JSON
    while numdiff's record has not built it (building it costs about a second on a small Llama),
    else from the built graph."""
    from numdiff.profile.symbolicate import op_nodes_from_graph
    from numdiff.program.graph_meta import ProgramLoadError, op_nodes_from_json

    source = getattr(rec, "program_source", None)
    serialized = source("exported_program") if source is not None else None
    if serialized is not None:
        try:
            return {"forward": [info.op_type for info in op_nodes_from_json(serialized[0])]}
        except ProgramLoadError:
            return {}
    program = rec.exported_program
    if program is None:
        return {}
    return {"forward": [info.op_type for info in op_nodes_from_graph(program.graph_module)]}


def _ops_by_method(rec: ETRecordLike) -> dict[str, list[str]]:
    from numdiff.profile.symbolicate import op_nodes_from_graph
    from numdiff.schema.etrecord import ETRecord, edge_methods

    out: dict[str, list[str]] = {}
    if isinstance(rec, ETRecord):
        for method in edge_methods(rec):
            infos = rec.op_nodes(method)
            if infos is not None:
                out[method] = [info.op_type for info in infos]
        if out:
            return out
    edge = rec.edge_dialect_program
    programs = edge if isinstance(edge, dict) else {} if edge is None else {"forward": edge}
    for method, program in programs.items():
        out[method] = [info.op_type for info in op_nodes_from_graph(program.graph_module)]
    return out


def program_signature(rec: ETRecordLike | None) -> ProgramSignature | None:
    """The signature of the record's Edge program(s); None without a record, an Edge program, or one
    numdiff can read (the analysis is then compared unchecked, with a warning)."""
    if rec is None:
        return None
    try:
        ops = _ops_by_method(rec)
    except NumdiffError:
        return None
    if not ops:
        return None
    try:
        aten = _aten_ops(rec)
    except NumdiffError:
        aten = {}
    return signature_of_ops(ops, aten, _instructions(rec))
