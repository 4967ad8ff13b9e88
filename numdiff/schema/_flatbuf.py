"""Bounds-checked FlatBuffers access: one table at a time, or a whole vector of tables at once.

The released ``flatbuffers`` Python runtime has no verifier: a corrupt offset reads garbage or
raises ``IndexError``/``struct.error`` from deep inside. This module checks every offset and
length against the buffer before it is followed, and reports problems as
``ETDumpError(path, problem, offset=...)``. ``TableVector`` reads one field of many tables with
numpy gathers, so a dump with hundreds of thousands of events is read without a Python loop per
event.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np
import numpy.typing as npt

from numdiff.errors import ETDumpError

IntArray = npt.NDArray[np.int64]

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")

#: (struct format, numpy dtype, size in bytes) of each scalar kind a schema field may have.
SCALARS: dict[str, tuple[struct.Struct, npt.DTypeLike, int]] = {
    "bool": (struct.Struct("<?"), np.uint8, 1),
    "i8": (struct.Struct("<b"), np.int8, 1),
    "u8": (struct.Struct("<B"), np.uint8, 1),
    "u16": (struct.Struct("<H"), np.uint16, 2),
    "i32": (struct.Struct("<i"), np.int32, 4),
    "u32": (struct.Struct("<I"), np.uint32, 4),
    "i64": (struct.Struct("<q"), np.int64, 8),
    "u64": (struct.Struct("<Q"), np.uint64, 8),
    "f32": (struct.Struct("<f"), np.float32, 4),
    "f64": (struct.Struct("<d"), np.float64, 8),
}


@dataclass(frozen=True, slots=True)
class Buffer:
    """A FlatBuffer held in memory, with the file it came from for error messages."""

    data: bytes | memoryview
    path: str | None
    u8: npt.NDArray[np.uint8]

    @classmethod
    def of(cls, data: bytes | memoryview, path: str | None) -> Buffer:
        return cls(data, path, np.frombuffer(data, dtype=np.uint8))

    def __len__(self) -> int:
        return len(self.data)

    def fail(self, problem: str, offset: int | None = None) -> ETDumpError:
        return ETDumpError(
            self.path,
            problem,
            "The file looks truncated or corrupt: re-copy it from the device, or regenerate it.",
            offset=offset,
        )

    def check(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > len(self.data):
            raise self.fail(f"{what} ({size} bytes) lies outside the {len(self.data)}-byte file", pos)

    def u32(self, pos: int, what: str) -> int:
        self.check(pos, 4, what)
        return int(_U32.unpack_from(self.data, pos)[0])

    def table(self, pos: int, what: str) -> Table:
        """The table at absolute position ``pos``, with its vtable checked."""
        self.check(pos, 4, what)
        vtable = pos - int(_I32.unpack_from(self.data, pos)[0])
        self.check(vtable, 4, f"vtable of {what}")
        vt_size, table_size = _U16.unpack_from(self.data, vtable)[0], _U16.unpack_from(self.data, vtable + 2)[0]
        if vt_size < 4 or vt_size % 2:
            raise self.fail(f"vtable of {what} has an invalid size {vt_size}", vtable)
        self.check(vtable, vt_size, f"vtable of {what}")
        self.check(pos, table_size, what)
        return Table(self, pos, vtable, vt_size, what)

    # --- vectorised helpers -------------------------------------------------------------------

    def gather(self, pos: IntArray, kind: str, what: str) -> npt.NDArray[np.generic]:
        """Little-endian scalars of ``kind`` at every position in ``pos`` (bounds-checked)."""
        _, dtype, size = SCALARS[kind]
        if pos.size == 0:
            return np.zeros(0, dtype=dtype)
        lo, hi = int(pos.min()), int(pos.max())
        if lo < 0 or hi + size > len(self.data):
            bad = lo if lo < 0 else hi
            raise self.fail(f"{what} lies outside the {len(self.data)}-byte file", bad)
        idx = pos[:, None] + np.arange(size, dtype=np.int64)[None, :]
        raw = np.ascontiguousarray(self.u8[idx])
        out: npt.NDArray[np.generic] = raw.view(np.dtype(dtype).newbyteorder("<")).reshape(pos.size)
        return out

    def follow(self, pos: IntArray, what: str) -> IntArray:
        """Targets of the uoffsets stored at ``pos``."""
        return pos + self.gather(pos, "u32", what).astype(np.int64)


@dataclass(frozen=True, slots=True)
class Table:
    """One table: typed field access by field index (the order fields appear in the schema)."""

    buf: Buffer
    pos: int
    vtable: int
    vt_size: int
    what: str

    def _field(self, index: int) -> int:
        slot = 4 + 2 * index
        if slot >= self.vt_size:
            return 0
        return int(_U16.unpack_from(self.buf.data, self.vtable + slot)[0])

    def has(self, index: int) -> bool:
        return self._field(index) != 0

    def scalar(self, index: int, kind: str, default: int | float | bool) -> int | float | bool:
        off = self._field(index)
        if off == 0:
            return default
        fmt, _, size = SCALARS[kind]
        self.buf.check(self.pos + off, size, f"field {index} of {self.what}")
        value: int | float | bool = fmt.unpack_from(self.buf.data, self.pos + off)[0]
        return value

    def _indirect(self, index: int) -> int | None:
        off = self._field(index)
        if off == 0:
            return None
        return self.pos + off + self.buf.u32(self.pos + off, f"field {index} of {self.what}")

    def string(self, index: int) -> str | None:
        target = self._indirect(index)
        if target is None:
            return None
        return read_string(self.buf, target, f"string field {index} of {self.what}")

    def bytes_(self, index: int) -> bytes | None:
        target = self._indirect(index)
        if target is None:
            return None
        n = self.buf.u32(target, f"byte vector {index} of {self.what}")
        self.buf.check(target + 4, n, f"byte vector {index} of {self.what}")
        return bytes(self.buf.data[target + 4 : target + 4 + n])

    def subtable(self, index: int, what: str) -> Table | None:
        target = self._indirect(index)
        return None if target is None else self.buf.table(target, what)

    def vector(self, index: int, elem_size: int, what: str) -> tuple[int, int] | None:
        """(start, length) of a vector field, checked to fit in the buffer."""
        target = self._indirect(index)
        if target is None:
            return None
        n = self.buf.u32(target, f"length of {what}")
        self.buf.check(target + 4, n * elem_size, what)
        return target + 4, n

    def scalar_vector(self, index: int, kind: str, what: str) -> list[int]:
        found = self.vector(index, SCALARS[kind][2], what)
        if found is None:
            return []
        start, n = found
        positions = start + SCALARS[kind][2] * np.arange(n, dtype=np.int64)
        return [int(v) for v in self.buf.gather(positions, kind, what)]

    def table_vector(self, index: int, what: str) -> list[Table]:
        found = self.vector(index, 4, what)
        if found is None:
            return []
        start, n = found
        return [self.buf.table(start + 4 * i + self.buf.u32(start + 4 * i, what), what) for i in range(n)]

    def table_positions(self, index: int, what: str) -> IntArray:
        """Absolute positions of every table in a vector-of-tables field, vectorised."""
        found = self.vector(index, 4, what)
        if found is None:
            return np.zeros(0, dtype=np.int64)
        start, n = found
        return self.buf.follow(start + 4 * np.arange(n, dtype=np.int64), what)


def read_string(buf: Buffer, target: int, what: str) -> str:
    n = buf.u32(target, f"length of {what}")
    buf.check(target + 4, n, what)
    raw = bytes(buf.data[target + 4 : target + 4 + n])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise buf.fail(f"{what} is not valid UTF-8", target) from e


@dataclass(frozen=True, slots=True)
class TableVector:
    """The same field of many tables at once (tables of one type, positions in ``pos``)."""

    buf: Buffer
    pos: IntArray
    what: str
    vtable: IntArray
    vt_size: npt.NDArray[np.uint16]

    @classmethod
    def at(cls, buf: Buffer, pos: IntArray, what: str) -> TableVector:
        vtable = pos - buf.gather(pos, "i32", f"{what} tables").astype(np.int64)
        sizes = buf.gather(vtable, "u16", f"vtables of {what}").astype(np.uint16)
        if sizes.size and (int(sizes.min()) < 4 or np.any(sizes % 2)):
            raise buf.fail(f"a vtable of {what} has an invalid size")
        if sizes.size:
            buf.gather(vtable + sizes.astype(np.int64) - 2, "u8", f"vtables of {what}")
        return cls(buf, pos, what, vtable, sizes)

    def field_offsets(self, index: int) -> IntArray:
        slot = 4 + 2 * index
        present = self.vt_size > slot
        out = np.zeros(self.pos.size, dtype=np.int64)
        if np.any(present):
            where = np.nonzero(present)[0]
            raw = self.buf.gather(self.vtable[where] + slot, "u16", f"vtable slot {index} of {self.what}")
            out[where] = raw.astype(np.int64)
        return out

    def scalar(self, index: int, kind: str, default: int | float) -> npt.NDArray[np.generic]:
        off = self.field_offsets(index)
        dtype = SCALARS[kind][1]
        out = np.full(self.pos.size, default, dtype=dtype)
        has = np.nonzero(off)[0]
        if has.size:
            out[has] = self.buf.gather(self.pos[has] + off[has], kind, f"field {index} of {self.what}")
        return out

    def indirect(self, index: int) -> IntArray:
        """Targets of an offset field (string, vector, table); -1 where the field is absent."""
        off = self.field_offsets(index)
        out = np.full(self.pos.size, -1, dtype=np.int64)
        has = np.nonzero(off)[0]
        if has.size:
            out[has] = self.buf.follow(self.pos[has] + off[has], f"field {index} of {self.what}")
        return out

    def subtables(self, index: int, what: str) -> tuple[IntArray, TableVector]:
        """Rows that have the table field, and the tables themselves."""
        targets = self.indirect(index)
        rows = np.nonzero(targets >= 0)[0]
        return rows, TableVector.at(self.buf, targets[rows], what)


def intern_strings(buf: Buffer, targets: IntArray, what: str, table: dict[bytes, int]) -> npt.NDArray[np.int32]:
    """Ids of the strings at ``targets`` (-1 where absent) in ``table``, which grows as needed.

    Strings are compared as raw bytes, so each distinct name is decoded once, however many
    events carry it.
    """
    out = np.full(targets.size, -1, dtype=np.int32)
    has = np.nonzero(targets >= 0)[0]
    if has.size == 0:
        return out
    starts = targets[has]
    lengths = buf.gather(starts, "u32", f"lengths of {what}").astype(np.int64)
    ends = starts + 4 + lengths
    if int(ends.max()) > len(buf):
        bad = int(starts[np.argmax(ends)])
        raise buf.fail(f"a {what} string runs past the end of the {len(buf)}-byte file", bad)
    data = buf.data if isinstance(buf.data, bytes) else bytes(buf.data)
    setdefault: Callable[[bytes, int], int] = table.setdefault
    ids = [setdefault(data[s + 4 : e], len(table)) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    out[has] = ids
    return out
