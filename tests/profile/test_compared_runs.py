"""Loading a dump with many runs: only the first max_compared_runs runs are read and compared at load.

tests/fixtures/deeper_decode (oracle): 6 runs of one decode step whose logged values differ run to
run. With the limit lowered to 2, runs 2-5 are not read at load (a note says so), and their values,
read on demand, equal what a full load gives.
"""

from __future__ import annotations

import warnings

import torch

from numdiff import Inspector
from numdiff.limits import use_limits
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "deeper_decode"


def _open() -> tuple[Inspector, list[str]]:
    """The Inspector and its load notes (every one: the single warning gives their count and the first)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inspector = Inspector(etdump_path=FOLDER / "etdump.etdp", etrecord=FOLDER / "etrecord.bin",
                              debug_buffer_path=FOLDER / "debug_buffer.bin")
    [warning] = caught
    assert f"{len(inspector.notes)} notes" in str(warning.message) and "\n" not in str(warning.message)
    return inspector, list(inspector.notes)


def _logged(inspector: Inspector) -> list[tuple[str, int, list[object]]]:
    return [(e.name, run, e.debug_data_for_run(run)) for b in inspector.event_blocks for e in b.events
            if e.debug_data for run in range(6)]


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_later_runs_are_read_on_demand_and_equal_a_full_load() -> None:
    full, full_notes = _open()
    with use_limits(max_compared_runs=2):
        limited, limited_notes = _open()
    assert not any("not compared" in n for n in full_notes)
    note = next(n for n in limited_notes if "not compared" in n)
    assert "6 runs; the logged values of runs 2 and later were not compared with run 0's" in note
    assert "max_compared_runs=2" in note
    assert "runs [1, 2, 3, 4]" in " ".join(full_notes) or "runs [1, 2, 3, 5]" in " ".join(full_notes)
    assert "runs [1]" in " ".join(limited_notes) and "runs [1, 2" not in " ".join(limited_notes)
    a, b = _logged(full), _logged(limited)
    assert len(a) == len(b) > 0
    assert all(x[:2] == y[:2] and _same(x[2], y[2]) for x, y in zip(a, b))


def test_no_note_when_later_runs_logged_nothing() -> None:
    # many_runs (oracle): 20 runs of a profile-only dump: nothing to compare, nothing to say
    folder = FIXTURES / "many_runs"
    with use_limits(max_compared_runs=2), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inspector = Inspector(etdump_path=folder / "etdump.etdp", etrecord=folder / "etrecord.bin")
    assert max(len(e.perf_data.raw) for b in inspector.event_blocks for e in b.events if e.perf_data) == 20
    assert not any("not compared" in str(w.message) for w in caught)


def test_value_budget_bounds_the_runs_compared() -> None:
    # deeper_decode logs the same number of values in each of its 6 runs (154 intermediates and the
    # program outputs); a budget of three runs' worth compares three runs, and the note says why
    full, _ = _open()
    intermediates = sum(1 for b in full.event_blocks for e in b.events if e.debug_data for _ in e.debug_data)
    per_run = intermediates + sum(len(b.run_output or []) for b in full.event_blocks)
    with use_limits(max_compared_values=3 * per_run + 1):
        limited, notes = _open()
    note = next(n for n in notes if "not compared" in n)
    assert "the logged values of runs 3 and later were not compared" in note
    assert f"limit max_compared_values={3 * per_run + 1}, {per_run} values per run" in note
    a, b = _logged(full), _logged(limited)
    assert len(a) == len(b) > 0
    assert all(x[:2] == y[:2] and _same(x[2], y[2]) for x, y in zip(a, b))


def test_value_budget_never_compares_fewer_than_two_runs() -> None:
    with use_limits(max_compared_values=1):
        _, notes = _open()
    assert any("runs 2 and later were not compared" in n for n in notes)
    assert any("runs [1]" in n for n in notes)
