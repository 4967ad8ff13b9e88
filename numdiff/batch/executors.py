"""Where a batch's runs are analysed: a local process pool, or Ray (one machine or a cluster).

Both backends take a top-level function and a list of tasks and yield ``(task, result)`` pairs as
they finish, in any order; ``result`` is the function's return value or, when a worker died while
running the task (killed, out of memory), the exception that says so. The function itself never
raises for a bad run (``numdiff.batch.runner.analyse_task`` turns every failure into an outcome), so
one bad run never stops the batch.

* ``pool``: ``concurrent.futures.ProcessPoolExecutor`` with ``workers`` processes started from a
  ``forkserver`` that has already imported numdiff and torch (a worker starts warm; the parent's
  threads are never forked).
* ``ray``: ``ray.remote`` tasks, at most ``workers`` in flight (default: the cluster's CPUs). Uses
  the Ray already initialised in this process, else connects to ``address`` (a cluster, e.g.
  ``ray://head:10001`` or ``auto``), else starts a local Ray. Needs the ``ray`` extra.
  A local Ray started by ``numdiff batch --backend ray`` listens on loopback only: Ray would
  otherwise take the machine's external address and open its ports to the network. Set
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1`` to let it (a process that imported Ray before keeps its
  own setting).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from types import ModuleType
from typing import Any, TypeVar

from numdiff.errors import MissingDependencyError, NumdiffError, UsageError

__all__ = ["BACKENDS", "WorkerDied", "local_ray_on_loopback", "run_pool", "run_ray", "run_tasks"]

T = TypeVar("T")
R = TypeVar("R")

BACKENDS = ("pool", "ray")
#: Modules a pool worker imports before its first task (in the forkserver, once).
PRELOAD = ["torch", "numdiff.inspector", "numdiff.analysis._build", "numdiff.gap", "numdiff.culprits"]


class WorkerDied(NumdiffError):
    """The process analysing a task ended before returning (killed, out of memory, crashed).

    Not raised: it is the result recorded for that task, so one dead worker fails one run, not the batch."""


def run_tasks(fn: Callable[[T], R], tasks: Sequence[T], *, backend: str = "pool", workers: int | None = None,
              address: str | None = None) -> Iterator[tuple[T, R | BaseException]]:
    """Run ``fn`` on every task with the named backend; yields ``(task, result or exception)`` as they finish."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}\nChoose one of: {', '.join(BACKENDS)}.")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers} is not a positive number\nGive 1 or more (default: the CPU count).")
    if address is not None and backend != "ray":
        raise UsageError("--address goes with --backend ray\nThe local pool runs on this machine only.")
    if backend == "ray":
        return run_ray(fn, tasks, workers=workers, address=address)
    return run_pool(fn, tasks, workers=workers)


def _init_worker() -> None:
    """One thread per worker: the workers are the parallelism (torch's own threads would oversubscribe)."""
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def _pool_context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def run_pool(fn: Callable[[T], R], tasks: Sequence[T], *, workers: int | None = None
             ) -> Iterator[tuple[T, R | BaseException]]:
    """A local process pool of ``workers`` processes (default: the CPU count)."""
    if not tasks:
        return
    n = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    pending = list(reversed(tasks))
    while pending:
        with ProcessPoolExecutor(max_workers=n, mp_context=_pool_context(), initializer=_init_worker) as pool:
            inflight: dict[Future[R], T] = {}
            broken = False
            while (pending or inflight) and not broken:
                while pending and len(inflight) < 2 * n:
                    task = pending.pop()
                    inflight[pool.submit(fn, task)] = task
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for future in done:
                    task = inflight.pop(future)
                    try:
                        yield task, future.result()
                    except BrokenProcessPool as e:
                        broken = True
                        yield task, WorkerDied(f"a worker process died while this run was being analysed ({e})")
                    except Exception as e:  # noqa: BLE001 - e.g. a result that cannot be pickled back
                        yield task, e
            if broken:  # the pool is unusable: the other tasks in flight are retried in a new pool
                for future, task in inflight.items():
                    pending.append(task)
                inflight.clear()


def _ray() -> ModuleType:
    try:
        import ray
    except ImportError as e:
        raise MissingDependencyError("numdiff batch --backend ray", "ray", "ray") from e
    return ray


#: Ray reads it when imported: "0" makes a local Ray take 127.0.0.1 for its node (and so bind there).
_RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def local_ray_on_loopback(address: str | None) -> bool:
    """Before Ray is imported to start a local Ray (no ``address``): keep it on loopback unless told otherwise.

    Returns whether the environment now says loopback (``False`` when Ray was imported already, a
    cluster is to be reached, or ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is set to something else).
    """
    if address is None and "ray" not in sys.modules:
        os.environ.setdefault(_RAY_LOOPBACK_ENV, "0")
    return os.environ.get(_RAY_LOOPBACK_ENV) == "0"


def run_ray(fn: Callable[[T], R], tasks: Sequence[T], *, workers: int | None = None, address: str | None = None
            ) -> Iterator[tuple[T, R | BaseException]]:
    """Ray tasks: on the Ray already initialised here, else on ``address``, else on a new local Ray (on loopback)."""
    local_ray_on_loopback(address)
    ray = _ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is not None:
            kwargs["address"] = address
        elif workers is not None:
            kwargs["num_cpus"] = workers
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UsageError(f"cannot start or reach Ray{' at ' + address if address else ''}: {e}\n"
                             "Check --address (e.g. ray://HEAD:10001, or auto on a cluster node).") from e
        started = True
    try:
        if not tasks:
            return
        limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task(fn))
        pending = list(reversed(tasks))
        inflight: dict[Any, T] = {}
        while pending or inflight:
            while pending and len(inflight) < 2 * limit:
                task = pending.pop()
                inflight[remote.remote(task)] = task
            done, _ = ray.wait(list(inflight), num_returns=1)
            for ref in done:
                task = inflight.pop(ref)
                try:
                    yield task, ray.get(ref)
                except Exception as e:  # noqa: BLE001 - a dead worker or lost node: that task failed
                    yield task, WorkerDied(f"the Ray task died while this run was being analysed ({type(e).__name__}: "
                                           f"{' '.join(str(e).split())[:300]})")
    finally:
        if started:
            ray.shutdown()


def _ray_task(fn: Callable[[T], R]) -> Callable[[T], R]:
    def task(arg: T) -> R:
        _init_worker()
        return fn(arg)

    task.__name__ = getattr(fn, "__name__", "numdiff_task")
    task.__qualname__ = task.__name__
    return task
