"""The ETDump's typed records: the whole schema, with runs kept as columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import IntEnum

import numpy as np
import numpy.typing as npt


__all__ = [
    "AllocationEvent",
    "Allocator",
    "DebugEvent",
    "Event",
    "EventColumns",
    "ETDumpDoc",
    "EventKind",
    "FILE_IDENTIFIER",
    "ProfileEvent",
    "RunDoc",
    "ScalarType",
    "Tensor",
    "Value",
    "ValueType",
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
    """A run to write (see ``numdiff.schema.etdump.writer``); ``events=None`` writes no events vector."""

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
