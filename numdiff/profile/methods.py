"""Which program method each event block executed, and per-method symbolication.

The runtime names every execution block ``"Execute"`` and writes no method name into the ETDump
(a run's ``RunData`` holds only ``name``, ``bundled_input_index``, allocators and events). With
an ETRecord, numdiff tells the methods apart by their instructions: a method's
``debug_handle_map`` lists its instruction ids, its Edge program gives each instruction's ops,
and a portable kernel event is named after the op it runs (``native_call_tanh.out``). Each
execution block is given the method whose ops agree with most of its kernel events; a block that
two methods explain equally well (identical programs) keeps ``method_name=None``, with a note.

With one method in the ETRecord every block that ran ops gets it, without any matching. Blocks
holding only the runtime's framework steps (``Method::init``, ``Program::load_method``) are not
tied to a method (``None``): the runtime does not say which method they loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numdiff._core.events import FRAMEWORK_EVENTS
from numdiff.profile.symbolicate import FORWARD, OpNode
from numdiff.profile.events import EventBlock

__all__ = ["assign_methods", "ops_agree"]


def ops_agree(event_name: str, op_types: list[str]) -> bool:
    """Whether a portable kernel event's name fits one of the graph op types it is mapped to."""
    kernel = event_name[len("native_call_"):].split(".")[0]
    bases = {t.split(".")[-2] if t.count(".") >= 1 else t for t in op_types}
    return any(b and (b in kernel or kernel in b) for b in bases)


def _runs_ops(block: EventBlock) -> bool:
    return any(ev.name not in FRAMEWORK_EVENTS for ev in block._link_records())


def _score(block: EventBlock, handle_map: Mapping[str, Any], nodes: Mapping[Any, list[OpNode]]) -> int:
    score = 0
    for ev in block._link_records():
        if ev._instruction_id is None or ev.is_delegated_op or not ev.name.startswith("native_call_"):
            continue
        handles = handle_map.get(str(ev._instruction_id))
        if handles is None:
            score -= 1
            continue
        listed = [handles] if isinstance(handles, int) else list(handles)
        op_types = [n.op_type for h in listed for n in nodes.get(h, ())]
        score += 1 if ops_agree(ev.name, op_types) else -1
    return score


def assign_methods(
    blocks: list[EventBlock],
    handle_maps: Mapping[str, Mapping[str, Any]],
    nodes_by_method: Mapping[str, Mapping[Any, list[OpNode]] | None],
) -> list[str]:
    """Set ``method_name`` on every block that ran ops; return notes on blocks left undecided.

    Args:
        blocks: The Inspector's event blocks.
        handle_maps: The ETRecord's ``debug_handle_map`` (method -> instruction id -> handles).
        nodes_by_method: ``{method: {debug handle: [OpNode]}}`` from each method's Edge program
            (None for a method whose graph is unavailable).
    """
    methods = list(handle_maps) or [FORWARD]
    notes: list[str] = []
    for index, block in enumerate(blocks):
        if not _runs_ops(block):
            continue
        if len(methods) == 1:
            block.method_name = methods[0]
            continue
        scores = {m: _score(block, handle_maps[m], nodes_by_method.get(m) or {}) for m in methods}
        best = max(scores.values())
        winners = [m for m, s in scores.items() if s == best]
        if len(winners) == 1:
            block.method_name = winners[0]
        else:
            notes.append(f"event block {index} ({block.name!r}): its ops fit methods {winners} equally; "
                         "method_name left None (symbolicated as 'forward')")
    return notes
