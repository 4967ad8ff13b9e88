"""Interning event names: the numpy path (groups of one length hashed as words) gives the ids the
one-by-one path gives, for aligned and unaligned strings, shared prefixes and every length."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest import MonkeyPatch

from numdiff.schema.etdump._flatbuf import Buffer
from numdiff.schema.etdump._flatbuf_strings import intern_strings


def _layout(strings: list[bytes], unaligned: set[int]) -> tuple[bytes, list[int]]:
    """FlatBuffers-style strings (u32 length, bytes, NUL, padding to 4); ``unaligned`` ones shifted by one."""
    out, starts = bytearray(b"\0" * 8), []
    for i, s in enumerate(strings):
        if i in unaligned:
            out += b"\0"
        starts.append(len(out))
        out += struct.pack("<I", len(s)) + s + b"\0"
        out += b"\0" * (-len(out) % 4)
    return bytes(out), starts


def _naive(data: bytes, starts: list[int]) -> list[int]:
    table: dict[bytes, int] = {}
    return [table.setdefault(data[p + 4: p + 4 + struct.unpack_from("<I", data, p)[0]], len(table)) for p in starts]


names = st.sampled_from([b"native_call_add.out", b"native_call_mul.out", b"DELEGATE_CALL", b"", b"a", b"ab", b"abc",
                         b"abcd", b"abcde", b"native_call_add.ou", b"native_call_add.outX", "é".encode(),
                         b"L" * 63 + b"M", b"L" * 64, b"L" * 65, b"L" * 64 + b"M"])  # around the 64-byte short path


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(names, min_size=0, max_size=400), shift=st.sets(st.integers(0, 399), max_size=20))
def test_numpy_interning_matches_one_by_one(picks: list[bytes], shift: set[int]) -> None:
    data, starts = _layout(picks, shift)
    table: dict[bytes, int] = {}
    ids = intern_strings(Buffer.of(data, None), np.array(starts, dtype=np.int64), "name", table)
    assert ids.tolist() == _naive(data, starts)
    assert all(list(table)[i] == picks[k] for k, i in enumerate(ids.tolist()))


def test_many_distinct_strings_of_one_length() -> None:
    picks = [f"op_{i:05d}".encode() for i in range(3000)] * 2
    data, starts = _layout(picks, set())
    table: dict[bytes, int] = {}
    ids = intern_strings(Buffer.of(data, None), np.array(starts, dtype=np.int64), "name", table)
    assert ids.tolist() == _naive(data, starts) and len(table) == 3000


def test_strings_at_the_end_of_the_file() -> None:
    """The last strings' rows would run past the file: they are read from a zero-padded copy of its tail."""
    picks = [b"native_call_add.out", b"x", b"native_call_mul.out"] * 40 + [b"L" * 61, b"L" * 60]
    data, starts = _layout(picks, set())
    assert starts[-1] + 72 > len(data)  # rows are 72 bytes (4 + 61 rounded up to words): the last runs past the end
    table: dict[bytes, int] = {}
    ids = intern_strings(Buffer.of(data, None), np.array(starts, dtype=np.int64), "name", table)
    assert ids.tolist() == _naive(data, starts) and list(table)[-2:] == [b"L" * 61, b"L" * 60]


def test_a_hash_collision_falls_back_to_comparing_by_length(monkeypatch: MonkeyPatch) -> None:
    """Rows grouped wrongly (as a digest collision would) fail the word-for-word check: the ids stay right."""
    import numdiff.schema.etdump._flatbuf_strings as strings

    monkeypatch.setattr(strings, "_digest", lambda words: np.zeros(len(words), dtype=np.uint64))
    picks = [b"native_call_add.out", b"native_call_mul.out", b"abc"] * 50
    data, starts = _layout(picks, set())
    table: dict[bytes, int] = {}
    ids = intern_strings(Buffer.of(data, None), np.array(starts, dtype=np.int64), "name", table)
    assert ids.tolist() == _naive(data, starts) and len(table) == 3


@settings(max_examples=40, deadline=None)
@given(lead=st.lists(names, min_size=0, max_size=5), run=st.lists(names, min_size=1, max_size=40),
       repeats=st.integers(2, 6), change=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), names)),
       shift=st.sets(st.integers(0, 299), max_size=5))
def test_repeated_runs_give_the_ids_of_one_by_one(lead: list[bytes], run: list[bytes], repeats: int,
                                                  change: tuple[int, bytes] | None, shift: set[int]) -> None:
    """Runs that repeat one another (``period``) reuse the first run's ids only when every later string
    equals the one a run before it; a run that differs anywhere is interned like any other."""
    picks = lead + run * repeats
    if change is not None:
        at, name = change
        picks[len(lead) + at % (len(picks) - len(lead))] = name
    data, starts = _layout(picks, shift)
    table: dict[bytes, int] = {}
    ids = intern_strings(Buffer.of(data, None), np.array(starts, dtype=np.int64), "name", table,
                         period=(len(lead), len(run)))
    assert ids.tolist() == _naive(data, starts)
    assert all(list(table)[i] == picks[k] for k, i in enumerate(ids.tolist()))


def test_a_period_that_does_not_fit_is_ignored() -> None:
    picks = [b"native_call_add.out", b"native_call_mul.out"] * 60
    data, starts = _layout(picks, set())
    for period in [(0, 0), (0, 1), (0, 7), (50, 60), (0, 200), (-1, 2)]:
        table: dict[bytes, int] = {}
        ids = intern_strings(Buffer.of(data, None), np.array(starts, dtype=np.int64), "name", table, period=period)
        assert ids.tolist() == _naive(data, starts), period
