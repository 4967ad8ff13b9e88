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

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from numdiff.errors import ETDumpError
from numdiff.schema._flatbuf import Buffer, Table, TableVector, intern_strings

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
    """A run to write (see ``numdiff.schema.etdump_writer``)."""

    name: str | None
    events: Sequence[Event] = ()
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


@dataclass(frozen=True, slots=True)
class RunData:
    """One block of events: model loading, or one execution of a method."""

    name: str | None
    bundled_input_index: int
    allocators: tuple[Allocator, ...]
    columns: EventColumns
    _dump: ETDump = field(repr=False, compare=False)

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
            [RunDoc(r.name, r.events, r.bundled_input_index, r.allocators) for r in self.run_data],
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


def _read_tensor(t: Table) -> Tensor:
    return Tensor(
        scalar_type=int(t.scalar(0, "i8", 0)),
        sizes=tuple(t.scalar_vector(1, "i64", "Tensor.sizes")),
        strides=tuple(t.scalar_vector(2, "i64", "Tensor.strides")),
        offset=int(t.scalar(3, "i64", 0)),
    )


def read_value(buf: Buffer, pos: int) -> Value:
    """The ``Value`` table at ``pos``."""
    t = buf.table(pos, "Value")
    raw_type = int(t.scalar(0, "u8", 0))
    try:
        val = ValueType(raw_type)
    except ValueError as e:
        raise buf.fail(f"Value has unknown type tag {raw_type}", pos) from e

    def wrapped(index: int, kind: str, what: str) -> int | float | bool | None:
        sub = t.subtable(index, what)
        return None if sub is None else sub.scalar(0, kind, 0)

    tensor = t.subtable(1, "Tensor")
    tlist = t.subtable(2, "TensorList")
    output = wrapped(7, "bool", "Bool")
    string_table = t.subtable(8, "String")
    return Value(
        val=val,
        tensor=None if tensor is None else _read_tensor(tensor),
        tensor_list=None if tlist is None else tuple(_read_tensor(x) for x in tlist.table_vector(0, "TensorList.tensors")),
        int_value=_opt_int(wrapped(3, "i64", "Int")),
        float_value=_opt_float(wrapped(4, "f32", "Float")),
        double_value=_opt_float(wrapped(5, "f64", "Double")),
        bool_value=None if (b := wrapped(6, "bool", "Bool")) is None else bool(b),
        output=None if output is None else bool(output),
        string_value=None if string_table is None else string_table.string(0),
    )


def _opt_int(v: int | float | bool | None) -> int | None:
    return None if v is None else int(v)


def _opt_float(v: int | float | bool | None) -> float | None:
    return None if v is None else float(v)


def _locate_root(data: bytes, path: str | None) -> tuple[int, bool]:
    """Root table position and whether the file is size-prefixed; checks identifier and size."""

    def fail(problem: str, hint: str) -> ETDumpError:
        return ETDumpError(path, problem, hint)

    if len(data) == 0:
        raise fail("the file is empty", "The runtime wrote nothing: check that ETDump generation was enabled and flushed.")
    if len(data) < 8:
        raise fail(f"only {len(data)} bytes: too short to be an ETDump (truncated?)", "Re-copy the file from the device.")
    if len(data) >= 12 and data[8:12] == FILE_IDENTIFIER:
        declared = int.from_bytes(data[0:4], "little")
        if declared > len(data) - 4:
            raise fail(
                f"truncated: the size prefix says {declared} bytes follow but only {len(data) - 4} do",
                "Re-copy the file from the device: it was cut short.",
            )
        return 4 + int.from_bytes(data[4:8], "little"), True
    if data[4:8] == FILE_IDENTIFIER:
        return int.from_bytes(data[0:4], "little"), False
    found = data[8:12] if len(data) >= 12 else data[4:8]
    raise fail(
        f"not an ETDump: file identifier is {bytes(found)!r}, expected {FILE_IDENTIFIER!r}",
        "Pass the .etdp file the runtime's ETDumpGen wrote (not the .pte program or the debug buffer).",
    )


def read_etdump(source: str | os.PathLike[str] | bytes, *, path: str | os.PathLike[str] | None = None) -> ETDump:
    """Parse an ETDump from a file path or from bytes.

    Args:
        source: Path of the ``.etdp`` file, or its contents.
        path: Name to use in error messages when ``source`` is bytes.

    Returns:
        The parsed dump.

    Raises:
        ETDumpError: The file is missing, empty, truncated, corrupt or not an ETDump.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = None if path is None else os.fspath(path)
    else:
        name = os.fspath(source)
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ETDumpError(name, f"cannot be read: {e.strerror or e}", "Check the path.") from e
    root_pos, prefixed = _locate_root(data, name)
    buf = Buffer.of(data, name)
    root = buf.table(root_pos, "ETDump root")
    strings: dict[bytes, int] = {}
    dump = ETDump(version=int(root.scalar(0, "u32", 0)), run_data=[], strings=[], buffer=buf)
    for run in root.table_vector(1, "ETDump.run_data"):
        allocators = tuple(Allocator(a.string(0)) for a in run.table_vector(2, "RunData.allocators"))
        dump.run_data.append(
            RunData(
                name=run.string(0),
                bundled_input_index=int(run.scalar(1, "i32", -1)),
                allocators=allocators,
                columns=_read_event_columns(buf, run.table_positions(3, "RunData.events"), strings),
                _dump=dump,
            )
        )
    decoded = list(strings)
    dump.strings.extend(_decode(buf, decoded))
    return dump


def _decode(buf: Buffer, raw: list[bytes]) -> list[str]:
    out = []
    for b in raw:
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise buf.fail(f"an event name is not valid UTF-8: {b[:40]!r}") from e
    return out


def _read_event_columns(buf: Buffer, positions: npt.NDArray[np.int64], strings: dict[bytes, int]) -> EventColumns:
    n = positions.size
    events = TableVector.at(buf, positions, "Event")
    kind = np.zeros(n, dtype=np.int8)
    name = np.full(n, -1, dtype=np.int32)
    chain = np.zeros(n, dtype=np.int64)
    instr = np.full(n, -1, dtype=np.int64)
    dint = np.full(n, -1, dtype=np.int64)
    dstr = np.full(n, -1, dtype=np.int32)
    start = np.zeros(n, dtype=np.uint64)
    end = np.zeros(n, dtype=np.uint64)
    table = np.full(n, -1, dtype=np.int64)
    value = np.full(n, -1, dtype=np.int64)
    output = np.zeros(n, dtype=np.bool_)

    # Allocation first, then debug, then profile: later kinds overwrite, so profile wins.
    rows, alloc = events.subtables(1, "AllocationEvent")
    kind[rows], table[rows] = EventKind.ALLOCATION, alloc.pos

    rows, dbg = events.subtables(2, "DebugEvent")
    kind[rows], table[rows] = EventKind.DEBUG, dbg.pos
    chain[rows] = dbg.scalar(0, "u64", 0).view(np.int64)  # raw bits; event_at restores the unsigned value
    instr[rows] = dbg.scalar(1, "i32", -1)
    dint[rows] = dbg.scalar(3, "i32", -1)
    dstr[rows] = intern_strings(buf, dbg.indirect(4), "delegate id", strings)
    name[rows] = intern_strings(buf, dbg.indirect(5), "debug event name", strings)
    vrows, values = dbg.subtables(2, "Value")
    value[rows[vrows]] = values.pos
    orows, flags = values.subtables(7, "Bool")
    output[rows[vrows[orows]]] = flags.scalar(0, "bool", 0).astype(np.bool_)

    rows, prof = events.subtables(0, "ProfileEvent")
    kind[rows], table[rows], value[rows], output[rows] = EventKind.PROFILE, prof.pos, -1, False
    name[rows] = intern_strings(buf, prof.indirect(0), "profile event name", strings)
    chain[rows] = prof.scalar(1, "i32", 0)
    instr[rows] = prof.scalar(2, "i32", -1)
    dint[rows] = prof.scalar(3, "i32", -1)
    dstr[rows] = intern_strings(buf, prof.indirect(4), "delegate id", strings)
    start[rows] = prof.scalar(6, "u64", 0)
    end[rows] = prof.scalar(7, "u64", 0)
    return EventColumns(kind, name, chain, instr, dint, dstr, start, end, table, value, output)
