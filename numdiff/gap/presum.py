"""Score the gap's pairs while the reference graph is still running.

The gap's metric reads every AOT output and the runtime tensor logged under its handle: hundreds of
MB on a large model (0.17-0.2 s of CPU for the 160 pairs, 640 MB, of ``benchmarks/run.py``'s gap
case). Done after the whole graph has run, it adds its time to the graph's. :func:`presumming`
gives :func:`numdiff.gap.gather` an ``on_pair`` callback that computes each likely pair's
:func:`~numdiff.comparators.numerics.finite_difference_sums` as soon as the graph produced its
output, and the scoring loop then finds them (:class:`~numdiff.comparators.numerics.PresummedPairs`;
same memory, unchanged, or computed again):

* when torch may use more than one intra-op thread (the libraries' default on a multi-core
  machine), on one worker thread, so the sums overlap the graph run, which keeps one thread
  (``numdiff.capture.threads``). The worker is a plain thread running numpy loops that release
  the GIL; it starts no thread pool of its own, so nothing spin-waits for a core, and on a busy
  machine it only waits its turn. On the benchmark's gap case the calling thread's CPU time went
  from about 0.64 s to 0.38-0.43 s (fresh processes on a busy 2-core machine);
* with one thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``), in the calling thread
  right away (the same work as scoring after the graph, measured no faster or slower; the runtime
  tensor's pages leave the process sooner). numdiff then uses one thread.

Only the built-in metrics whose scores are those sums (SNR, MSE, L1: ``difference_sums_need_l1``)
are computed ahead; any other metric, or a subclass overriding ``element_compare`` or
``preprocessing``, gets no callback. The runtime tensor's debug-buffer pages are dropped once its
sums are taken (``DebugBuffer.release``), so peak memory does not grow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numdiff.gap.inputs import OnPair

__all__ = ["Presum", "presumming", "worker_threads"]


def worker_threads() -> int:
    """Threads the gap may score on besides the calling one: 1 when torch may use several intra-op
    threads as the caller set it (``numdiff.capture.caller_threads``: numdiff's own one-thread graph
    runs do not count) and the process may run on several cores (its affinity, and its cgroup's CPU
    quota when it has one), else 0 (the user's one-thread setting holds)."""
    import os

    from numdiff._core.cgroup import cpu_limit
    from numdiff.capture import caller_threads

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cpu_limit()  # a container's CPU quota can buy less than the cores it sees
    return 1 if caller_threads() > 1 and cores > 1 and (quota is None or quota >= 2) else 0


@dataclass(frozen=True, slots=True)
class Presum:
    """What :func:`presumming` gives the gap: the callback for ``gather`` and the page release for the
    scoring loop."""

    on_pair: OnPair | None
    """``on_pair`` for :func:`numdiff.gap.gather` (None when the metric does not use the sums)."""
    release: Callable[[Any], None] | None
    """``release(runtime_value)`` after a pair is scored: drops the debug-buffer pages, unless the
    pair was answered from the sums computed ahead (its pages were dropped then, and not read since)."""


@contextmanager
def presumming(need_l1: bool | None, release_pages: Callable[[Any], None] | None) -> Iterator[Presum]:
    """Compute the pairs' sums ahead inside the block (see the module docstring).

    ``need_l1``: whether the sums must include ``sum(|a-b|)`` (``difference_sums_l1`` of the
    metric; None: the metric does not use the sums, nothing is computed ahead). ``release_pages``:
    the debug buffer's ``release`` (None: no buffer).
    """
    from numdiff.comparators.numerics import presummed

    if need_l1 is None:
        yield Presum(None, release_pages)
        return

    def release(b: Any) -> None:
        if release_pages is not None:
            release_pages(b)

    with presummed() as sums:
        def release_unless_answered(b: Any) -> None:
            if not sums.answered(b):
                release(b)

        if not worker_threads():
            def inline(a: Any, b: Any) -> None:
                sums.compute(a, b, need_l1)
                release(b)

            yield Presum(inline, release_unless_answered)
            return
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="numdiff-gap-sums")
        try:
            def submit(a: Any, b: Any) -> None:
                sums.submit(a, b, need_l1, pool, after=lambda: release(b))

            yield Presum(submit, release_unless_answered)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
