"""Events kept in columns: the tables computed on the columns equal the ones made from ``Event``s.

``Inspector`` keeps each block's events in columns and makes the ``Event`` records on the first
access to ``block.events``. These tests check, on every real fixture and on synthetic dumps, that
the DataFrame, printed table and TSV computed on the columns (no records made) are identical to
the ones made from the records, and that the records are the same whenever they are made.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from numdiff import Inspector
from numdiff.profile.events import Event
from numdiff.schema.etdump import DebugEvent, ETDumpDoc, ProfileEvent, RunDoc
from numdiff.schema.etdump import Event as DumpEvent
from numdiff.schema.etdump.writer import write_etdump
from tests.conftest import artifact, fixture_names, load_expected

LOADABLE = [n for n in fixture_names() if "error" not in load_expected(n)["inspector"]]


def _quiet(**kw: Any) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(**kw)


def _fixture(name: str, linked: bool = False, hierarchy: bool = False) -> Inspector:
    etrecord = artifact(name, "etrecord") if linked else None
    return _quiet(etdump_path=artifact(name, "etdump"), debug_buffer_path=artifact(name, "debug_buffer"),
                  etrecord=etrecord, enable_module_hierarchy=hierarchy)


#: Each fixture without its ETRecord, with it, and with it and the module hierarchy grouping.
LINKS = [pytest.param(False, False, id="no-etrecord"), pytest.param(True, False, id="etrecord"),
         pytest.param(True, True, id="etrecord-hierarchy")]


def _views(insp: Inspector) -> tuple[pd.DataFrame, pd.DataFrame, str, str]:
    out, tsv = io.StringIO(), io.StringIO()
    insp.print_data_tabular(file=out)
    insp.save_data_to_tsv(tsv)
    return insp.to_dataframe(), insp.to_dataframe(include_units=False), out.getvalue(), tsv.getvalue()


def _assert_same_views(a: tuple[pd.DataFrame, pd.DataFrame, str, str], b: tuple[pd.DataFrame, pd.DataFrame, str, str]) -> None:
    pd.testing.assert_frame_equal(a[0], b[0], check_exact=True)
    pd.testing.assert_frame_equal(a[1], b[1], check_exact=True)
    assert a[2] == b[2]
    assert a[3] == b[3]
    assert a[0].to_string() == b[0].to_string()


@pytest.mark.parametrize(("linked", "hierarchy"), LINKS)
@pytest.mark.parametrize("name", LOADABLE)
def test_tables_on_columns_equal_tables_from_events(name: str, linked: bool, hierarchy: bool) -> None:
    insp = _fixture(name, linked, hierarchy)
    assert all(b._event_columns() is not None for b in insp.event_blocks)  # nothing made yet
    lazy = _views(insp)
    assert all(b._event_columns() is not None for b in insp.event_blocks if len(b._event_columns() or ())), \
        "the tables made Event records"
    for b in insp.event_blocks:  # make the records: the tables now come from them
        assert isinstance(b.events, list)
        assert b._event_columns() is None
    _assert_same_views(lazy, _views(insp))


@pytest.mark.parametrize(("linked", "hierarchy"), LINKS)
@pytest.mark.parametrize("name", LOADABLE)
def test_events_are_the_same_whenever_they_are_made(name: str, linked: bool, hierarchy: bool) -> None:
    early = _fixture(name, linked, hierarchy)
    early_events = [list(b.events) for b in early.event_blocks]
    late = _fixture(name, linked, hierarchy)
    _views(late)
    assert [list(b.events) for b in late.event_blocks] == early_events
    assert late.event_blocks == early.event_blocks


def test_linking_an_etrecord_makes_no_event_records() -> None:
    """The ETRecord's handles, op types and stack traces are set on the columns: the profiling view of
    a linked dump is built without making one ``Event``, and its table carries them."""
    name = next(n for n in LOADABLE if artifact(n, "etrecord") and n.startswith("mlp"))
    insp = _fixture(name, linked=True)
    assert all(b._event_columns() is not None for b in insp.event_blocks)
    frame = insp.to_dataframe()
    assert all(b._event_columns() is not None for b in insp.event_blocks)
    linked = frame[frame["op_types"].map(len) > 0]
    assert len(linked) and all(linked["stack_traces"].map(len) > 0)
    events = [e for b in insp.event_blocks for e in b.events]
    assert [e.op_types for e in events if e.op_types] == list(linked["op_types"])
    assert any(e.debug_handles is not None for e in events)


def _doc(runs: int, ops: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(runs):
        events = []
        for i in range(ops):
            start = int(rng.integers(0, 2**40))
            end = start + int(rng.integers(0, 10**7))
            if i % 7 == 3:  # a 32-bit timer that wrapped around
                start, end = 2**32 - 5, int(rng.integers(0, 1000))
            dint = i if i % 5 == 0 else -1
            events.append(DumpEvent(profile_event=ProfileEvent(f"op{i % 13}", 0, i, dint, None, None, start, end)))
            if i % 4 == 0:
                events.append(DumpEvent(debug_event=DebugEvent(0, i, None, -1, None, f"dbg{i}")))
        docs.append(RunDoc("Execute", events))
    return write_etdump(ETDumpDoc(0, docs))


@pytest.mark.parametrize(("runs", "seed"), [(1, 0), (2, 1), (7, 2), (100, 3)])
def test_statistics_on_columns_are_bit_identical_to_perf_data(runs: int, seed: int) -> None:
    data = _doc(runs, 60, seed)
    lazy, eager = _quiet(etdump_data=data), _quiet(etdump_data=data)
    for b in eager.event_blocks:
        assert b.events
    _assert_same_views(_views(lazy), _views(eager))
    events = [e for b in eager.event_blocks for e in b.events]
    assert any(e.is_delegated_op for e in events) and any(e.perf_data is None for e in events)


def test_time_scales_and_delegate_columns_follow_the_records() -> None:
    data = _doc(3, 20, 4)
    kw: dict[str, Any] = {"etdump_data": data, "source_time_scale": "us", "target_time_scale": "s"}
    lazy, eager = _quiet(**kw), _quiet(**kw)
    for b in eager.event_blocks:
        assert b.events
    pd.testing.assert_frame_equal(lazy.to_dataframe(include_delegate_debug_data=True),
                                  eager.to_dataframe(include_delegate_debug_data=True), check_exact=True)


def test_assigning_events_drops_the_columns() -> None:
    insp = _quiet(etdump_data=_doc(2, 5, 5))
    (block,) = insp.event_blocks
    assert block._event_columns() is not None
    block.events = [Event(name="mine")]
    assert block._event_columns() is None
    assert list(insp.to_dataframe()["event_name"]) == ["mine"]


@pytest.mark.parametrize("name", LOADABLE)
def test_events_made_from_columns_are_those_the_constructor_makes(name: str) -> None:
    """``materialise`` fills each record's attributes as one dict: the same attributes, in the same
    order, that ``Event(...)`` and the eager path's assignments give, and equal records."""
    insp = _fixture(name, linked=True)
    fresh = list(Event(name="x").__dict__)
    for block in insp.event_blocks:
        for ev in block.events:
            keys = [k for k in ev.__dict__ if k != "_start_row"]
            assert keys == fresh
            made = Event(name=ev.name, _instruction_id=ev._instruction_id)
            for key in fresh:
                if key != "_start_time_value":
                    setattr(made, key, getattr(ev, key))
            made._start_time = ev._start_time
            assert made == ev and made.__dict__ == ev.__dict__
