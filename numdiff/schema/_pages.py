"""The pages of a memory-mapped debug buffer that this process holds: drop them once read.

:class:`ResidentPages` is the part of :class:`numdiff.schema.debug_buffer.DebugBuffer` that talks
to the kernel about its mapping (``madvise``, ``/proc/self/pagemap``); no value ever changes.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Iterator

__all__ = ["ResidentPages"]


class ResidentPages:
    """Page management of a copy-on-write file mapping ``_map`` of ``size`` bytes at address ``_base``."""

    path: str
    size: int
    _map: mmap.mmap | bytes

    def _init_pages(self, base: int) -> None:
        self._base = base
        self._can_release = base != 0
        self._pagemap_ok = base != 0
        self._pending: tuple[int, int] | None = None
        self._pending_lock = threading.Lock()  # the gap releases from its worker thread too

    def release(self, value: object) -> None:
        """Drop the resident pages behind tensors of this buffer from this process.

        Pages only read are unmapped with ``MADV_DONTNEED`` (they stay in the page cache and are
        mapped again if touched). Pages a user wrote to are private copies that ``MADV_DONTNEED``
        would throw away, so the runs of them (``/proc/self/pagemap`` tells) get ``MADV_PAGEOUT``
        instead, which keeps them. No value ever changes. This keeps a
        comparison over hundreds of MB of logged tensors from holding them all in memory.
        Values that are not views of this buffer are ignored; where the kernel or platform offers
        neither, this does nothing. Ranges released one after the other that follow each other in
        the buffer are dropped together once they reach 8 MiB (a release of that much at once);
        the next release elsewhere drops them too, so at most 8 MiB wait.
        """
        if not self._can_release:
            return
        with self._pending_lock:
            for first, end in self._page_ranges(value):
                pending = self._pending
                if pending is not None and pending[0] <= first <= pending[1] + mmap.PAGESIZE:
                    self._pending = pending = (pending[0], max(pending[1], end))
                else:
                    if pending is not None:
                        self._drop(*pending)
                    self._pending = pending = (first, end)
                if pending[1] - pending[0] >= _BATCH:
                    self._drop(*pending)
                    self._pending = None

    def _drop(self, first: int, end: int) -> None:
        """Drop ``[first, end)``: ``MADV_DONTNEED`` where the pages are the file's, ``MADV_PAGEOUT``
        on the runs of pages this process wrote to (all of it when the pagemap cannot tell)."""
        try:
            for start, stop, private in self._page_runs(first, end):
                advice = _MADV_PAGEOUT if private else mmap.MADV_DONTNEED
                self._map.madvise(advice, start, min(stop, end) - start)  # type: ignore[union-attr]
        except (OSError, ValueError, AttributeError):
            self._can_release = False

    def _page_ranges(self, value: object) -> Iterator[tuple[int, int]]:
        """``(first page offset, end offset)`` of each tensor in ``value`` that views this buffer."""
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if not hasattr(t, "data_ptr") or not hasattr(t, "untyped_storage"):
                continue
            start = t.data_ptr() - self._base
            if not 0 <= start < self.size:
                continue
            yield start - start % mmap.PAGESIZE, min(self.size, start + t.untyped_storage().nbytes())

    def _page_runs(self, first: int, end: int) -> list[tuple[int, int, bool]]:
        """``(start, stop, private)`` runs covering ``[first, end)`` (``first`` page-aligned): whether
        their pages are copies this process wrote to (copy-on-write), or the file's; one run, taken
        as private, when ``/proc/self/pagemap`` cannot tell."""
        pagemap = _pagemap() if self._pagemap_ok else None
        if pagemap is None:
            return [(first, end, True)]
        page = mmap.PAGESIZE
        count = (end - first + page - 1) // page
        try:
            raw = os.pread(pagemap, 8 * count, (self._base + first) // page * 8)
        except OSError:
            self._pagemap_ok = False
            return [(first, end, True)]
        import numpy as np

        # present (bit 63) and not file-backed (bit 61): a private copy
        present_and_file = np.uint64((1 << 63) | (1 << 61))
        private = np.bitwise_and(np.frombuffer(raw, dtype=np.uint64), present_and_file) == np.uint64(1 << 63)
        if len(private) < count:  # a short read: tell nothing
            return [(first, end, True)]
        if not private.any():
            return [(first, end, False)]
        edges = [0, *(int(i) + 1 for i in np.flatnonzero(private[1:] != private[:-1])), count]
        return [(first + a * page, first + b * page, bool(private[a])) for a, b in zip(edges, edges[1:])]


#: Adjacent ranges released one after the other are dropped together, once they reach this size
#: (one pagemap read and one madvise instead of one per tensor); a release of at least this much is
#: dropped at once.
_BATCH = 8 << 20

#: Linux's MADV_PAGEOUT (5.4+); Python's mmap module does not always export the constant.
_MADV_PAGEOUT = getattr(mmap, "MADV_PAGEOUT", 21)


#: ``(pid, descriptor)`` of this process's ``/proc/self/pagemap``: opened once per process (a descriptor
#: per buffer was never closed), reopened in a forked child (the inherited one reads the parent's pages).
_PAGEMAP: tuple[int, int | None] | None = None


_PAGEMAP_LOCK = threading.Lock()  # the gap may release pages from a worker thread (numdiff.gap.presum)


def _pagemap() -> int | None:
    """This process's pagemap descriptor, opened on first use; None where there is none."""
    global _PAGEMAP
    pid = os.getpid()
    opened = _PAGEMAP
    if opened is not None and opened[0] == pid:
        return opened[1]
    with _PAGEMAP_LOCK:
        if _PAGEMAP is None or _PAGEMAP[0] != pid:
            try:
                fd: int | None = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                fd = None
            _PAGEMAP = (pid, fd)
        return _PAGEMAP[1]
