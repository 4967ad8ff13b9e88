"""Event names read from a FlatBuffer as ids into one table of distinct strings.

A dump with hundreds of thousands of events repeats a few dozen names. Each name is copied out
of the file once: the strings are grouped by length, read as 4-byte words, hashed and verified
word for word against the first string of their group (numpy and pandas, no loop per event),
and only the distinct ones are sliced from the file. Ids are numbered in order of first
appearance, as one ``dict.setdefault`` per string would number them.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from numdiff.schema.etdump._flatbuf import Buffer, IntArray

__all__ = ["intern_strings"]


def intern_strings(buf: Buffer, targets: IntArray, what: str, table: dict[bytes, int],
                   period: tuple[int, int] | None = None) -> npt.NDArray[np.int32]:
    """Ids of the strings at ``targets`` (-1 where absent) in ``table``, which grows as needed.

    Strings are compared as raw bytes, so each distinct name is decoded once, however many
    events carry it. ``period``: ``(start, p)`` when the targets from ``start`` on are runs of ``p``
    events that may repeat one another (executions of one method): if every string there equals the
    one ``p`` rows before it, byte for byte (checked), only the first ``start + p`` are interned.
    """
    has = np.nonzero(targets >= 0)[0]
    if has.size == 0:  # no string: -1 for every row (read-only, stride 0)
        return np.broadcast_to(np.array(-1, dtype=np.int32), (targets.size,))
    out = np.full(targets.size, -1, dtype=np.int32)
    every = has.size == targets.size
    starts = targets if every else targets[has]
    lengths: npt.NDArray[np.uint32] = buf.gather(starts, "u32", f"lengths of {what}")  # type: ignore[assignment]
    if int(starts.max()) + int(lengths.max()) + 4 > len(buf):  # then find the string that runs past the end
        ends = np.add(starts, lengths, dtype=np.int64)
        ends += 4
        if int(ends.max()) > len(buf):
            bad = int(starts[np.argmax(ends)])
            raise buf.fail(f"a {what} string runs past the end of the {len(buf)}-byte file", bad)
    inverse = None
    if int(lengths.sum()) > 2 * len(buf):  # strings shared or overlapping: copy each distinct one once
        starts, first, inverse = np.unique(starts, return_index=True, return_inverse=True)
        lengths = lengths[first]
        buf.spend(int(lengths.sum()) + 4 * lengths.size, f"{what} strings", int(starts[0]))
    data = buf.data  # bytes or a read-only mapping: each slice is a bytes copy of its own
    ids = _string_ids(buf, data, starts, lengths, table, period if every and inverse is None else None)
    if inverse is not None:
        ids = ids[inverse]
    if every:
        return ids
    out[has] = ids
    return out


#: A group of strings of one length at least this big is interned with numpy, not one by one.
_VECTOR_GROUP = 64


def _string_ids(buf: Buffer, data: bytes | mmap.mmap, starts: IntArray, lengths: npt.NDArray[np.uint32],
                table: dict[bytes, int], period: tuple[int, int] | None = None) -> npt.NDArray[np.int32]:
    """``table`` ids of the strings ``data[starts + 4 : starts + 4 + lengths]`` (bounds already checked),
    new strings numbered in the order they first appear, as one ``setdefault`` per string would
    (``period`` as for ``intern_strings``)."""
    setdefault: Callable[[bytes, int], int] = table.setdefault

    def intern(at: IntArray) -> list[int]:  # the strings at these indices, one by one
        return [setdefault(data[s + 4 : s + 4 + n], len(table))
                for s, n in zip(starts[at].tolist(), lengths[at].tolist(), strict=True)]

    if starts.size < _VECTOR_GROUP:
        return np.array(intern(np.arange(starts.size)), dtype=np.int32)
    grouped = None
    if int(lengths.max()) <= _SHORT:
        words = _masked_rows(buf, starts, lengths)
        head = _periodic_head(words, period)
        grouped = _groups_by_rows(words[:head])
    if grouped is not None:
        codes, firsts = grouped
        known = np.array(intern(firsts), dtype=np.int32)
        by_row: npt.NDArray[np.int32] = known[codes]
        if head < starts.size:  # every later row repeats the one p rows before it
            start, p = period  # type: ignore[misc]
            by_row = np.concatenate((by_row[:start], np.resize(by_row[start:], starts.size - start)))
        return by_row
    first = _firsts_by_length(buf, data, starts, lengths.astype(np.int64))
    distinct = np.flatnonzero(first == np.arange(first.size))  # each distinct string's first place, in order
    ids = np.empty(first.size, dtype=np.int32)
    ids[distinct] = intern(distinct)
    out: npt.NDArray[np.int32] = ids[first]
    return out


#: Strings up to this many bytes (event and delegate names) are hashed all together, each masked to
#: its length; when any is longer they are grouped by length first, so one long string does not
#: widen every row.
_SHORT = 64
#: The bytes of a 4-byte word kept when 0, 1, 2, 3 or 4 of them belong to the string.
_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


#: The bytes of an 8-byte word kept when 0, 1, ..., 8 of them belong to the string.
_MASKS64 = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)


def _masked_rows(buf: Buffer, starts: IntArray, lengths: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint64]:
    """Each string whose length prefix is at ``starts`` (bounds already checked; at most ``_SHORT``
    bytes long), with its 4-byte length prefix, as a row of 8-byte words copied by one gather over
    the file (``Buffer.rows``), the bytes past the string zeroed: two rows are equal exactly when
    their strings are."""
    width, shortest = -(-(int(lengths.max()) + 4) // 8) * 8, int(lengths.min()) + 4
    words = buf.rows(starts, width).view(np.dtype("<u8"))  # a copy: masked in place
    if shortest // 8 < width // 8:  # words where some string ends: clear the bytes past it
        total = lengths.astype(np.uint8)  # lengths + 4 <= _SHORT + 4 < 256
        total += 4
        table = np.zeros(256, dtype=np.uint64)  # a mask per total length, indexed by the uint8 itself
        for k in range(shortest // 8, width // 8):
            table[: width + 1] = _MASKS64[np.clip(np.arange(width + 1) - 8 * k, 0, 8)]
            words[:, k] &= table[total]
        del total
    return words


def _periodic_head(words: npt.NDArray[np.uint64], period: tuple[int, int] | None) -> int:
    """How many leading rows determine every row: ``start + p`` when each row from ``start + p`` on
    equals the row ``p`` before it (the first repeat compared first, so a dump whose runs differ
    pays one short comparison), else all of them."""
    n = int(words.shape[0])
    if period is None:
        return n
    start, p = period
    if p < 1 or start < 0 or n - start < 2 * p:
        return n
    if not np.array_equal(words[start + p : start + 2 * p], words[start : start + p]):
        return n
    if not np.array_equal(words[start + 2 * p :], words[start + p : n - p]):
        return n
    return start + p


def _groups_by_rows(words: npt.NDArray[np.uint64]) -> tuple[IntArray, IntArray] | None:
    """For rows of masked words (``_masked_rows``): each row's group number, the groups numbered in
    order of first appearance, and each group's first row. The rows are hashed, grouped, and
    checked word for word against their group's first row. None on a hash collision (the caller
    then goes by length)."""
    import pandas as pd  # a hash table: linear, where np.unique sorts

    width = 8 * words.shape[1]
    digest = _digest(words)
    codes, uniques = pd.factorize(digest)  # numbered in order of first appearance: 0, then 1, ...
    if uniques.size <= 16:  # a few names (the usual case): where each number first appears, one scan each
        firsts = np.array([int(np.argmax(codes == c)) for c in range(uniques.size)], dtype=np.int64)
    else:
        firsts = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1))
    heads, scratch = words[firsts], digest.view(words.dtype)  # the digest's memory, no longer needed
    for k in range(width // 8):
        np.take(heads[:, k], codes, out=scratch)
        if not np.array_equal(words[:, k], scratch):
            return None
    return codes, firsts


def _digest(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each row of ``words``."""
    digest: npt.NDArray[np.uint64] = words[:, 0].copy()
    for k in range(1, words.shape[1]):
        digest *= np.uint64(0x100000001B3)
        digest += words[:, k]
    return digest


def _firsts_by_words(buf: Buffer, begins: IntArray, lengths: IntArray) -> IntArray | None:
    """For strings starting at ``begins``, the index of the first string equal to each: the strings
    are read one 4-byte word at a time, all of them at once, each word masked to the string's
    length, hashed with the length, grouped, and checked word for word against their group's
    first. Its cost is the longest string's words times the strings: callers pass short strings, or
    strings of one length. None (the caller goes one by one) where that does not apply: unaligned
    strings, a last word past the end of the file, a hash collision."""
    words = buf.words(np.uint32)
    if (begins & 3).any() or int(((begins + lengths + 3) >> 2).max()) > words.size:
        return None
    width = max(1, -(-int(lengths.max()) // 4))
    whole = int(lengths.min()) // 4  # words that are all string in every row: no mask
    index = begins >> 2
    clip = int(index.max()) + width > words.size  # a short string near the end: its unused words are past it
    left = lengths - 4 * whole  # bytes of each string from word ``whole`` on
    digest = lengths.astype(np.uint64)
    columns = []
    for j in range(width):
        column = words[np.minimum(index, words.size - 1) if clip else index]
        if j >= whole:
            column &= _MASKS[np.clip(left, 0, 4)]
            left -= 4
        columns.append(column)
        digest *= np.uint64(0x100000001B3)
        digest += column
        index += 1
    firsts = _first_of_each(digest)
    same = np.array_equal(lengths, lengths[firsts]) and all(np.array_equal(c, c[firsts]) for c in columns)
    return firsts if same else None


def _first_of_each(digest: npt.NDArray[np.uint64]) -> IntArray:
    """For each row, the index of the first row with the same digest."""
    import pandas as pd  # a hash table: linear, where np.unique sorts

    codes, _ = pd.factorize(digest)  # codes numbered in order of first appearance: 0, then 1, ...
    running = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.concatenate(([True], running[1:] > running[:-1])))  # where each code first appears
    firsts: IntArray = first[codes]
    return firsts


def _firsts_by_length(buf: Buffer, data: bytes | mmap.mmap, starts: IntArray, lengths: IntArray) -> IntArray:
    """The index of the first string equal to each, the strings grouped by length first (any length)."""
    import pandas as pd  # hash tables: linear, where np.unique sorts

    first = np.empty(starts.size, dtype=np.int64)
    codes, _ = pd.factorize(lengths)
    small = codes.astype(np.int16) if int(codes.max()) < 2**15 else codes  # stable sort of int16: a radix sort
    by_length = np.argsort(small, kind="stable")
    bounds = np.flatnonzero(np.diff(small[by_length])) + 1
    for group in np.split(by_length, bounds):  # each group in ascending order: firsts come first
        length = int(lengths[group[0]])
        got = _firsts_by_words(buf, starts[group] + 4, lengths[group]) if group.size >= _VECTOR_GROUP else None
        if got is None:
            seen: dict[bytes, int] = {}
            first[group] = [seen.setdefault(data[b : b + length], k)
                            for k, b in zip(group.tolist(), (starts[group] + 4).tolist(), strict=True)]
        else:
            first[group] = group[got]
    return first
