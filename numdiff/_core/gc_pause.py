"""Pause Python's cyclic garbage collector while numdiff builds large acyclic structures.

Loading a program and running the reference graph allocate many short-lived objects in a
process that already holds torch's ~200k objects, so the allocation-triggered full
collections (which walk every tracked object) cost more than the work itself. The work
creates no reference cycles that must be reclaimed before it ends, so the collector is
paused for its duration and restored afterwards; reference counting still frees memory as
usual. Nesting and threads are counted: the collector comes back only when the last pause
ends, and never if the caller had disabled it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block, restoring the caller's setting after."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
