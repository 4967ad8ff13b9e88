"""The ETDump file: typed records for the whole schema, and a fast, checked reader.

The runtime writes a size-prefixed FlatBuffer with file identifier ``ED00`` (schema:
``numdiff/schema/etdump.fbs``); the non-prefixed form is accepted too. ``read_etdump`` returns an
``ETDump`` whose runs keep their events in columns (``EventColumns``: one numpy array per field),
which is what the profiling view consumes; ``RunData.events`` materialises the typed records
(``Event`` with exactly one of ``ProfileEvent`` / ``AllocationEvent`` / ``DebugEvent``) on demand.

Example:
    >>> from numdiff.schema.etdump import read_etdump
    >>> dump = read_etdump("model.etdp")  # doctest: +SKIP
    >>> [run.name for run in dump.run_data]  # doctest: +SKIP
    ['Method::init', 'Execute']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from numdiff.schema._flatbuf import Buffer

__all__ = [
    "AllocationEvent",
    "Allocator",
    "DebugEvent",
    "ETDump",
    "Event",
    "EventColumns",
    "ETDumpDoc",
    "EventKind",
    "FILE_IDENTIFIER",
    "ProfileEvent",
    "RunData",
    "RunDoc",
    "ScalarType",
    "Tensor",
    "Value",
    "ValueType",
    "read_etdump",
    "read_value",
]

FILE_IDENTIFIER = b"ED00"


class ScalarType(IntEnum):
    """``executorch_flatbuffer.ScalarType``: the element type of a logged tensor."""

    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4X2 = 16
    QUINT2X4 = 17
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


class ValueType(IntEnum):
    """Which member of a ``Value`` is set."""

    NULL = 0
    INT = 1
    BOOL = 2
    FLOAT = 3
    DOUBLE = 4
    TENSOR = 5
    TENSOR_LIST = 6
    STRING = 7


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor's description; its bytes live in the debug buffer at ``offset``."""

    scalar_type: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass(frozen=True, slots=True)
class Value:
    """One logged value. ``output`` is None when the flag is absent from the file."""

    val: ValueType
    tensor: Tensor | None = None
    tensor_list: tuple[Tensor, ...] | None = None
    int_value: int | None = None
    float_value: float | None = None
    double_value: float | None = None
    bool_value: bool | None = None
    output: bool | None = None
    string_value: str | None = None


@dataclass(frozen=True, slots=True)
class ProfileEvent:
    name: str | None
    chain_index: int
    instruction_id: int
    delegate_debug_id_int: int
    delegate_debug_id_str: str | None
    delegate_debug_metadata: bytes | None
    start_time: int
    end_time: int


@dataclass(frozen=True, slots=True)
class DebugEvent:
    chain_index: int
    instruction_id: int
    debug_entry: Value | None
    delegate_debug_id_int: int
    delegate_debug_id_str: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class AllocationEvent:
    allocator_id: int
    allocation_size: int


@dataclass(frozen=True, slots=True)
class Event:
    """Exactly one of the three members is set in a well-formed dump."""

    profile_event: ProfileEvent | None = None
    allocation_event: AllocationEvent | None = None
    debug_event: DebugEvent | None = None


@dataclass(frozen=True, slots=True)
class Allocator:
    name: str | None


@dataclass(frozen=True, slots=True)
class RunDoc:
    """A run to write (see ``numdiff.schema.etdump_writer``); ``events=None`` writes no events vector."""

    name: str | None
    events: Sequence[Event] | None = ()
    bundled_input_index: int = -1
    allocators: Sequence[Allocator] = ()


@dataclass(frozen=True, slots=True)
class ETDumpDoc:
    """A whole dump to write, as typed records; ``ETDump.to_doc()`` gives one back."""

    version: int = 0
    run_data: Sequence[RunDoc] = ()


class EventKind(IntEnum):
    """What an event row in ``EventColumns`` holds (profile wins over debug over allocation)."""

    EMPTY = 0
    PROFILE = 1
    DEBUG = 2
    ALLOCATION = 3


@dataclass(frozen=True, slots=True)
class EventColumns:
    """A run's events, one array per field, row ``i`` being the ``i``-th event of the run.

    String fields hold ids into ``ETDump.strings`` (-1: absent). Integer fields hold the file's
    values, defaults included (-1 for an unset instruction or delegate id); a debug event's
    unsigned 64-bit ``chain_index`` is kept as its raw bits (``RunData.events`` restores it).
    """

    kind: npt.NDArray[np.int8]
    name: npt.NDArray[np.int32]
    chain_index: npt.NDArray[np.int64]
    instruction_id: npt.NDArray[np.int64]
    delegate_int: npt.NDArray[np.int64]
    delegate_str: npt.NDArray[np.int32]
    start_time: npt.NDArray[np.uint64]
    end_time: npt.NDArray[np.uint64]
    table: npt.NDArray[np.int64]  # position of the profile/debug/allocation table
    value: npt.NDArray[np.int64]  # position of a debug event's Value table, -1 if none
    output: npt.NDArray[np.bool_]  # debug value flagged as a program output

    def __len__(self) -> int:
        return int(self.kind.size)

    def slice(self, start: int, stop: int) -> EventColumns:
        """Rows ``start:stop`` of every column (views, not copies)."""
        return EventColumns(*(getattr(self, f.name)[start:stop] for f in fields(self)))


@dataclass(frozen=True, slots=True)
class RunData:
    """One block of events: model loading, or one execution of a method."""

    name: str | None
    bundled_input_index: int
    allocators: tuple[Allocator, ...]
    columns: EventColumns
    _dump: ETDump = field(repr=False, compare=False)
    #: False when the run has no ``events`` vector at all (the reference skips such runs, but
    #: keeps a run whose vector is empty as a block without events).
    has_events_vector: bool = field(default=True, compare=False)

    @property
    def events(self) -> list[Event]:
        """The run's events as typed records (built on each call: use ``columns`` in hot code)."""
        return [self._dump.event_at(self.columns, i) for i in range(len(self.columns))]


@dataclass(frozen=True, slots=True, eq=False)
class ETDump:
    """A parsed ETDump. ``strings`` interns every name and delegate id string in the file."""

    version: int
    run_data: list[RunData]
    strings: list[str]
    buffer: Buffer = field(repr=False)

    def to_doc(self) -> ETDumpDoc:
        """The dump as typed records, ready to write back."""
        return ETDumpDoc(
            self.version,
            [RunDoc(r.name, r.events if r.has_events_vector else None, r.bundled_input_index, r.allocators)
             for r in self.run_data],
        )

    def string(self, sid: int) -> str | None:
        return None if sid < 0 else self.strings[sid]

    def event_at(self, cols: EventColumns, i: int) -> Event:
        kind = int(cols.kind[i])
        if kind == EventKind.PROFILE:
            t = self.buffer.table(int(cols.table[i]), "ProfileEvent")
            return Event(
                profile_event=ProfileEvent(
                    name=self.string(int(cols.name[i])),
                    chain_index=int(cols.chain_index[i]),
                    instruction_id=int(cols.instruction_id[i]),
                    delegate_debug_id_int=int(cols.delegate_int[i]),
                    delegate_debug_id_str=self.string(int(cols.delegate_str[i])),
                    delegate_debug_metadata=t.bytes_(5),
                    start_time=int(cols.start_time[i]),
                    end_time=int(cols.end_time[i]),
                )
            )
        if kind == EventKind.DEBUG:
            vpos = int(cols.value[i])
            return Event(
                debug_event=DebugEvent(
                    chain_index=int(cols.chain_index[i]) & 0xFFFF_FFFF_FFFF_FFFF,
                    instruction_id=int(cols.instruction_id[i]),
                    debug_entry=None if vpos < 0 else read_value(self.buffer, vpos),
                    delegate_debug_id_int=int(cols.delegate_int[i]),
                    delegate_debug_id_str=self.string(int(cols.delegate_str[i])),
                    name=self.string(int(cols.name[i])),
                )
            )
        if kind == EventKind.ALLOCATION:
            t = self.buffer.table(int(cols.table[i]), "AllocationEvent")
            return Event(
                allocation_event=AllocationEvent(int(t.scalar(0, "i32", 0)), int(t.scalar(1, "u64", 0)))
            )
        return Event()


# The reader lives in its own module; it is re-exported here, where users look for it.
from numdiff.schema._etdump_reader import read_etdump, read_value
