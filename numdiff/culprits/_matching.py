"""Account for every AOT node and every runtime output: matched (how) or unmatched (why)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from numdiff._core.types import DebugHandle
from numdiff.align import AlignmentNote, RuntimeOutput
from numdiff.culprits.report import MatchRecord

__all__ = ["explain_matching"]


def explain_matching(
    graph: torch.fx.Graph,
    notes: tuple[AlignmentNote, ...],
    paired_runtime: list[DebugHandle],
    runtime_outputs: Mapping[DebugHandle, RuntimeOutput],
    keeper: Mapping[DebugHandle, str],
    row_of_node: Mapping[str, int],
    transforms: Mapping[str, str],
    aliased: frozenset[str] = frozenset(),
) -> tuple[MatchRecord, ...]:
    """One :class:`MatchRecord` per captured AOT node and per runtime output.

    ``aliased`` names the nodes the program aliased (:mod:`numdiff.gap.aliased`): their status is
    :data:`numdiff.gap.aliased.ALIASED` and the detail says why the runtime logged nothing for them.
    """
    from numdiff.gap.aliased import ALIASED, ALIASED_REASON

    from numdiff.capture import handle_key, is_captured_node
    from numdiff.capture.nodes import DEBUG_HANDLE_KEY

    runtime_ids: dict[int, DebugHandle] = {}
    for handle in runtime_outputs:
        for item in handle:
            runtime_ids.setdefault(item, handle)
    reasons: dict[DebugHandle, list[str]] = {}
    for note in notes:
        for noted in {note.aot_handle, note.runtime_handle}:
            if noted is not None:
                reasons.setdefault(noted, []).append(f"{note.kind.value}: {note.detail}")
    records: list[MatchRecord] = []
    for node in graph.nodes:
        if not is_captured_node(node):
            continue
        handle = handle_key(node.meta[DEBUG_HANDLE_KEY])
        if node.name in row_of_node:
            done = [f"{k.split('/')[1]}: {v}" if k.split("/")[1] != "None" else v
                    for k, v in transforms.items() if k.split("/")[0] == node.name]
            records.append(MatchRecord("aot", node.name, handle, "matched",
                                       f"row {row_of_node[node.name]}; transform {'; '.join(done)}"))
            continue
        shared = next((runtime_ids[i] for i in handle if i in runtime_ids), None)
        kept = keeper.get(handle)
        if shared is None and node.name in aliased:
            records.append(MatchRecord("aot", node.name, handle, ALIASED, ALIASED_REASON))
        elif shared is None:
            records.append(MatchRecord("aot", node.name, handle, "unmatched",
                                       "no runtime output shares its debug handle (the runtime did not log it)"))
        elif kept is not None and kept != node.name:
            records.append(MatchRecord("aot", node.name, handle, "replayed",
                                       f"shares handle {handle} with {kept}, whose output is the one compared; "
                                       "replayed as part of that row"))
        elif handle in reasons or shared in reasons:
            why = "; ".join(reasons.get(handle, []) or reasons.get(shared, []))
            records.append(MatchRecord("aot", node.name, handle, "unmatched", why))
        else:
            records.append(MatchRecord("aot", node.name, handle, "replayed",
                                       f"inside runtime handle {shared}, which logs only its last output "
                                       "(a delegate or merged group): replayed as part of that row"))
    pair_counts: dict[DebugHandle, int] = {}
    for handle in paired_runtime:
        pair_counts[handle] = pair_counts.get(handle, 0) + 1
    for handle, output in runtime_outputs.items():
        name = output.op_name or "event"
        if handle in pair_counts:
            count = pair_counts[handle]
            records.append(MatchRecord("runtime", name, handle, "matched", f"{count} pair(s)"))
        else:
            why = "; ".join(reasons.get(handle, [])) or "no AOT output shares its debug handle"
            records.append(MatchRecord("runtime", name, handle, "unmatched", why))
    return tuple(records)
