"""numdiff._core.heap: heap memory faulted in on a background thread, used by later allocations, results unchanged."""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import pytest
import torch

import numdiff._core.heap as heap
from numdiff._core.heap import MIN_BYTES, PREFAULT_ENV, Prefault, prefaulted_heap
from numdiff.inspector import Inspector
from tests.conftest import artifact

linux_glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or not heap._glibc_malloc(),
                                 reason="the prefault works on Linux with glibc only")
two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
                               reason="the gap populates on a second core only")


def _thread_faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def _wait(state: Prefault) -> None:
    assert state._finished.wait(60), "the populate thread did not end"


def test_does_nothing_below_the_minimum() -> None:
    with prefaulted_heap(MIN_BYTES - 1) as state:
        assert not state.done and state.finished and state.nbytes == 0


def test_does_nothing_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PREFAULT_ENV, "0")
    with prefaulted_heap(4 * MIN_BYTES) as state:
        assert not state.done


def test_does_nothing_off_the_main_thread() -> None:
    seen: list[bool] = []

    def work() -> None:
        with prefaulted_heap(4 * MIN_BYTES) as state:
            seen.append(state.done)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [False]


def test_runs_are_page_aligned_adjacent_blocks_lowest_first() -> None:
    block = heap.BLOCK_BYTES
    base = 1 << 30
    # 16 adjacent blocks (a 16-byte chunk header apart), a gap, 4 blocks (too short), a gap, 12 blocks
    first = [base + i * (block + 16) for i in range(16)]
    short = [base + (1 << 26) + i * (block + 16) for i in range(4)]
    last = [base + (1 << 27) + i * (block + 16) for i in range(12)]
    runs = heap._runs(last + short + first)
    assert [s for s, _ in runs] == [base, base + (1 << 27)]
    for (start, end), blocks in zip(runs, (first, last), strict=True):
        assert start % 4096 == 0 and end % 4096 == 0
        assert blocks[0] <= start < blocks[0] + 4096 and blocks[-1] + block - 4096 < end <= blocks[-1] + block


def _trim_free_heap() -> None:
    """Give the heap's free pages back (``malloc_trim``), so earlier tests' freed memory cannot pass for a populate."""
    import ctypes

    ctypes.CDLL(None).malloc_trim(0)


def _written_faults(nbytes: int) -> tuple[int, list[torch.Tensor]]:
    """Page faults this thread takes writing ``nbytes`` of 64 KiB tensors (heap allocations whatever
    glibc's mmap threshold is), and the tensors."""
    before = _thread_faults()
    tensors = [torch.full((16384,), float(i)) for i in range(nbytes // (64 << 10))]
    return _thread_faults() - before, tensors


@linux_glibc
def test_tensors_allocated_inside_take_the_populated_pages_and_stay_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = MIN_BYTES // 4096
    _trim_free_heap()
    monkeypatch.setenv(PREFAULT_ENV, "0")
    with prefaulted_heap(2 * MIN_BYTES) as state:
        assert not state.done
        control, tensors = _written_faults(MIN_BYTES)
    del tensors
    assert control > pages // 2, f"the control wrote {pages} fresh pages with only {control} faults"
    monkeypatch.delenv(PREFAULT_ENV)
    _trim_free_heap()
    with prefaulted_heap(2 * MIN_BYTES) as state:
        assert state.done and state.nbytes >= MIN_BYTES
        _wait(state)
        assert state.error == 0 and state.populated == state.nbytes
        taken, tensors = _written_faults(MIN_BYTES)
    assert taken < pages // 10, f"{taken} page faults in this thread for {pages} pages written"
    # after the block (fence freed): the tensors are ordinary, independent memory
    tensors[0].add_(1.0)
    assert all(bool((t == float(i)).all()) for i, t in enumerate(tensors[1:], start=1))
    assert bool((tensors[0] == 1.0).all())


@linux_glibc
def test_memory_handed_out_before_and_while_populating_keeps_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The populate runs over memory the calling thread has already taken and written, and is still
    writing: it must change no byte."""
    gate = threading.Event()
    real = heap._populate

    def gated(*args: object) -> None:
        assert gate.wait(60)
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(heap, "_populate", gated)
    count = 4 * MIN_BYTES // (64 << 10) - 64
    with prefaulted_heap(4 * MIN_BYTES) as state:
        assert state.done
        tensors = [torch.full((16384,), float(i)) for i in range(count // 2)]  # before the populate starts
        assert state.populated == 0
        gate.set()
        tensors += [torch.full((16384,), float(i)) for i in range(count // 2, count)]  # while it runs
        _wait(state)
        assert state.error == 0 and state.populated == state.nbytes
    assert all(bool((t == float(i)).all()) for i, t in enumerate(tensors))


@linux_glibc
def test_the_populate_stops_when_the_block_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_CHUNK", 16 * 4096)
    with prefaulted_heap(4 * MIN_BYTES) as state:
        assert state.done
    assert state.finished and state.error == 0
    assert state.populated < state.nbytes, "the whole range was populated for a block that needed none"


@linux_glibc
def test_a_refused_populate_is_recorded_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_MADV_POPULATE_WRITE", -1)  # an advice the kernel refuses (as before Linux 5.14)
    with prefaulted_heap(2 * MIN_BYTES) as state:
        _wait(state)
        assert state.done and state.error != 0 and state.populated == 0
        _, tensors = _written_faults(4 << 20)
    assert all(bool((t == float(i)).all()) for i, t in enumerate(tensors))


@linux_glibc
def test_no_thread_to_be_had_leaves_the_run_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    ran = False
    with prefaulted_heap(2 * MIN_BYTES) as state:
        ran = True
        assert not state.done and state.finished
    assert ran


@linux_glibc
@pytest.mark.parametrize("where", ["no brk heap", "blocks elsewhere", "another malloc"])
def test_nothing_is_populated_outside_glibcs_brk_heap(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the brk heap cannot be given back below a live fence (a thread arena's can)."""
    assert heap._glibc_malloc() and heap._heap_mapping() is not None
    if where == "no brk heap":
        monkeypatch.setattr(heap, "_heap_mapping", lambda: None)
    elif where == "blocks elsewhere":
        monkeypatch.setattr(heap, "_heap_mapping", lambda: (1 << 12, 1 << 13))
    else:
        monkeypatch.setattr(heap, "_glibc_malloc", lambda: False)
    with prefaulted_heap(2 * MIN_BYTES) as state:
        assert not state.done and state.populated == 0


def test_the_cap_follows_the_memory_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_meminfo_available", lambda: 8 << 30)
    monkeypatch.setattr(heap, "memory_headroom", lambda: 1 << 30)
    assert heap._available_bytes() == 1 << 30
    monkeypatch.setattr(heap, "memory_headroom", lambda: None)
    assert heap._available_bytes() == 8 << 30
    monkeypatch.setattr(heap, "memory_headroom", lambda: 4 * MIN_BYTES)  # a quarter of it is too little
    with prefaulted_heap(4 * MIN_BYTES) as state:
        assert not state.done


def _gap(name: str) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=artifact(name, "etdump"), etrecord=artifact(name, "etrecord"),
                              debug_buffer_path=artifact(name, "debug_buffer"))
        return inspector.calculate_numeric_gap("SNR")


def _gaps(df: pd.DataFrame) -> list[float]:
    return [g for gap in df["gap"] for g in (gap if isinstance(gap, list) else [gap])]


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bool]]]:
    """``(bytes asked, done)`` of every prefault the gap starts; the fixtures' outputs are small, so
    it asks for the minimum whenever it asks at all."""
    calls: list[tuple[int, bool]] = []
    real = heap.prefaulted_heap

    @contextmanager
    def spy(nbytes: int) -> Iterator[Prefault]:
        with real(2 * MIN_BYTES if nbytes else 0) as state:
            calls.append((nbytes, state.done))
            yield state

    monkeypatch.setattr(heap, "prefaulted_heap", spy)
    before = torch.get_num_threads()
    yield calls
    torch.set_num_threads(before)


@linux_glibc
@two_cores
@pytest.mark.parametrize("name", ["mlp_fp32", "cnn_nested"])
def test_the_gap_is_the_same_with_the_heap_faulted_in(name: str, spied: list[tuple[int, bool]],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(2)
    monkeypatch.setenv(PREFAULT_ENV, "0")
    plain = _gap(name)
    monkeypatch.delenv(PREFAULT_ENV)
    faulted = _gap(name)
    asked = [nbytes for nbytes, _ in spied]
    assert len(asked) == 2 and asked[1] > 0 and spied[1][1] is True
    a, b = _gaps(plain), _gaps(faulted)
    assert len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b, strict=True))
    for column in ("aot_intermediate_output", "runtime_intermediate_output"):
        for x, y in zip(plain[column], faulted[column], strict=True):
            xs, ys = (x, y) if isinstance(x, list) else ([x], [y])
            assert all(torch.equal(p, q) for p, q in zip(xs, ys, strict=True))


@two_cores
def test_the_gap_asks_for_the_runtime_tensors_bytes_and_none_on_one_thread(spied: list[tuple[int, bool]]) -> None:
    torch.set_num_threads(1)  # the user's one thread: no second thread to populate on
    _gap("mlp_fp32")
    torch.set_num_threads(2)
    df = _gap("mlp_fp32")
    logged = sum(t.numel() * t.element_size() for value in df["runtime_intermediate_output"]
                 for t in (value if isinstance(value, list) else [value]) if isinstance(t, torch.Tensor))
    one_thread, two = spied[0][0], spied[1][0]
    assert one_thread == 0
    assert two >= logged > 0
