"""Run structures: runs with equal event columns share one slot layout, found by comparing a run with
a few earlier runs of its length; past that bound a run's layout is worked out anew, never wrong."""

from __future__ import annotations

import warnings

import pytest

from numdiff import Inspector
from numdiff.profile import _structure
from numdiff.schema.etdump import ETDumpDoc, Event, ProfileEvent, RunDoc
from numdiff.schema.etdump.writer import write_etdump


def _run(variant: int, start: int) -> RunDoc:
    """Three ops; the first and last names are the same in every variant, the middle instruction differs."""
    names = ("native_call_add.out", f"native_call_op{variant}.out", "Method::execute")
    instructions = (0, 10 + variant, 99)
    return RunDoc("Execute", [Event(profile_event=ProfileEvent(n, 0, i, -1, None, None, start + 10 * k, start + 10 * k + 3 + variant))
                              for k, (n, i) in enumerate(zip(names, instructions))])


@pytest.mark.parametrize("variants", [1, 2, _structure._CANDIDATES + 2])
def test_runs_cycling_through_layouts_merge_by_layout(variants: int) -> None:
    runs = [_run(r % variants, 1000 * r) for r in range(6 * variants)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insp = Inspector(etdump_data=write_etdump(ETDumpDoc(0, runs)))
    assert len(insp.event_blocks) == variants
    for v, block in enumerate(insp.event_blocks):
        assert [e.name for e in block.events] == ["native_call_add.out", f"native_call_op{v}.out", "Method::execute"]
        durations = {len(e.perf_data.raw) for e in block.events if e.perf_data}
        assert durations == {6}  # each layout's six runs are one block's six samples
        assert block.events[1].perf_data is not None
        assert block.events[1].perf_data.raw == pytest.approx([(3 + v) / 1e6] * 6)


def test_a_run_equal_to_an_earlier_one_shares_its_structure_object() -> None:
    from numdiff.schema.etdump import read_etdump

    dump = read_etdump(write_etdump(ETDumpDoc(0, [_run(0, 0), _run(1, 100), _run(0, 200)])))
    structures = _structure.Structures(dump)
    first, again, other = (structures.of(r.columns) for r in (dump.run_data[0], dump.run_data[2], dump.run_data[1]))
    assert again[0] is first[0] and again[1] == first[1]
    assert other[1] != first[1]
