"""One field of many FlatBuffer tables at once: ``TableVector``, numpy gathers and no loop per table.

A builder writes one vtable per distinct table layout and points every table of that layout at
it, so the hundreds of thousands of events of a large dump share a handful of vtables. Each
distinct vtable is checked once (its size, its table size, each field's offset against the table
size), and a field's position in every table is the table's position plus its vtable's offset: a
dump whose tables all share one layout is read with one gather per field. Nothing relies on the
sharing: a file whose every table has its own vtable is read the same way, only more slowly.
Problems are ``ETDumpError`` naming the table, the field and the byte offset of the first table
(in file order) that has them, as a table-by-table reader would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from numdiff.schema.etdump._flatbuf import SCALARS, Buffer, IntArray, field_label

__all__ = ["TableVector"]


#: Each table's index into its vector's distinct vtables (int8 when there are two, else int64).
Layout = npt.NDArray[np.int8] | IntArray


def _distinct(vtables: IntArray) -> tuple[IntArray, Layout | None]:
    """The distinct vtable positions in order of first appearance, and each table's index into them
    (None: every table has the first)."""
    if vtables.size == 0:
        return vtables[:1], None
    other = vtables != vtables[0]
    if not other.any():
        return vtables[:1], None
    second = vtables[int(np.argmax(other))]
    if not (other & (vtables != second)).any():  # two layouts (a field absent from some tables): no hash table
        return np.array([vtables[0], second], dtype=np.int64), other.view(np.int8)  # 0 or 1, no copy
    import pandas as pd  # a hash table, linear; codes numbered in order of first appearance

    codes, uniques = pd.factorize(vtables)
    return np.asarray(uniques, dtype=np.int64), codes.astype(np.int64, copy=False)


#: Vectors of at least this many tables are read row-wise: each table's bytes are copied once, by
#: one gather, and every field is sliced from the copies (a field whose vtables disagree on its
#: place is read from the file for the tables of the less common layouts).
_ROW_WISE = 256
_NO_ROWS: IntArray = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class TableVector:
    """The same field of many tables at once (tables of one type, positions in ``pos``)."""

    buf: Buffer
    pos: IntArray
    what: str
    vtables: IntArray  # the distinct vtables, in order of first appearance
    layout: Layout | None  # each table's index into ``vtables`` (None: all use vtables[0])
    vt_size: IntArray  # per distinct vtable
    table_size: IntArray  # per distinct vtable
    residue: int | None  # every table's position modulo 8, when it is the same for all
    #: Read once, used by every field: each table's bytes as a row, tables per vtable.
    cache: dict[str, npt.NDArray[np.generic]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def at(cls, buf: Buffer, pos: IntArray, what: str) -> TableVector:
        mod8 = np.bitwise_and(pos, 7, dtype=np.uint8, casting="unsafe")
        residue = int(mod8[0]) if pos.size and not (mod8 != mod8[0]).any() else None
        cache: dict[str, npt.NDArray[np.generic]] = {}
        if residue is not None and not residue % 4 and pos.size >= _ROW_WISE:
            # aligned tables: their soffsets by word index, the index kept for the fields' gathers (_column)
            lo, hi = int(pos.min()), int(pos.max())
            if lo < 0 or hi + 4 > len(buf):
                raise buf.fail(f"{what} tables lies outside the {len(buf)}-byte file", lo if lo < 0 else hi)
            index = cache["index2"] = pos >> 2
            soffsets = np.take(buf.words(np.int32), index)
        else:
            soffsets = buf.gather(pos, "i32", f"{what} tables")
        vtable_of = np.subtract(pos, soffsets, dtype=np.int64)
        del soffsets
        vtables, layout = _distinct(vtable_of)
        del vtable_of
        sizes = buf.gather(vtables, "u16", f"vtables of {what}").astype(np.int64)
        tsize = buf.gather(vtables + 2, "u16", f"vtables of {what}").astype(np.int64)
        if sizes.size:
            bad = np.nonzero((sizes < 4) | (sizes % 2 == 1))[0]
            if bad.size:
                raise buf.fail(f"a vtable of {what} has an invalid size {int(sizes[bad[0]])}", int(vtables[bad[0]]))
            small = np.nonzero(tsize < 4)[0]
            if small.size:
                raise buf.fail(f"a vtable of {what} gives the table an invalid size {int(tsize[small[0]])}",
                               int(vtables[small[0]]))
            buf.gather(vtables + sizes - 2, "u8", f"vtables of {what}")
            if int(pos.max()) + int(tsize.max()) > len(buf):  # then find the table that runs past the end
                ends = pos + (tsize[0] if layout is None else tsize[layout])
                last = int(np.argmax(ends))
                if int(ends[last]) > len(buf):
                    raise buf.fail(f"{what} tables lies outside the {len(buf)}-byte file", int(ends[last]) - 1)
        return cls(buf, pos, what, vtables, layout, sizes, tsize, residue, cache)

    def _rows(self, per_vtable: IntArray) -> IntArray:
        """A per-vtable value spread to every table."""
        if self.layout is None:
            return np.full(self.pos.size, per_vtable[0] if per_vtable.size else 0, dtype=per_vtable.dtype)
        rows: IntArray = per_vtable[self.layout]
        return rows

    def _first_table(self, k: int) -> int:
        """Index of the first table that uses distinct vtable ``k``."""
        return 0 if self.layout is None else int(np.argmax(self.layout == k))

    def _offsets(self, index: int, size: int) -> IntArray:
        """Each distinct vtable's offset of field ``index`` (0: absent), checked to fit ``size`` bytes in the table."""
        slot = 4 + 2 * index
        out = np.zeros(self.vtables.size, dtype=np.int64)
        where = np.nonzero(self.vt_size > slot)[0]
        if where.size:
            raw = self.buf.gather(self.vtables[where] + slot, "u16", f"vtable slot {index} of {self.what}")
            out[where] = raw.astype(np.int64)
            bad = np.nonzero((out != 0) & ((out < 4) | (out + size > self.table_size)))[0]
            if bad.size:
                k = int(bad[0])  # vtables are in order of first appearance: the first bad one is met first
                raise self.buf.fail(
                    f"{field_label(self.what, index)} of one {self.what} table at table offset {int(out[k])} does not fit in the "
                    f"{int(self.table_size[k])}-byte table", int(self.pos[self._first_table(k)]))
        return out

    def _present(self, index: int, size: int) -> tuple[IntArray | None, IntArray, bool]:
        """Rows that have field ``index`` (None: all of them), the field's position in each of those
        rows, and whether those positions are proven inside the file and aligned (``Buffer.gather``).

        A present field lies inside its table (``_offsets``), and every table inside the file
        (``at``); it is aligned when all tables share a position modulo 8 that, with each
        vtable's offset, is a multiple of the field's size.
        """
        offsets = self._offsets(index, size)
        used = offsets[offsets != 0]
        if not used.size:  # no table has the field
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), True
        proven = self.residue is not None and not ((self.residue + used) % size).any()
        if offsets.all():
            return None, self.pos + (offsets[0] if self.layout is None else offsets[self.layout]), proven
        per_row = self._rows(offsets)
        has = np.nonzero(per_row)[0]
        return has, self.pos[has] + per_row[has], proven

    # --- many tables: fields sliced from each table's bytes, copied once --------------------

    def _table_rows(self) -> npt.NDArray[np.uint8]:
        """Every table's first (largest table size) bytes, one row per table (one gather; kept)."""
        rows = self.cache.get("rows")
        if rows is None:
            rows = self.cache["rows"] = self.buf.rows(self.pos, int(self.table_size.max()))
        return rows  # type: ignore[return-value]

    def _word_index(self, shift: int) -> IntArray:
        """Every table's position in words of ``1 << shift`` bytes (rounded down; kept)."""
        key = f"index{shift}"
        index = self.cache.get(key)
        if index is None:
            index = self.cache[key] = self.pos >> shift
        return index  # type: ignore[return-value]

    def _main(self, offsets: IntArray) -> tuple[int, IntArray]:
        """The field's offset in most tables (0: absent), and the rows whose vtable puts it elsewhere."""
        if self.layout is None:
            return int(offsets[0]), _NO_ROWS
        counts = self.cache.get("counts")
        if counts is None:
            counts = self.cache["counts"] = np.bincount(self.layout, minlength=self.vtables.size)
        main = int(offsets[int(np.argmax(counts))])
        odd = offsets != main
        return main, (np.nonzero(odd[self.layout])[0] if odd.any() else _NO_ROWS)

    def _column(self, main: int, kind: str) -> npt.NDArray[np.generic]:
        """The scalar of ``kind`` at table offset ``main`` of every row (a copy, native byte order)."""
        _, dtype, size = SCALARS[kind]
        if self.residue is not None and size > 1 and not (self.residue + main) % size:
            # Aligned in every table: one typed gather of the file's words, by word index (no row copies).
            # Rows of the main layout hold the field inside their table, so inside the file; a row of
            # another layout (its value replaced by the caller) may point past the last word: clipped.
            shift = size.bit_length() - 1
            skip = ((self.residue + main) >> shift) - (self.residue >> shift)
            words = self.buf.words(dtype)[skip:]
            taken: npt.NDArray[np.generic] = np.take(words, self._word_index(shift), mode="clip")
            return taken.astype(dtype, copy=False)
        rows = self._table_rows()
        at = np.dtype({"names": ["f"], "formats": [np.dtype(SCALARS[kind][1]).newbyteorder("<")],
                       "offsets": [main], "itemsize": rows.shape[1]})
        return rows.view(at).reshape(self.pos.size)["f"].astype(SCALARS[kind][1])  # one strided copy

    def _scalar_rows(self, index: int, kind: str, default: int | float) -> npt.NDArray[np.generic]:
        dtype, size = SCALARS[kind][1], SCALARS[kind][2]
        main, odd = self._main(self._offsets(index, size))
        if not main and not odd.size:  # no table has the field: one value for every row (read-only, stride 0)
            return np.broadcast_to(np.array(default, dtype=dtype), (self.pos.size,))
        out = self._column(main, kind) if main else np.full(self.pos.size, default, dtype=dtype)
        if odd.size:
            per = self._offsets(index, size)[self.layout[odd]]  # type: ignore[index]
            out[odd[per == 0]] = default
            has = per != 0
            out[odd[has]] = self.buf.gather(self.pos[odd[has]] + per[has], kind,
                                            f"{field_label(self.what, index)} of {self.what}")
        return out

    def _indirect_rows(self, index: int) -> IntArray:
        offsets = self._offsets(index, 4)
        n = self.pos.size
        if not offsets.any():  # no table has the field
            return np.full(n, -1, dtype=np.int64)
        main, odd = self._main(offsets)
        if main and not odd.size:  # every table holds the field at one place
            stored = self._column(main, "u32")
            if not stored.all():
                first = int(np.argmin(stored != 0))
                raise self.buf.fail(f"{field_label(self.what, index)} of {self.what} holds a null reference (offset 0)",
                                    int(self.pos[first]) + main)
            targets: IntArray = np.add(self.pos, stored, dtype=np.int64)
            targets += main
            return targets
        at = self.pos + main  # where each table holds the field (main's place, odd rows below)
        values = self._column(main, "u32").astype(np.int64) if main else np.zeros(n, dtype=np.int64)
        present = None
        if odd.size or not main:
            present = np.full(n, bool(main))
            per = offsets[self.layout[odd]] if odd.size else _NO_ROWS  # type: ignore[index]
            present[odd] = per != 0
            at[odd] = self.pos[odd] + per
            values[odd] = 0
            has = odd[per != 0]
            values[has] = self.buf.gather(at[has], "u32", f"{field_label(self.what, index)} of {self.what}")
        nulls = values == 0 if present is None else present & (values == 0)
        if nulls.any():
            raise self.buf.fail(f"{field_label(self.what, index)} of {self.what} holds a null reference (offset 0)",
                                int(at[int(np.argmax(nulls))]))
        at += values
        if present is not None:
            at[~present] = -1
        return at

    # --- per field -----------------------------------------------------------------------------

    def scalar(self, index: int, kind: str, default: int | float) -> npt.NDArray[np.generic]:
        if self.pos.size >= _ROW_WISE:
            return self._scalar_rows(index, kind, default)
        dtype, size = SCALARS[kind][1], SCALARS[kind][2]
        rows, at, proven = self._present(index, size)
        what = f"{field_label(self.what, index)} of {self.what}"
        if rows is None:
            return self.buf.gather(at, kind, what, proven=proven).astype(dtype, copy=False)
        out = np.full(self.pos.size, default, dtype=dtype)
        if rows.size:
            out[rows] = self.buf.gather(at, kind, what, proven=proven)
        return out

    def indirect(self, index: int) -> IntArray:
        """Targets of an offset field (string, vector, table); -1 where the field is absent."""
        if self.pos.size >= _ROW_WISE:
            return self._indirect_rows(index)
        rows, at, proven = self._present(index, 4)
        what = f"{field_label(self.what, index)} of {self.what}"
        if rows is None:
            return self.buf.follow(at, what, proven=proven)
        out = np.full(self.pos.size, -1, dtype=np.int64)
        if rows.size:
            out[rows] = self.buf.follow(at, what, proven=proven)
        return out

    def subtables(self, index: int, what: str) -> tuple[IntArray | None, TableVector]:
        """Rows that have the table field (None: every row), and the tables themselves."""
        if self.pos.size >= _ROW_WISE:
            if not self._offsets(index, 4).any():  # no table has the field
                return _NO_ROWS, TableVector.at(self.buf, _NO_ROWS, what)
            found = self._indirect_rows(index)
            if bool((found >= 0).all()):
                return None, TableVector.at(self.buf, found, what)
            has = np.nonzero(found >= 0)[0]
            return has, TableVector.at(self.buf, found[has], what)
        rows, at, proven = self._present(index, 4)
        targets = self.buf.follow(at, f"{field_label(self.what, index)} of {self.what}", proven=proven)
        return rows, TableVector.at(self.buf, targets, what)
