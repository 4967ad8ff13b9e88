"""Bounds-checked FlatBuffers access: one table at a time, or a whole vector of tables at once.

The released ``flatbuffers`` Python runtime has no verifier: a corrupt offset reads garbage or
raises ``IndexError``/``struct.error`` from deep inside. This module checks, before anything is
followed: every offset and length against the buffer, vtable and table sizes, that each field lies
inside its table, that no offset is null, and that strings and byte vectors do not overlap so as
to make the reader copy more than the file holds. Problems are ``ETDumpError(path, problem,
offset=...)`` naming the table and field. ``Buffer.gather`` reads scalars at many positions with
one numpy gather; ``numdiff.schema.etdump._flatbuf_columns.TableVector`` builds on it to read one field of
many tables, so a dump with hundreds of thousands of events is read without a Python loop per event.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field

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


#: Hint for a file whose declared size does not match (it may have been cut short in transfer).
_HINT_DAMAGED = "The file looks truncated or corrupt: re-copy it from the device, or regenerate it."
#: Hint for a file that has exactly its declared size, so it was not cut short.
_HINT_INCONSISTENT = (
    "The file has exactly the size it declares, so it was not cut short in transfer: it was written "
    "inconsistently or altered afterwards. Regenerate it; if the error persists, report it with the "
    "ExecuTorch version that wrote it."
)
#: The 1.5.1 runtime's half-precision failure (REFERENCE-NOTES note 19), see ``Buffer.null_references``.
_HALF_PROBLEM = (
    "{what} ends with {count} null reference{plural} (offset 0): the mark ExecuTorch 1.5.1's runtime leaves "
    "when it cannot log a half-precision tensor. Its ETDump writer does not support float16 or bfloat16 (it "
    "printed 'This ScalarType = 5 is not yet supported in ETDump', or 15 for bfloat16) and the dump it wrote "
    "cannot be parsed, by ExecuTorch's own Inspector either"
)
_HALF_HINT = (
    "The runtime, not the transfer, broke this file. To get numerics, log float32 copies: cast to float32 "
    "before the outputs you want to inspect, or run the float32 model. To profile the half-precision "
    "model, run it without intermediate-output logging (no debug buffer). If the model logs no "
    "half-precision tensors, the file is corrupt instead: regenerate it."
)


#: Field names by table type, filled in by the schema's reader, for error messages.
FIELD_NAMES: dict[str, tuple[str, ...]] = {}


def field_label(table: str, index: int) -> str:
    """``field 3 (events)`` when the schema's names are known, else ``field 3``."""
    names = FIELD_NAMES.get(table.removeprefix("a ").split(" ")[0], ())
    return f"field {index} ({names[index]})" if index < len(names) else f"field {index}"


@dataclass(frozen=True, slots=True)
class Buffer:
    """A FlatBuffer held in memory, with the file it came from for error messages.

    ``intact`` says the file has exactly the size its size prefix declares (so it was not cut
    short or padded in transfer); error hints depend on it.
    """

    data: bytes | mmap.mmap  # the file read, or mapped read-only (numdiff.schema.etdump._reader)
    path: str | None
    u8: npt.NDArray[np.uint8]
    intact: bool = False
    #: Strings and byte vectors already copied out, by position: each is copied once, however many
    #: tables point at it, and ``spent`` counts the bytes copied so far (see ``copy_out``).
    copied: dict[int, str | bytes] = field(default_factory=dict, repr=False, compare=False)
    spent: list[int] = field(default_factory=lambda: [0], repr=False, compare=False)
    #: Little-endian views of the whole file as 2-, 4- and 8-byte words (by dtype), for aligned gathers.
    views: dict[str, npt.NDArray[np.generic]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: bytes | mmap.mmap, path: str | None, *, intact: bool = False) -> Buffer:
        return cls(data, path, np.frombuffer(data, dtype=np.uint8), intact)

    def __len__(self) -> int:
        return len(self.data)

    def fail(self, problem: str, offset: int | None = None) -> ETDumpError:
        return ETDumpError(self.path, problem, _HINT_INCONSISTENT if self.intact else _HINT_DAMAGED, offset=offset)

    def check(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > len(self.data):
            raise self.fail(f"{what} ({size} bytes) lies outside the {len(self.data)}-byte file", pos)

    def spend(self, nbytes: int, what: str, pos: int) -> None:
        """Account for ``nbytes`` copied out of the file by distinct strings / byte vectors.

        A builder writes every string and byte vector in its own bytes, so the distinct ones of a
        real file hold fewer bytes than the file. A crafted file can point many overlapping
        strings at the same long run of bytes to make a reader copy far more than it holds: that
        is refused here, before the copying.
        """
        self.spent[0] += nbytes
        if self.spent[0] > 2 * len(self.data):
            raise self.fail(
                f"{what}: strings and byte vectors overlap, together claiming {self.spent[0]} bytes of a "
                f"{len(self.data)}-byte file", pos)

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
        if table_size < 4:
            raise self.fail(f"vtable of {what} gives the table an invalid size {table_size}", vtable)
        self.check(vtable, vt_size, f"vtable of {what}")
        self.check(pos, table_size, what)
        return Table(self, pos, vtable, vt_size, table_size, what)

    # --- vectorised helpers -------------------------------------------------------------------

    def gather(self, pos: IntArray, kind: str, what: str, *, proven: bool = False) -> npt.NDArray[np.generic]:
        """Little-endian scalars of ``kind`` at every position in ``pos`` (bounds-checked).

        ``proven``: the caller has shown that every position lies inside the file with its bytes
        and is a multiple of the scalar's size (fields of tables whose extent and alignment were
        checked), so neither is checked again here.
        """
        _, dtype, size = SCALARS[kind]
        if pos.size == 0:
            return np.zeros(0, dtype=dtype)
        if not proven:
            lo, hi = int(pos.min()), int(pos.max())
            if lo < 0 or hi + size > len(self.data):
                bad = lo if lo < 0 else hi
                raise self.fail(f"{what} lies outside the {len(self.data)}-byte file", bad)
        if size == 1:
            single: npt.NDArray[np.generic] = self.u8[pos].view(dtype)
            return single
        # FlatBuffers aligns scalars: one typed gather, no byte shuffling (the low bits checked in bytes)
        if proven or not np.bitwise_and(pos, size - 1, dtype=np.uint8, casting="unsafe").any():
            aligned: npt.NDArray[np.generic] = np.take(self.words(dtype), pos >> (size.bit_length() - 1))
            return aligned
        idx = pos[:, None] + np.arange(size, dtype=np.int64)[None, :]
        raw = np.ascontiguousarray(self.u8[idx])
        out: npt.NDArray[np.generic] = raw.view(np.dtype(dtype).newbyteorder("<")).reshape(pos.size)
        return out

    def rows(self, pos: IntArray, width: int) -> npt.NDArray[np.uint8]:
        """The ``width`` bytes at each position in ``pos`` (checked inside the file), one row each: a
        copy made by one gather. Bytes past the end of the file read as zero."""
        u8, n = self.u8, pos.size
        limit = u8.size - width  # a row starting after this runs past the end of the file
        late = pos > limit
        if not late.any():
            return _windows(u8, width)[pos].view(np.uint8).reshape(n, width)
        base = max(limit, 0)
        tail = np.zeros(u8.size - base + width, dtype=np.uint8)
        tail[: u8.size - base] = u8[base:]
        rows = np.empty(n, dtype=np.dtype((np.void, width)))
        if limit >= 0:
            rows[~late] = _windows(u8, width)[pos[~late]]
        rows[late] = _windows(tail, width)[pos[late] - base]
        return rows.view(np.uint8).reshape(n, width)

    def words(self, dtype: npt.DTypeLike) -> npt.NDArray[np.generic]:
        """The whole file as little-endian words of ``dtype`` (the tail shorter than a word left out)."""
        key = np.dtype(dtype).str
        view = self.views.get(key)
        if view is None:
            little = np.dtype(dtype).newbyteorder("<")
            view = np.frombuffer(self.data, dtype=little, count=len(self.data) // little.itemsize)
            self.views[key] = view
        return view

    def follow(self, pos: IntArray, what: str, *, proven: bool = False) -> IntArray:
        """Targets of the uoffsets stored at ``pos`` (none may be zero; ``proven`` as for ``gather``)."""
        off = self.gather(pos, "u32", what, proven=proven)
        if off.size and not off.all():
            first = int(np.argmin(off != 0))
            raise self.fail(f"{what} holds a null reference (offset 0)", int(pos[first]))
        targets: IntArray = np.add(pos, off, dtype=np.int64)
        return targets

    def follow_elements(self, start: int, n: int, what: str, *, half_signature: bool = False) -> IntArray:
        """Targets of the ``n`` table offsets of the vector whose elements begin at ``start``.

        Null references are an error. With ``half_signature`` (the root's ``run_data`` vector),
        trailing ones in a file that has exactly its declared size are reported as what they are:
        the 1.5.1 runtime's failure to log half-precision tensors (see tests/fixtures/fp16_debug).
        """
        if n <= 16:  # small vectors (allocators, events of a short run): numpy's per-call cost dominates
            self.check(start, 4 * n, what)
            small = struct.unpack_from(f"<{n}I", self.data, start)
            if all(small):
                return np.array([start + 4 * i + o for i, o in enumerate(small)], dtype=np.int64)
        return self.follow_spans([(start, n)], what, half_signature=half_signature)

    def follow_spans(self, spans: list[tuple[int, int]], what: str, *, half_signature: bool = False) -> IntArray:
        """``follow_elements`` over many vectors of table offsets at once, concatenated in order.

        ``spans`` holds each vector's ``(start, length)`` as ``Table.vector`` returns them. A null
        reference is named by its element's index in its own vector; ``half_signature`` applies to
        a single vector, as in ``follow_elements``.
        """
        counts = np.array([n for _, n in spans], dtype=np.int64)
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        firsts = np.cumsum(counts) - counts  # index of each vector's first element in the result
        starts = np.array([start for start, _ in spans], dtype=np.int64)
        words = self.words(np.uint32)
        if not (starts & 3).any() and all(0 <= s and s + 4 * n <= 4 * words.size for s, n in spans):
            # Aligned vectors inside the file: each one's elements are a slice of the file's words.
            off = np.concatenate([words[s >> 2 : (s >> 2) + n] for s, n in spans])
            if off.all():
                sliced: IntArray = off.astype(np.int64)
                if len(spans) <= 1024:  # each element's own position, vector by vector (no full-size temporaries)
                    ramp = np.arange(0, 4 * int(counts.max()), 4, dtype=np.int64)
                    for (s, n), f in zip(spans, firsts.tolist(), strict=True):
                        part = sliced[f : f + n]
                        part += ramp[:n]
                        part += s
                else:
                    sliced += np.arange(0, 4 * total, 4, dtype=np.int64)
                    sliced += np.repeat(starts - 4 * firsts, counts)
                return sliced
        pos = np.repeat(starts - 4 * firsts, counts)
        pos += 4 * np.arange(total, dtype=np.int64)
        off = self.gather(pos, "u32", what)
        if not off.all():
            nulls = np.nonzero(off == 0)[0]
            g = int(nulls[0])
            if half_signature and self.intact and len(spans) == 1 and g == total - nulls.size:  # all trailing
                problem = _HALF_PROBLEM.format(what=what, count=nulls.size, plural="s" if nulls.size > 1 else "")
                raise ETDumpError(self.path, problem, _HALF_HINT, offset=int(pos[g]))
            element = g - int(firsts[np.searchsorted(firsts, g, side="right") - 1])
            raise self.fail(f"{what} holds a null reference (offset 0) at element {element}", int(pos[g]))
        targets: IntArray = np.add(pos, off, dtype=np.int64)
        return targets


def _windows(u8: npt.NDArray[np.uint8], width: int) -> npt.NDArray[np.void]:
    """Every ``width``-byte run of ``u8`` as one item, item ``i`` starting at byte ``i`` (a view, no copy)."""
    windows: npt.NDArray[np.void] = np.ndarray((u8.size - width + 1,), dtype=np.dtype((np.void, width)), buffer=u8,
                                               strides=(1,))
    return windows


@dataclass(frozen=True, slots=True)
class Table:
    """One table: typed field access by field index (the order fields appear in the schema)."""

    buf: Buffer
    pos: int
    vtable: int
    vt_size: int
    table_size: int
    what: str

    def _field(self, index: int, size: int) -> int:
        """Offset of field ``index`` in the table (0: absent), checked to fit ``size`` bytes in it."""
        slot = 4 + 2 * index
        if slot >= self.vt_size:
            return 0
        off = int(_U16.unpack_from(self.buf.data, self.vtable + slot)[0])
        if off and (off < 4 or off + size > self.table_size):
            raise self.buf.fail(
                f"{field_label(self.what, index)} of {self.what} at table offset {off} does not fit in the {self.table_size}-byte table",
                self.pos,
            )
        return off

    def has(self, index: int) -> bool:
        return self._field(index, 1) != 0

    def scalar(self, index: int, kind: str, default: int | float | bool) -> int | float | bool:
        fmt, _, size = SCALARS[kind]
        off = self._field(index, size)
        if off == 0:
            return default
        value: int | float | bool = fmt.unpack_from(self.buf.data, self.pos + off)[0]
        return value

    def _indirect(self, index: int) -> int | None:
        off = self._field(index, 4)
        if off == 0:
            return None
        at = self.pos + off  # inside the table (checked by _field), so inside the file
        target = int(_U32.unpack_from(self.buf.data, at)[0])
        if target == 0:
            raise self.buf.fail(f"{field_label(self.what, index)} of {self.what} is a null reference (offset 0)", at)
        return at + target

    def string(self, index: int) -> str | None:
        target = self._indirect(index)
        if target is None:
            return None
        return read_string(self.buf, target, f"string {field_label(self.what, index)} of {self.what}")

    def bytes_(self, index: int) -> bytes | None:
        target = self._indirect(index)
        if target is None:
            return None
        known = self.buf.copied.get(target)
        if isinstance(known, bytes):
            return known
        what = f"byte vector {index} of {self.what}"
        n = self.buf.u32(target, what)
        self.buf.check(target + 4, n, what)
        self.buf.spend(n, what, target)
        out = self.buf.copied[target] = bytes(self.buf.data[target + 4 : target + 4 + n])
        return out

    def subtable(self, index: int, what: str) -> Table | None:
        target = self._indirect(index)
        return None if target is None else self.buf.table(target, what)

    def vector(self, index: int, elem_size: int, what: str) -> tuple[int, int] | None:
        """(start, length) of a vector field, checked to fit in the buffer (so length <= size / elem_size)."""
        target = self._indirect(index)
        if target is None:
            return None
        n = self.buf.u32(target, f"length of {what}")
        self.buf.check(target + 4, n * elem_size, f"{what} of {n} elements")
        return target + 4, n

    def scalar_vector(self, index: int, kind: str, what: str) -> list[int]:
        found = self.vector(index, SCALARS[kind][2], what)
        if found is None:
            return []
        start, n = found
        fmt = SCALARS[kind][0].format
        return [int(v) for v in struct.unpack_from(f"<{n}{fmt[-1]}", self.buf.data, start)]

    def table_vector(self, index: int, what: str) -> list[Table]:
        return [self.buf.table(int(p), what) for p in self.table_positions(index, what)]

    def table_positions(self, index: int, what: str, *, half_signature: bool = False) -> IntArray:
        """Absolute positions of every table in a vector-of-tables field, vectorised."""
        found = self.vector(index, 4, what)
        if found is None:
            return np.zeros(0, dtype=np.int64)
        start, n = found
        return self.buf.follow_elements(start, n, what, half_signature=half_signature)


def read_string(buf: Buffer, target: int, what: str) -> str:
    known = buf.copied.get(target)
    if isinstance(known, str):
        return known
    n = buf.u32(target, f"length of {what}")
    buf.check(target + 4, n, what)
    buf.spend(n, what, target)
    raw = bytes(buf.data[target + 4 : target + 4 + n])
    try:
        out = buf.copied[target] = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise buf.fail(f"{what} is not valid UTF-8", target) from e
    return out
