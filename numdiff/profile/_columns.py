"""A block's events kept in columns until a caller asks for ``Event`` objects.

The builder (``numdiff.profile.build``) does every check and every read that can fail while the
Inspector is constructed, and leaves here what is needed to make the ``Event`` records: one entry
per slot for names and identifiers, and runs x slots matrices for start times and durations. The
records are made on the first access to ``EventBlock.events`` (``materialise``), with the same
values the eager path gave: the durations are computed with the same numpy operations, element by
element, and converted to Python floats the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from numdiff._core.gc_pause import gc_paused
from numdiff._core.types import ProgramOutput
from numdiff.profile.events import START_ROW, DelegateMetadataParser, DelegateTimeScaleConverter, Event
from numdiff.profile.perf import PerfData

__all__ = ["BlockColumns", "SlotDebug", "SlotLink", "materialise"]


class SlotLink:
    """What linking to the ETRecord reads and sets on one slot, before any ``Event`` is made.

    It has the ``Event`` attributes the symbolication steps use (``numdiff.profile.symbolicate``,
    ``numdiff.profile.methods``), so they run on a block's columns as on its records; ``materialise``
    copies what they set onto the records.
    """

    __slots__ = ("name", "_instruction_id", "delegate_debug_identifier", "is_delegated_op", "debug_handles",
                 "num_outputs", "delegate_backend_name", "op_types", "stack_traces", "module_hierarchy")

    def __init__(self, name: str, instruction_id: int, identifier: int | str | None, delegated: bool | None) -> None:
        self.name, self._instruction_id = name, instruction_id
        self.delegate_debug_identifier, self.is_delegated_op = identifier, delegated
        self.debug_handles: Any = None
        self.num_outputs = 1
        self.delegate_backend_name: str | None = None
        self.op_types: list[str] = []
        self.stack_traces: dict[str, str | None] = {}
        self.module_hierarchy: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class SlotDebug:
    """The values a slot's debug events logged (run 0's), and per-run loaders when runs > 1."""

    debug_data: ProgramOutput
    run_loaders: Sequence[Callable[[], ProgramOutput]] | None


@dataclass(frozen=True, slots=True)
class BlockColumns:
    """The events of one block, column-wise (index ``j`` is the ``j``-th event of the block).

    Attributes:
        names: ``Event.name`` of each slot.
        instruction_ids: Instruction id of each slot.
        identifiers: Delegate debug identifier (int or str) of each slot, or None.
        delegated: ``Event.is_delegated_op`` of each slot (None: never set, as the eager path).
        profiled: Whether the slot has a profile event (then it has durations and start times).
        durations: runs x slots durations in the target time scale (NaN where not profiled).
        start_times: runs x slots raw start timestamps.
        metadata: Delegate debug metadata per slot (only slots that have some).
        debug: Logged values per slot (only slots with debug events).
    """

    names: list[str]
    instruction_ids: list[int]
    identifiers: list[int | str | None]
    delegated: list[bool | None]
    profiled: npt.NDArray[np.bool_]
    durations: npt.NDArray[np.float64]
    start_times: npt.NDArray[np.uint64]
    metadata: dict[int, list[str]]
    debug: dict[int, SlotDebug]
    parser: DelegateMetadataParser | None
    converter: DelegateTimeScaleConverter | None
    links: list[SlotLink] = field(default_factory=list)  # filled by ``slot_links`` when an ETRecord is linked

    def __len__(self) -> int:
        return len(self.names)

    def slot_links(self) -> list[SlotLink]:
        """One ``SlotLink`` per slot, made on the first call (the same objects afterwards)."""
        if not self.links and self.names:
            self.links.extend(SlotLink(n, i, d, g) for n, i, d, g in zip(
                self.names, self.instruction_ids, self.identifiers, self.delegated, strict=True))
        return self.links


def materialise(cols: BlockColumns) -> list[Event]:
    """The ``Event`` records of a block, as the eager builder made them.

    Made with the cyclic collector paused (``numdiff._core.gc_pause``): the records hold no cycles,
    and the collections their dicts and lists would trigger walk every object of the process.
    """
    with gc_paused():
        return _records(cols)


def _records(cols: BlockColumns) -> list[Event]:
    durations = np.ascontiguousarray(cols.durations.T)  # slots x runs; PerfData makes floats on first read
    starts = np.ascontiguousarray(cols.start_times.T)  # slots x runs; Python ints on first read
    perfs = PerfData._of_rows(durations)
    links = cols.links
    events = []
    new, setdict = Event.__new__, object.__setattr__
    metadata, debug, identifiers = cols.metadata, cols.debug, cols.identifiers
    # The attributes ``Event(name=..., ...)`` sets, in its order: each record's dict is a copy of this
    # one (the dataclass's __init__ costs several times more per event) with its own mutable values;
    # what differs is set below as the eager path did.
    template: dict[str, Any] = {
        "name": "", "perf_data": None, "op_types": None, "delegate_debug_identifier": None, "debug_handles": None,
        "num_outputs": 1, "stack_traces": None, "module_hierarchy": None, "is_delegated_op": None,
        "delegate_backend_name": None, "_delegate_debug_metadatas": None, "debug_data": None, "_instruction_id": None,
        "_delegate_metadata_parser": cols.parser, "_delegate_time_scale_converter": cols.converter,
        "_start_time_value": None, "_run_debug_data": None}
    for j, (name, iid, delegated, profiled, start) in enumerate(zip(
            cols.names, cols.instruction_ids, cols.delegated, cols.profiled.tolist(), starts, strict=True)):
        state = template.copy()
        state["name"], state["_instruction_id"] = name, iid
        if delegated is not None:
            state["is_delegated_op"] = delegated
            state["delegate_debug_identifier"] = identifiers[j]
        if links:
            link = links[j]
            state["debug_handles"], state["num_outputs"] = link.debug_handles, link.num_outputs
            state["delegate_backend_name"] = link.delegate_backend_name
            state["op_types"], state["stack_traces"] = link.op_types, link.stack_traces
            state["module_hierarchy"] = link.module_hierarchy
        else:
            state["op_types"], state["stack_traces"], state["module_hierarchy"] = [], {}, {}
        if profiled:
            state["perf_data"] = perfs[j]
        meta = metadata.get(j) if metadata else None
        state["_delegate_debug_metadatas"] = [] if meta is None else meta
        dbg = debug.get(j) if debug else None
        if dbg is None:
            state["debug_data"] = []
        else:
            state["debug_data"] = dbg.debug_data
            if dbg.run_loaders is not None:
                state["_run_debug_data"] = dbg.run_loaders
        if profiled:  # the start times as a numpy row until read (see numdiff.profile.events)
            state[START_ROW] = start
        ev = new(Event)
        setdict(ev, "__dict__", state)
        events.append(ev)
    return events
