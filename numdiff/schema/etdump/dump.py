"""A parsed ETDump: runs whose events stay in columns over the file, decoded to records on demand."""

from __future__ import annotations

from dataclasses import dataclass, field

from numdiff.errors import ETDumpError
from numdiff.schema.etdump._flatbuf import Buffer, Table
from numdiff.schema.etdump.records import (
    AllocationEvent,
    Allocator,
    DebugEvent,
    ETDumpDoc,
    Event,
    EventColumns,
    EventKind,
    ProfileEvent,
    RunDoc,
    ScalarType,
    Tensor,
    Value,
    ValueType,
)

__all__ = ["ETDump", "RunData", "read_value"]

_SCALAR_TYPES = frozenset(int(t) for t in ScalarType)



def _read_tensor(t: Table) -> Tensor:
    scalar_type = int(t.scalar(0, "i8", 0))
    if scalar_type not in _SCALAR_TYPES:
        known = ", ".join(f"{x.value} ({x.name})" for x in ScalarType)
        raise ETDumpError(t.buf.path, f"Tensor.scalar_type is {scalar_type}, not a known scalar type",
                          f"Known types: {known}. The ETDump is corrupt, or written by a newer runtime "
                          "than numdiff knows.", offset=t.pos)
    return Tensor(
        scalar_type=scalar_type,
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
