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

    def release(self, value: object) -> None:
        """Drop the resident pages behind tensors of this buffer from this process.

        Pages only read are unmapped with ``MADV_DONTNEED`` (they stay in the page cache and are
        mapped again if touched). Pages a user wrote to are private copies that ``MADV_DONTNEED``
        would throw away, so ranges holding any (``/proc/self/pagemap`` tells) get
        ``MADV_PAGEOUT`` instead, which keeps them. No value ever changes. This keeps a
        comparison over hundreds of MB of logged tensors from holding them all in memory.
        Values that are not views of this buffer are ignored; where the kernel or platform offers
        neither, this does nothing.
        """
        if not self._can_release:
            return
        for first, end in self._page_ranges(value):
            advice = _MADV_PAGEOUT if self._has_private_pages(first, end) else mmap.MADV_DONTNEED
            try:
                self._map.madvise(advice, first, end - first)  # type: ignore[union-attr]
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

    def _has_private_pages(self, first: int, end: int) -> bool:
        """Whether ``[first, end)`` holds pages this process wrote to (copy-on-write copies)."""
        pagemap = _pagemap() if self._pagemap_ok else None
        if pagemap is None:
            return True
        page = mmap.PAGESIZE
        count = (end - first + page - 1) // page
        try:
            raw = os.pread(pagemap, 8 * count, (self._base + first) // page * 8)
        except OSError:
            self._pagemap_ok = False
            return True
        import numpy as np

        # present (bit 63) and not file-backed (bit 61): a private copy
        present_and_file = np.uint64((1 << 63) | (1 << 61))
        flags = np.bitwise_and(np.frombuffer(raw, dtype=np.uint64), present_and_file)
        return bool(np.any(flags == np.uint64(1 << 63)))


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
