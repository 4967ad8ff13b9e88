"""Fault in, ahead of time, the heap memory a reference-graph run will fill.

The gap returns every AOT intermediate output (320 MiB on ``benchmarks/run.py``'s gap case), so
the graph run writes that much memory the process never touched, and the kernel takes one page
fault per 4 KiB page (zeroing and charging it): on the 2-CPU dev VM about 2-3 us a page, 0.2 s of
the graph run's 0.4 s. :func:`prefaulted_heap` takes those pages on a background thread, with
``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14 or later), while the calling thread builds and runs the
graph, so the graph run finds its memory already there (``benchmarks/page_faults.py gap``). It is
for a caller that allows a second thread: the populate does the same kernel work as the faults (it
saves only each page's trap), and done in the calling thread it measured no faster in a trial.

How, without changing any malloc setting: it grows glibc's main heap with blocks below glibc's
smallest mmap threshold (so they come from the heap), keeps the highest block (the fence) and frees
the others. Freed, they coalesce into free chunks that the fence keeps off the top of the heap (so
glibc does not give them back), and the run's allocations are carved from them. Only blocks inside
the ``[heap]`` mapping of ``/proc/self/maps`` (the brk heap, which glibc can shrink only from the
top, that is never below the live fence) are populated, and only when ``malloc`` is glibc's own
(not a preloaded allocator). The populate then faults in their pages: it changes no byte (a page
already present is left alone, a missing one reads as zeros either way), so it is harmless to
memory glibc has handed out again meanwhile; the fence stays until the populate has ended, which
it does early when the block ends first. On exit the fence is freed; free memory at the top of the
heap is trimmed by glibc as usual, free memory below live chunks stays in the heap (resident, as
any freed heap memory) until it is reused or ``malloc_trim`` runs.

It does nothing (the block sees ``Prefault.done`` False) unless: Linux with glibc's malloc, the
calling thread is the main thread, ``nbytes`` is at least :data:`MIN_BYTES`, and
``NUMDIFF_PREFAULT`` is not ``0``; ``nbytes`` is capped at a quarter of the memory still available
(``MemAvailable``, or the cgroup's limit less its usage when that is lower). A failure (no memory,
an old kernel, no thread to be had) stops the populate and leaves the run as it would have been.
What it does never changes a result, only where the run's memory comes from.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from numdiff._core.cgroup import memory_headroom

__all__ = ["BLOCK_BYTES", "MIN_BYTES", "PREFAULT_ENV", "Prefault", "prefaulted_heap"]

#: Environment variable: ``0`` turns the prefault off.
PREFAULT_ENV = "NUMDIFF_PREFAULT"
#: Below this the per-page saving is not worth the blocks' bookkeeping.
MIN_BYTES = 32 << 20
#: Heap blocks: below glibc's smallest mmap threshold (128 KiB), so always from the heap.
BLOCK_BYTES = 120 << 10
#: Runs of adjacent blocks shorter than this are not populated.
_MIN_RUN = 1 << 20
#: One populate call: short, so a thread that maps memory meanwhile never waits long.
_CHUNK = 4 << 20
_PAGE = 4096
_MADV_POPULATE_WRITE = 23


@dataclass
class Prefault:
    """What :func:`prefaulted_heap` did: ``done`` (blocks set up, populate started), their bytes,
    whether the populate has ended (``finished``) and how many bytes it faulted in."""

    done: bool = False
    nbytes: int = 0
    populated: int = 0
    error: int = 0
    """errno of a populate call the kernel refused (0: none)."""
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def finished(self) -> bool:
        return self._finished.is_set()


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.malloc = libc.malloc
        self.malloc.restype, self.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        self.free = libc.free
        self.free.restype, self.free.argtypes = None, [ctypes.c_void_p]
        self.madvise = libc.madvise
        self.madvise.restype, self.madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _applies(nbytes: int) -> bool:
    if os.environ.get(PREFAULT_ENV, "").strip() == "0" or nbytes < MIN_BYTES:
        return False
    if not sys.platform.startswith("linux"):
        return False
    return threading.current_thread() is threading.main_thread() and _glibc_malloc()


def _glibc_malloc() -> bool:
    """Whether the process's ``malloc`` is glibc's (not musl's, nor jemalloc, tcmalloc... preloaded)."""
    try:
        ours = ctypes.cast(ctypes.CDLL(None).malloc, ctypes.c_void_p).value
        glibc = ctypes.cast(ctypes.CDLL("libc.so.6").malloc, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return False
    return ours is not None and ours == glibc


def _available_bytes() -> int:
    """Memory the process may still take: ``MemAvailable``, or less when its cgroup allows less."""
    available = _meminfo_available()
    headroom = memory_headroom()
    return available if headroom is None else min(available, headroom)


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _heap_mapping() -> tuple[int, int] | None:
    """``(start, end)`` of the brk heap (``[heap]`` in ``/proc/self/maps``), None when there is none."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if line.rstrip().endswith("[heap]"):
                    start, _, end = line.split()[0].partition("-")
                    return int(start, 16), int(end, 16)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _runs(blocks: list[int]) -> list[tuple[int, int]]:
    """Page-aligned ``(start, end)`` of the runs of blocks that follow each other in memory, lowest
    first (glibc carves later allocations from the lowest free memory first), at least :data:`_MIN_RUN` long."""
    runs: list[tuple[int, int]] = []
    ordered = sorted(blocks)
    start, end = ordered[0], ordered[0] + BLOCK_BYTES
    for address in ordered[1:]:
        if 0 <= address - end <= 64:  # consecutive heap chunks are one chunk header apart
            end = address + BLOCK_BYTES
        else:
            runs.append((start, end))
            start, end = address, address + BLOCK_BYTES
    runs.append((start, end))
    aligned = [((s + _PAGE - 1) & ~(_PAGE - 1), e & ~(_PAGE - 1)) for s, e in runs]
    return [(s, e) for s, e in aligned if e - s >= _MIN_RUN]


@contextmanager
def prefaulted_heap(nbytes: int) -> Iterator[Prefault]:
    """Inside the block, up to ``nbytes`` of free main-heap memory are being faulted in on a
    background thread (see the module docstring). Yields a :class:`Prefault`."""
    state = Prefault()
    if not _applies(nbytes):
        state._finished.set()
        yield state
        return
    nbytes = min(nbytes, _available_bytes() // 4)
    if nbytes < MIN_BYTES:
        state._finished.set()
        yield state
        return
    libc = _Libc()
    blocks: list[int] = []
    fence: list[int] = []
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        runs = _set_up(libc, nbytes, blocks, fence)
    finally:
        for address in blocks:
            libc.free(address)
        blocks.clear()
    try:
        if runs:
            thread = threading.Thread(target=_populate, args=(libc, runs, state, stop), name="numdiff-prefault",
                                      daemon=True)
            try:
                thread.start()
                state.done, state.nbytes = True, sum(e - s for s, e in runs)
            except RuntimeError:  # no thread to be had (pids.max, RLIMIT_NPROC): the run goes on as usual
                thread = None
        if thread is None:
            state._finished.set()
        yield state
    finally:
        if thread is not None:
            stop.set()  # the block has ended: what is not populated yet is not needed
            thread.join()  # the fence keeps the range mapped until the populate has ended
        for address in fence:
            libc.free(address)


def _set_up(libc: _Libc, nbytes: int, blocks: list[int], fence: list[int]) -> list[tuple[int, int]]:
    """Allocate the blocks (into ``blocks``), keep the highest as the fence (into ``fence``): the runs
    below it inside the brk heap to populate, none when too little came (the caller frees the
    blocks either way)."""
    for _ in range(nbytes // BLOCK_BYTES):
        address = libc.malloc(BLOCK_BYTES)
        if not address:
            break
        blocks.append(address)
    if len(blocks) * BLOCK_BYTES < MIN_BYTES:
        return []
    highest = max(blocks)
    heap = _heap_mapping()
    if heap is None or not heap[0] <= highest < heap[1]:
        return []  # the fence must pin the brk heap's top, or nothing stops glibc giving the range back
    blocks.remove(highest)
    fence.append(highest)
    return [(s, e) for s, e in _runs(blocks) if heap[0] <= s and e <= highest]


def _populate(libc: _Libc, runs: list[tuple[int, int]], state: Prefault, stop: threading.Event) -> None:
    try:
        for start, end in runs:
            while start < end and not stop.is_set():
                size = min(_CHUNK, end - start)
                if libc.madvise(start, size, _MADV_POPULATE_WRITE) != 0:
                    state.error = ctypes.get_errno()
                    return
                state.populated += size
                start += size
    finally:
        state._finished.set()
