"""Vectors of many tables are read row-wise (each table's bytes copied once, fields sliced from the
copies); short ones field by field. Both give the same columns and the same errors, on every real
fixture and on mutated copies of them; a null reference read row-wise names the table and field."""

from __future__ import annotations

import dataclasses
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from pytest import MonkeyPatch

import numdiff.schema.etdump._flatbuf_columns as columns
from numdiff.errors import ETDumpError
from numdiff.schema.etdump import ETDump, ETDumpDoc, Event, ProfileEvent, RunDoc, read_etdump
from numdiff.schema.etdump._flatbuf import Buffer
from numdiff.schema.etdump.writer import write_etdump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DUMPS = sorted(FIXTURES.glob("*/etdump.etdp"))


def _read(data: bytes, monkeypatch: MonkeyPatch, row_wise: bool) -> ETDump | str:
    """The dump read with every vector row-wise (or none), or the error's text."""
    monkeypatch.setattr(columns, "_ROW_WISE", 1 if row_wise else 2**62)
    try:
        return read_etdump(data, path="x.etdp")
    except ETDumpError as e:
        return str(e)


def _same(a: ETDump | str, b: ETDump | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if a.strings != b.strings or len(a.run_data) != len(b.run_data):
        return False
    for ra, rb in zip(a.run_data, b.run_data, strict=True):
        for f in dataclasses.fields(ra.columns):
            x, y = getattr(ra.columns, f.name), getattr(rb.columns, f.name)
            if x.dtype != y.dtype or not np.array_equal(x, y):
                return False
    return True


def test_real_dumps_read_the_same_row_wise(monkeypatch: MonkeyPatch) -> None:
    assert len(DUMPS) > 10
    for path in DUMPS:
        data = path.read_bytes()
        row_wise, by_field = _read(data, monkeypatch, True), _read(data, monkeypatch, False)
        assert not isinstance(row_wise, str) or path.parent.name == "fp16_debug", row_wise  # that one is refused
        assert _same(row_wise, by_field), path


@pytest.mark.parametrize("seed", range(3))
def test_mutated_real_dumps_give_the_same_columns_or_the_same_error(monkeypatch: MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    errors = 0
    for _ in range(80):
        data = bytearray(rng.choice(DUMPS).read_bytes())
        for _ in range(rng.choice([1, 2])):
            p = rng.randrange(len(data) - 4)
            patch = rng.choice([b"\0", b"\xff", b"\0\0", b"\xff\xff\xff\x7f", b"\0\0\0\0"])
            data[p : p + rng.choice([1, 2, 4])] = patch
        row_wise, by_field = _read(bytes(data), monkeypatch, True), _read(bytes(data), monkeypatch, False)
        assert _same(row_wise, by_field), (row_wise, by_field)
        errors += isinstance(row_wise, str)
    assert errors  # some mutants are refused, by both paths alike


def test_a_null_event_name_in_a_long_run_is_named() -> None:
    events = [Event(profile_event=ProfileEvent(f"op{i % 7}", 0, i, -1, None, None, 10, 20)) for i in range(400)]
    data = bytearray(write_etdump(ETDumpDoc(run_data=[RunDoc("Execute", events)])))
    buf = Buffer.of(bytes(data), None)
    run = read_etdump(bytes(data)).run_data[0]
    profile = buf.table(int(run.columns.table[123]), "ProfileEvent")
    name_at = profile.pos + struct.unpack_from("<H", data, profile.vtable + 4)[0]
    struct.pack_into("<I", data, name_at, 0)
    assert len(events) >= columns._ROW_WISE  # read row-wise
    with pytest.raises(ETDumpError,
                       match=r"field 0 \(name\) of ProfileEvent holds a null reference \(offset 0\)") as info:
        read_etdump(bytes(data), path="x.etdp")
    assert info.value.offset == name_at


@pytest.mark.parametrize("distinct", [1, 2, 3, 5])
def test_distinct_vtables_are_numbered_in_order_of_first_appearance(distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    values = rng.choice(np.array([700, 300, 900, 100, 500][:distinct], dtype=np.int64), size=1000)
    vtables, layout = columns._distinct(values)
    firsts = sorted(np.unique(values, return_index=True)[1])
    assert vtables.tolist() == values[firsts].tolist()
    assert (vtables[0 if layout is None else layout] == values).all()
    assert (layout is None) == (distinct == 1)


@pytest.mark.parametrize("differ", [None, (0, 0), (3, 17), (5, 39)])
def test_runs_that_repeat_keep_every_event_name(differ: tuple[int, int] | None) -> None:
    """Runs of one length are read as repeats of the first (their names interned once) only when
    every name equals the one a run before it: a run that differs keeps its own names."""
    def run(k: int) -> list[Event]:
        names = [f"native_call_op{i % 3}.out" for i in range(40)]
        if differ is not None and k == differ[0]:
            names[differ[1]] = "native_call_other.out"
        return [Event(profile_event=ProfileEvent(n, 0, i, -1, None, None, 10, 20)) for i, n in enumerate(names)]

    doc = ETDumpDoc(run_data=[RunDoc("Method::init", [Event(profile_event=ProfileEvent("Method::init", 0, -1, -1,
                                                                                       None, None, 1, 2))])]
                    + [RunDoc("Execute", run(k)) for k in range(6)])
    dump = read_etdump(write_etdump(doc))
    assert [[e.profile_event.name for e in r.events] for r in dump.run_data] == \
           [[e.profile_event.name for e in (r.events or ())] for r in doc.run_data]  # type: ignore[union-attr]
