"""How many intra-op threads torch uses while numdiff runs a reference graph.

Running a reference graph is hundreds of small parallel regions, one per op. With torch's default
OpenMP pool, each region ends at a barrier where the pool's threads spin-wait for each other; on a
machine whose other cores are busy, a thread that lost its core holds up every op until it is
scheduled again. Measured on the 160-op benchmark model (``benchmarks/run.py``'s gap case, 2-CPU
machine shared with other work): the graph run took 1.6-3.6 s with torch's default 2 threads and
0.3-0.65 s with one, the same outputs; with the machine quiet, 0.25 s either way. So numdiff runs
reference graphs with one intra-op thread unless told otherwise:

* ``NUMDIFF_REFERENCE_THREADS`` unset: one thread (the default);
* ``NUMDIFF_REFERENCE_THREADS=0``: torch's own setting (``torch.set_num_threads``), untouched;
* ``NUMDIFF_REFERENCE_THREADS=N``: N threads (a large model on an idle many-core machine).

The setting is changed for the graph run only and restored after it. With torch's OpenMP backend
the thread count is that of the calling thread (other threads of the process keep theirs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from numdiff.errors import UsageError

__all__ = ["REFERENCE_THREADS_ENV", "caller_threads", "reference_threads", "graph_threads"]

REFERENCE_THREADS_ENV = "NUMDIFF_REFERENCE_THREADS"


def reference_threads() -> int | None:
    """The intra-op threads for a reference graph run (None: torch's own setting).

    Raises:
        UsageError: ``NUMDIFF_REFERENCE_THREADS`` is not a whole number >= 0.
    """
    raw = os.environ.get(REFERENCE_THREADS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit():
        raise UsageError(f"environment variable {REFERENCE_THREADS_ENV}={raw!r} is not a whole number >= 0\n"
                         "Unset it (one thread), set 0 (torch's own setting) or the number of threads.")
    return int(raw) or None


#: torch's intra-op thread count as the caller set it, inside a graph_threads block (None outside one).
_CALLER_THREADS: ContextVar[int | None] = ContextVar("numdiff_caller_threads", default=None)


def caller_threads() -> int:
    """torch's intra-op thread count as the caller set it: inside :func:`graph_threads`, the count
    before numdiff changed it (what the user allows numdiff to use), else torch's current one."""
    outer = _CALLER_THREADS.get()
    return torch.get_num_threads() if outer is None else outer


@contextmanager
def graph_threads() -> Iterator[None]:
    """Run the block with :func:`reference_threads` intra-op threads, restoring torch's count after."""
    wanted, before = reference_threads(), torch.get_num_threads()
    token = _CALLER_THREADS.set(caller_threads())
    try:
        if wanted is None or wanted == before:
            yield
            return
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(before)
    finally:
        _CALLER_THREADS.reset(token)
