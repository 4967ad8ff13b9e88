"""Which program an analysis is of: a signature of the ETRecord's Edge program(s).

Two analyses are comparable (``numdiff diff``, the service's compare) only when they analysed one
program. The signature is a SHA-256 over each method's op targets in graph order (method names
sorted), nothing else: not the weights, not the file names or paths, not debug handles or source
lines. So two runs of one program on two devices share it, and a rebuilt program with another
graph (an op added, removed, replaced or moved) does not. Ops inside a delegate's lowered module are
not in the Edge graph: a program whose delegate payload alone changed keeps its signature.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from numdiff.analysis.records import ProgramSignature
from numdiff.errors import NumdiffError

if TYPE_CHECKING:
    from numdiff._core.etrecord import ETRecordLike

__all__ = ["program_signature", "signature_of_ops"]


def signature_of_ops(ops_by_method: dict[str, list[str]]) -> ProgramSignature:
    """The signature of programs given as ``{method: [op target, ...]}`` in graph order."""
    canonical = json.dumps({m: ops_by_method[m] for m in sorted(ops_by_method)}, separators=(",", ":"))
    return ProgramSignature(sha256=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
                            methods={m: len(ops) for m, ops in sorted(ops_by_method.items())})


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
    return signature_of_ops(ops) if ops else None
