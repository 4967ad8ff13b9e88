"""``Event`` and ``EventBlock``: the profiling view's public records, as in the reference.

These two stay ordinary (mutable) dataclasses because the reference's are, and code written
against ``executorch.devtools.inspector`` assigns to their fields; everything else in numdiff is
frozen. Field names, defaults and DataFrame columns match the reference.

Equality is by value, as for the reference's dataclasses, and, like them (``eq=True``, not
frozen), the records are unhashable. Where the reference's generated ``__eq__`` would raise
("Boolean value of Tensor with more than one value is ambiguous") on logged tensors, numdiff
compares them by value: same type, dtype, shape and elements (NaN never equals NaN, unless it is
the same tensor object, as in a tuple comparison). numdiff's own per-run loaders are not compared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import pandas as pd

from numdiff._core.types import ProgramOutput
from numdiff.profile.cells import PERF_COLUMNS, op_types_cell
from numdiff.profile.frames import block_dataframe
from numdiff.profile.perf import PerfData
from numdiff.profile.timescale import TimeScale

if TYPE_CHECKING:
    from numdiff.profile._columns import BlockColumns

__all__ = ["Event", "EventBlock", "DelegateMetadataParser", "DelegateTimeScaleConverter", "logged_runs"]

DelegateMetadataParser = Callable[[list[str]], Union[list[str], dict[str, Any]]]
DelegateTimeScaleConverter = Callable[[Union[int, str], Union[int, float]], Union[int, float]]


def _same(a: Any, b: Any) -> bool:  # any two values, compared by duck type
    """Value equality that also works for tensors and arrays held in lists, tuples and dicts."""
    if a is b:
        return True
    if type(a) is not type(b):
        return bool(_is_number(a) and _is_number(b) and a == b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    if type(a).__module__.startswith("torch") and hasattr(a, "dtype") and hasattr(a, "shape"):
        import torch  # already imported: a tensor exists

        return bool(a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))
    return bool(a == b)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fields_equal(a: object, b: object, names: tuple[str, ...]) -> bool:
    return all(_same(getattr(a, name), getattr(b, name)) for name in names)


@dataclass
class Event:
    """One runtime event (an instruction, a delegate-internal op, or a framework step) across runs.

    Attributes:
        name: Event name (operator name, delegate debug identifier, or framework step).
        perf_data: Durations across runs, or None if the event was not profiled.
        op_types: Graph op types the event maps to (from the ETRecord's Edge program).
        delegate_debug_identifier: Identifier inside a delegate (int or str), or None.
        debug_handles: Graph debug handle(s) of the event, from the ETRecord.
        num_outputs: Number of outputs of the instruction (delegate calls may have several).
        stack_traces: ``{node name: stack trace}`` of the graph nodes the event maps to.
        module_hierarchy: ``{node name: nn_module_stack}`` of those nodes.
        is_delegated_op: Whether the event happened inside a delegate.
        delegate_backend_name: Backend of a ``DELEGATE_CALL`` or delegated event.
        debug_data: Values the runtime logged for the event (intermediate outputs).
    """

    name: str
    perf_data: PerfData | None = None
    op_types: list[str] = dataclasses.field(default_factory=list)
    delegate_debug_identifier: int | str | None = None
    debug_handles: int | list[int] | tuple[int, ...] | None = None
    num_outputs: int = 1
    stack_traces: dict[str, str | None] = dataclasses.field(default_factory=dict)
    module_hierarchy: dict[str, Any] = dataclasses.field(default_factory=dict)
    is_delegated_op: bool | None = None
    delegate_backend_name: str | None = None
    _delegate_debug_metadatas: list[str] = dataclasses.field(default_factory=list)
    debug_data: ProgramOutput = dataclasses.field(default_factory=list)
    _instruction_id: int | None = None
    _delegate_metadata_parser: DelegateMetadataParser | None = None
    _delegate_time_scale_converter: DelegateTimeScaleConverter | None = None
    _start_time: list[int | float] | None = None
    _run_debug_data: Sequence[Callable[[], ProgramOutput]] | None = dataclasses.field(
        default=None, repr=False, compare=False)

    def __eq__(self, other: object) -> bool:
        """Field by field, by value (tensors included); the per-run loaders are not compared."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _fields_equal(self, other, _EVENT_COMPARED)

    __hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as the reference's

    def debug_data_for_run(self, run: int) -> ProgramOutput:
        """The values logged in the ``run``-th run of the block (``debug_data`` holds run 0's).

        numdiff addition: the reference refuses dumps whose runs logged different values.
        """
        if self._run_debug_data is None:
            if run == 0:
                return self.debug_data
            raise IndexError(f"event {self.name!r} has debug data for 1 run; asked for run {run}")
        return self._run_debug_data[run]()

    @property
    def delegate_debug_metadatas(self) -> list[str] | dict[str, Any]:
        """Delegate metadata, parsed by the Inspector's ``delegate_metadata_parser`` if one was given."""
        if not self.is_delegated_op or self._delegate_metadata_parser is None:
            return self._delegate_debug_metadatas
        return self._delegate_metadata_parser(self._delegate_debug_metadatas)

    @property
    def raw_delegate_debug_metadatas(self) -> list[str]:
        return self._delegate_debug_metadatas

    @property
    def start_time(self) -> list[int | float] | None:
        """Start timestamps of the samples, in the runtime's raw units."""
        return self._start_time

    def asdict(self, _units: str = "") -> dict[str, Any]:
        """The event as one DataFrame row (list-valued cells wrapped in a one-element list)."""
        perf = self.perf_data
        row: dict[str, Any] = {"event_name": self.name, "raw": [perf.raw if perf else None]}
        for col in PERF_COLUMNS:
            row[col + _units] = getattr(perf, col) if perf else None
        ops = self.op_types
        row["op_types"] = [op_types_cell(ops)]
        row["delegate_debug_identifier"] = self.delegate_debug_identifier
        row["stack_traces"] = [self.stack_traces]
        row["module_hierarchy"] = [self.module_hierarchy]
        row["is_delegated_op"] = self.is_delegated_op
        row["delegate_backend_name"] = self.delegate_backend_name
        row["debug_data"] = [self.debug_data]
        row["start_time"] = [self._start_time]
        return row

    def to_dataframe(self, _units: str = "") -> pd.DataFrame:
        return pd.DataFrame(self.asdict(_units=_units))


@dataclass
class EventBlock:
    """The events of one kind of run (model loading, or executions of a method with one signature).

    Runs whose event sequences match are merged into one block, each event holding one sample per
    run.

    Attributes:
        name: Run name from the ETDump ("Method::init", "Execute", ...).
        events: The block's events, in runtime order.
        bundled_input_index: Bundled input index the runs used (-1 from plain runs).
        run_output: Program outputs the runtime logged.
        reference_output: Expected outputs from the ETRecord, if any.
        method_name: The program method the runs executed (``"forward"``, ``"encode"``...), or
            None when it cannot be told (no ETRecord). numdiff addition: the runtime names every
            execution block ``"Execute"``, so ``name`` alone cannot tell the methods of a
            multi-method program apart.
    """

    name: str
    events: list[Event] = dataclasses.field(default_factory=list)
    source_time_scale: TimeScale = TimeScale.NS
    target_time_scale: TimeScale = TimeScale.MS
    bundled_input_index: int | None = None
    run_output: ProgramOutput | None = None
    reference_output: ProgramOutput | None = None
    method_name: str | None = None

    def __eq__(self, other: object) -> bool:
        """Field by field, by value (events, outputs and tensors included)."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _fields_equal(self, other, _BLOCK_COMPARED)

    __hash__ = None  # type: ignore[assignment]

    def to_dataframe(self, include_units: bool = False, include_delegate_debug_data: bool = False) -> pd.DataFrame:
        """One row per event, prefixed with ``event_block_name``.

        Args:
            include_units: Append the target unit to the perf column names. Defaults to False.
            include_delegate_debug_data: Add the delegate metadata columns. Defaults to False.
        """
        return block_dataframe(self, self._event_columns(), include_units, include_delegate_debug_data)

    def _set_columns(self, columns: BlockColumns, loader: Callable[[], list[Event]]) -> None:
        """Keep the block's events in columns; ``loader`` makes the ``Event`` records on first access.

        ``columns`` (a ``numdiff.profile._columns.BlockColumns``) stays available to the tabular
        views until ``events`` is read or assigned.
        """
        self.__dict__["_events_loader"] = loader
        self.__dict__["_columns"] = columns

    def _event_columns(self) -> BlockColumns | None:
        """The block's events in columns, or None once ``events`` was read or assigned."""
        columns: BlockColumns | None = self.__dict__.get("_columns")
        return columns

    def _link_records(self) -> Sequence[Any]:
        """What linking to the ETRecord reads and sets: the ``Event`` records once made, else one
        ``SlotLink`` per event on the columns (copied onto the records when they are made)."""
        cols = self.__dict__.get("_columns")
        return self.events if cols is None else cols.slot_links()

    def set_reference_output_loader(self, loader: Callable[[], ProgramOutput | None]) -> None:
        """Have ``reference_output`` read on first access (ETRecord pickles need torch)."""
        self.__dict__["_reference_loader"] = loader


def logged_runs(event: object) -> int:
    """How many runs logged values of their own for ``event`` (1 when every run logged the same values,
    or for an event that is not numdiff's): the runs ``Event.debug_data_for_run`` answers for.

    A function beside the record rather than a property on it, so that ``Event``'s public surface stays
    the reference's (the drop-in's frozen signatures).
    """
    loaders = event._run_debug_data if isinstance(event, Event) else None
    return len(loaders) if loaders else 1


def _get_reference_output(self: EventBlock) -> ProgramOutput | None:
    loader = self.__dict__.get("_reference_loader")
    if loader is not None:  # kept until it succeeds: a failed read fails again, never reads as None
        self.__dict__["_reference_output"] = loader()
        del self.__dict__["_reference_loader"]
    value: ProgramOutput | None = self.__dict__.get("_reference_output")
    return value


def _set_reference_output(self: EventBlock, value: ProgramOutput | None) -> None:
    self.__dict__.pop("_reference_loader", None)
    self.__dict__["_reference_output"] = value


#: The key under which an ``Event`` made from a block's columns keeps its start times as a numpy row.
START_ROW = "_start_row"


def _get_start_time(self: Event) -> list[int | float] | None:
    row = self.__dict__.pop(START_ROW, None)
    if row is not None:
        self.__dict__["_start_time_value"] = row.tolist()
    value: list[int | float] | None = self.__dict__.get("_start_time_value")
    return value


def _set_start_time(self: Event, value: list[int | float] | None) -> None:
    self.__dict__.pop(START_ROW, None)
    self.__dict__["_start_time_value"] = value


def _get_events(self: EventBlock) -> list[Event]:
    loader = self.__dict__.get("_events_loader")
    if loader is not None:  # kept until it succeeds (see _get_reference_output)
        self.__dict__["_events"] = loader()
        del self.__dict__["_events_loader"]
        self.__dict__.pop("_columns", None)
    value: list[Event] = self.__dict__["_events"]
    return value


def _set_events(self: EventBlock, value: list[Event]) -> None:
    self.__dict__.pop("_events_loader", None)
    self.__dict__.pop("_columns", None)
    self.__dict__["_events"] = value


_EVENT_COMPARED = tuple(f.name for f in dataclasses.fields(Event) if f.compare)
_BLOCK_COMPARED = tuple(f.name for f in dataclasses.fields(EventBlock) if f.compare)

# A property over the dataclass field: the generated __init__ assigns through the setter, and the
# Inspector can install a loader so that building the profiling view never unpickles tensors.
EventBlock.events = property(_get_events, _set_events)  # type: ignore[assignment]
# Likewise each event's start times: the Inspector's events keep them as a numpy row until read, so
# walking every event of a large dump makes no Python ints.
Event._start_time = property(_get_start_time, _set_start_time)  # type: ignore[assignment]
EventBlock.reference_output = property(_get_reference_output, _set_reference_output)  # type: ignore[assignment]
