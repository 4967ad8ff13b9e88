"""Write ETDump files from numdiff's typed records (for tests, fuzzing and synthetic dumps).

The output is byte-compatible with what the ExecuTorch runtime writes: a FlatBuffer with file
identifier ``ED00``, size-prefixed by default.

Example:
    >>> from numdiff.schema.etdump import ETDumpDoc, Event, ProfileEvent, RunDoc
    >>> from numdiff.schema.etdump.writer import write_etdump
    >>> pe = ProfileEvent("op", 0, 3, -1, None, None, start_time=10, end_time=25)
    >>> data = write_etdump(ETDumpDoc(version=0, run_data=[RunDoc("Execute", events=[Event(profile_event=pe)])]))
    >>> data[8:12]
    b'ED00'
"""

from __future__ import annotations

from collections.abc import Sequence

import flatbuffers

from numdiff.schema.etdump.records import (
    FILE_IDENTIFIER,
    AllocationEvent,
    DebugEvent,
    ETDumpDoc,
    Event,
    ProfileEvent,
    RunDoc,
    Tensor,
    Value,
)

__all__ = ["write_etdump"]


class _Writer:
    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)
        self.b.ForceDefaults(True)  # write every scalar we set, even when it equals the default
        self.strings: dict[str, int] = {}

    def string(self, s: str | None) -> int | None:
        if s is None:
            return None
        if s not in self.strings:
            self.strings[s] = self.b.CreateString(s)
        return self.strings[s]

    def table_vector(self, offsets: Sequence[int]) -> int:
        self.b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            self.b.PrependUOffsetTRelative(off)
        return int(self.b.EndVector())

    def long_vector(self, values: Sequence[int]) -> int:
        self.b.StartVector(8, len(values), 8)
        for v in reversed(values):
            self.b.PrependInt64(v)
        return int(self.b.EndVector())

    def _one_field_table(self, kind: str, value: int | float | bool) -> int:
        b = self.b
        b.StartObject(1)
        {"long": b.PrependInt64Slot, "bool": b.PrependBoolSlot, "float": b.PrependFloat32Slot,
         "double": b.PrependFloat64Slot}[kind](0, value, value)
        return int(b.EndObject())

    def tensor(self, t: Tensor) -> int:
        sizes, strides = self.long_vector(t.sizes), self.long_vector(t.strides)
        b = self.b
        b.StartObject(4)
        b.PrependInt8Slot(0, t.scalar_type, 0)
        b.PrependUOffsetTRelativeSlot(1, sizes, 0)
        b.PrependUOffsetTRelativeSlot(2, strides, 0)
        b.PrependInt64Slot(3, t.offset, 0)
        return int(b.EndObject())

    def value(self, v: Value) -> int:
        tensor = None if v.tensor is None else self.tensor(v.tensor)
        tlist = None
        if v.tensor_list is not None:
            members = self.table_vector([self.tensor(t) for t in v.tensor_list])
            self.b.StartObject(1)
            self.b.PrependUOffsetTRelativeSlot(0, members, 0)
            tlist = int(self.b.EndObject())
        ints = None if v.int_value is None else self._one_field_table("long", v.int_value)
        floats = None if v.float_value is None else self._one_field_table("float", v.float_value)
        doubles = None if v.double_value is None else self._one_field_table("double", v.double_value)
        bools = None if v.bool_value is None else self._one_field_table("bool", v.bool_value)
        output = None if v.output is None else self._one_field_table("bool", v.output)
        string = None
        if v.string_value is not None:
            s = self.string(v.string_value)
            self.b.StartObject(1)
            self.b.PrependUOffsetTRelativeSlot(0, s, 0)
            string = int(self.b.EndObject())
        b = self.b
        b.StartObject(9)
        b.PrependUint8Slot(0, int(v.val), 0)
        for slot, off in enumerate((tensor, tlist, ints, floats, doubles, bools, output, string), start=1):
            if off is not None:
                b.PrependUOffsetTRelativeSlot(slot, off, 0)
        return int(b.EndObject())

    def profile(self, e: ProfileEvent) -> int:
        name, dstr = self.string(e.name), self.string(e.delegate_debug_id_str)
        meta = None if e.delegate_debug_metadata is None else self.b.CreateByteVector(e.delegate_debug_metadata)
        b = self.b
        b.StartObject(8)
        if name is not None:
            b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependInt32Slot(1, e.chain_index, 0)
        b.PrependInt32Slot(2, e.instruction_id, -1)
        b.PrependInt32Slot(3, e.delegate_debug_id_int, -1)
        if dstr is not None:
            b.PrependUOffsetTRelativeSlot(4, dstr, 0)
        if meta is not None:
            b.PrependUOffsetTRelativeSlot(5, meta, 0)
        b.PrependUint64Slot(6, e.start_time, 0)
        b.PrependUint64Slot(7, e.end_time, 0)
        return int(b.EndObject())

    def debug(self, e: DebugEvent) -> int:
        entry = None if e.debug_entry is None else self.value(e.debug_entry)
        dstr, name = self.string(e.delegate_debug_id_str), self.string(e.name)
        b = self.b
        b.StartObject(6)
        b.PrependUint64Slot(0, e.chain_index, 0)
        b.PrependInt32Slot(1, e.instruction_id, -1)
        if entry is not None:
            b.PrependUOffsetTRelativeSlot(2, entry, 0)
        b.PrependInt32Slot(3, e.delegate_debug_id_int, -1)
        if dstr is not None:
            b.PrependUOffsetTRelativeSlot(4, dstr, 0)
        if name is not None:
            b.PrependUOffsetTRelativeSlot(5, name, 0)
        return int(b.EndObject())

    def allocation(self, e: AllocationEvent) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependInt32Slot(0, e.allocator_id, 0)
        b.PrependUint64Slot(1, e.allocation_size, 0)
        return int(b.EndObject())

    def event(self, e: Event) -> int:
        members = (
            None if e.profile_event is None else self.profile(e.profile_event),
            None if e.allocation_event is None else self.allocation(e.allocation_event),
            None if e.debug_event is None else self.debug(e.debug_event),
        )
        b = self.b
        b.StartObject(3)
        for slot, off in enumerate(members):
            if off is not None:
                b.PrependUOffsetTRelativeSlot(slot, off, 0)
        return int(b.EndObject())

    def run(self, r: RunDoc) -> int:
        name = self.string(r.name)
        allocators = []
        for a in r.allocators:
            s = self.string(a.name)
            self.b.StartObject(1)
            if s is not None:
                self.b.PrependUOffsetTRelativeSlot(0, s, 0)
            allocators.append(int(self.b.EndObject()))
        alloc_vec = self.table_vector(allocators)
        events = None if r.events is None else self.table_vector([self.event(e) for e in r.events])
        b = self.b
        b.StartObject(4)
        if name is not None:
            b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependInt32Slot(1, r.bundled_input_index, -1)
        b.PrependUOffsetTRelativeSlot(2, alloc_vec, 0)
        if events is not None:
            b.PrependUOffsetTRelativeSlot(3, events, 0)
        return int(b.EndObject())


def write_etdump(doc: ETDumpDoc, *, size_prefixed: bool = True) -> bytes:
    """Serialise ``doc`` to ETDump bytes.

    Args:
        doc: The dump to write.
        size_prefixed: Write the size prefix the runtime writes. Defaults to True.

    Returns:
        The file contents.
    """
    w = _Writer()
    runs = w.table_vector([w.run(r) for r in doc.run_data])
    w.b.StartObject(2)
    w.b.PrependUint32Slot(0, doc.version, 0)
    w.b.PrependUOffsetTRelativeSlot(1, runs, 0)
    root = w.b.EndObject()
    if size_prefixed:
        w.b.FinishSizePrefixed(root, FILE_IDENTIFIER)
    else:
        w.b.Finish(root, FILE_IDENTIFIER)
    return bytes(w.b.Output())
