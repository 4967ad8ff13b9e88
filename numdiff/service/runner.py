"""The process that runs a worker's analyses: forked once, limited, reused while it stays healthy.

A worker forks one runner from its warmed-up state, with its address space limited
(``RLIMIT_AS`` = ``NUMDIFF_SERVICE_JOB_MEMORY_MB``) and set to die with the worker. The runner
analyses one job at a time on request over a pipe and answers with an outcome code; it stays
alive between jobs, so what the analyses warm up (lazy imports, first-call kernel set-up) is paid
once per runner, not once per job. The worker replaces the runner after a job that ran out of
memory or died, when a job passes its time limit (the runner is killed), and after
``RECYCLE_AFTER`` jobs (bounding slow growth). Uploads are read only here, with numdiff's
hardened readers: never in the web process, never in the worker itself.
"""

from __future__ import annotations

import os
import resource
import signal
import traceback
from pathlib import Path
from typing import Any

__all__ = ["BAD_INPUT", "INTERNAL", "MEMORY", "OK", "RECYCLE_AFTER", "Runner", "die_with_parent"]

#: Outcome codes of a job (the runner's answer, or its exit status when it dies).
OK, BAD_INPUT, INTERNAL, MEMORY = 0, 3, 4, 7
#: Jobs a runner serves before it is replaced.
RECYCLE_AFTER = 200


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (no effect elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def analyse(paths: dict[str, str | None], labels: dict[str, str], out: Path, memory: int) -> int:
    """One job: write ``analysis.json`` and ``report.html`` into ``out`` (or ``reason.txt``); the outcome code."""
    try:
        from numdiff.errors import InternalError, NumdiffError
        from numdiff.report import Analysis, write_html

        try:
            analysis = Analysis.from_files(paths["etdump"], paths["etrecord"], paths["debug_buffer"], labels=labels)
            analysis.save(out / "analysis.json")
            write_html(analysis, out / "report.html")
        except InternalError as e:
            (out / "reason.txt").write_text(f"internal error in numdiff: {e}")
            return INTERNAL
        except NumdiffError as e:
            (out / "reason.txt").write_text(f"bad input: {e}")
            return BAD_INPUT
    except MemoryError:
        (out / "reason.txt").write_text(f"the analysis needed more than the job memory limit of "
                                        f"{memory >> 20} MiB (NUMDIFF_SERVICE_JOB_MEMORY_MB)")
        return MEMORY
    except Exception as e:  # noqa: BLE001 - a bug: say which
        (out / "reason.txt").write_text(f"internal error in numdiff: {type(e).__name__}: {e}\n"
                                        + traceback.format_exc(limit=8))
        return INTERNAL
    return OK


def _serve(conn: Any, memory: int) -> None:
    """The runner's loop: receive a job, analyse it, answer its code; leave after a memory failure."""
    die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides; a terminal's ^C reaches it
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        paths, labels, out = job
        code = analyse(paths, labels, Path(out), memory)
        try:
            conn.send(code)
        except (OSError, ValueError):
            os._exit(0)
        if code == MEMORY:  # the heap may be in a bad state: let the worker start a fresh runner
            os._exit(MEMORY)


class Runner:
    """The worker's handle on its runner process."""

    def __init__(self, ctx: Any, memory: int) -> None:
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, memory), daemon=True)
        self.process.start()
        child.close()
        self.jobs = 0

    def submit(self, paths: dict[str, str | None], labels: dict[str, str], out: Path) -> None:
        self.jobs += 1
        self._conn.send((paths, labels, str(out)))

    def poll(self, timeout: float) -> int | None:
        """The job's outcome code once known (the runner's answer, or its exit status if it died), else None."""
        if self._conn.poll(timeout):
            try:
                code: int = self._conn.recv()
                return code
            except (EOFError, OSError):
                pass
        if not self.process.is_alive():
            self.process.join()
            code = self.process.exitcode
            return code if code is not None and code != 0 else INTERNAL
        return None

    @property
    def usable(self) -> bool:
        return self.process.is_alive() and self.jobs < RECYCLE_AFTER

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self._conn.close()
