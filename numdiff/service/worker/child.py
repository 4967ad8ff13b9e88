"""The process that runs a worker's analyses: forked once, limited, reused while it stays healthy.

A worker forks one runner from its warmed-up state, with its address space limited
(``RLIMIT_AS`` = ``NUMDIFF_SERVICE_JOB_MEMORY_MB``) and set to die with the worker. The runner
runs one job (one stage of a run's analysis: profile, gap, culprits, report) at a time on request
over a pipe and answers with an outcome code; it stays alive between jobs, so what the analyses
warm up (lazy imports, first-call kernel set-up) is paid once per runner, not once per job, and it
keeps the current run's ``Inspector`` and stage results for that run's next stage (a stage that
lands on another worker reads the earlier results from the store and reopens the files). The worker replaces the runner after a job that ran out of
memory or died, when a job passes its time limit (the runner is killed), and after
``RECYCLE_AFTER`` jobs (bounding slow growth). Uploads are read only here, with numdiff's
hardened readers: never in the web process, never in the worker itself.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import sys
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext

    from numdiff.analysis.records import CulpritSection
    from numdiff.analysis.stages import GapPart, ProfilePart
    from numdiff.inspector import Inspector

#: An earlier stage's result, as the next stage reads it.
Part = TypeVar("Part", "ProfilePart", "GapPart", "CulpritSection")

__all__ = ["BAD_INPUT", "INTERNAL", "MEMORY", "OK", "RECYCLE_AFTER", "Runner", "die_with_parent", "public_reason"]

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


#: The last run's Inspector and stage results, reused by that run's next stage (see :func:`analyse`).
_last: dict[str, Any] = {}


def _for_run(paths: dict[str, str | None], options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The cache of the run these files and options belong to (emptied when another run's job arrives).

    ``options`` (the culprit stage's) are part of the key: two runs of the same files uploaded with
    different declarations never share a culprit result.
    """
    key = (paths["etdump"], paths["etrecord"], paths["debug_buffer"], tuple(sorted((options or {}).items())))
    if _last.get("key") != key:
        _last.clear()
        _last["key"] = key
    return _last


def _inspector(paths: dict[str, str | None], cache: dict[str, Any]) -> Inspector:
    if "inspector" not in cache:
        from numdiff.inspector import Inspector

        cache["inspector"] = Inspector(etdump_path=paths["etdump"], etrecord=paths["etrecord"],
                                       debug_buffer_path=paths["debug_buffer"])
    inspector: Inspector = cache["inspector"]
    return inspector


def _part(model: type[Part], kind: str, parts: dict[str, str], cache: dict[str, Any]) -> Part:
    """An earlier stage's result: from this runner's memory, else from the store (another worker ran it)."""
    from numdiff.analysis.stages import load_part

    if kind not in cache:
        if kind not in parts:
            raise RuntimeError(f"the {kind} stage has no stored result")
        cache[kind] = load_part(model, Path(parts[kind]).read_bytes(), f"the stored {kind} result")
    part: Part = cache[kind]
    return part


#: An absolute path of two or more parts (what is left after the uploads' own paths are named).
_ABSOLUTE_PATH = re.compile(r"(?<![\w/.~])/(?:[^\s'\"/:]+/)+[^\s'\":,;)]*")


def public_reason(text: str, paths: dict[str, str | None]) -> str:
    """``text`` fit for the API and the pages: the uploads' store paths named by their field, other paths hidden.

    A reason is shown to everyone in the project; where the server keeps its files is not theirs
    to know (the full text goes to the server's log).
    """
    for kind, path in sorted(paths.items(), key=lambda kv: -len(kv[1] or "")):
        if path:
            text = text.replace(repr(path), f"<{kind}>").replace(path, f"<{kind}>")
    return _ABSOLUTE_PATH.sub("<path>", text)


def _log(kind: str, out: Path, detail: str) -> None:
    """The full story of a failed job, for the operator (the worker's stderr is the server's log)."""
    print(f"numdiff worker: the {kind} stage ({out.name}) failed: {detail}", file=sys.stderr, flush=True)


def run_stage(kind: str, paths: dict[str, str | None], labels: dict[str, str], out: Path, parts: dict[str, str],
              options: Mapping[str, Any] | None = None) -> None:
    """Run one stage: ``result.json`` into ``out`` (``report``: ``analysis.json`` and ``report.html``).

    ``options`` are the run's ``find_culprits`` keyword arguments (the declarations its upload made);
    its own inputs (``step_inputs``) are the gap stage's too.
    """
    from numdiff.analysis.records import CulpritSection
    from numdiff.analysis.stages import GapPart, ProfilePart, assemble, culprit_part, dump_part, gap_part, profile_part

    cache = _for_run(paths, options)
    if kind == "profile":
        result: Any = profile_part(_inspector(paths, cache), {k: v for k, v in paths.items() if v is not None})
    elif kind == "gap":
        result = gap_part(_inspector(paths, cache), paths["etdump"], options=options)
    elif kind == "culprits":
        result = culprit_part(_inspector(paths, cache), _part(GapPart, "gap", parts, cache), options)
    elif kind == "report":
        from numdiff.report import write_html

        analysis = assemble(labels, _part(ProfilePart, "profile", parts, cache), _part(GapPart, "gap", parts, cache),
                            _part(CulpritSection, "culprits", parts, cache))
        analysis.save(out / "analysis.json")
        write_html(analysis, out / "report.html")
        _last.clear()  # the run is finished: free its Inspector
        return
    else:
        raise RuntimeError(f"unknown job kind {kind!r}")
    cache[kind] = result
    (out / "result.json").write_text(dump_part(result), encoding="utf-8")


def analyse(kind: str, paths: dict[str, str | None], labels: dict[str, str], out: Path, parts: dict[str, str],
            memory: int, options: Mapping[str, Any] | None = None) -> int:
    """One job (one stage of a run's analysis): its files into ``out``, or ``reason.txt``; the outcome code.

    The runner keeps the run's ``Inspector`` and stage results between jobs, so the stages of a
    run that one worker runs back to back open its files once.
    """
    named = {**paths, "step_inputs": (options or {}).get("step_inputs")}  # the uploads a reason may name
    try:
        from numdiff.errors import InternalError, NumdiffError

        try:
            run_stage(kind, paths, labels, out, parts, options)
        except InternalError as e:
            _last.clear()
            _log(kind, out, f"internal error: {e}\n{traceback.format_exc()}")
            (out / "reason.txt").write_text(public_reason(f"internal error in numdiff: {e}", named))
            return INTERNAL
        except NumdiffError as e:
            _last.clear()
            _log(kind, out, f"bad input: {e}")
            (out / "reason.txt").write_text(public_reason(f"bad input: {e}", named))
            return BAD_INPUT
    except MemoryError:
        _last.clear()
        (out / "reason.txt").write_text(f"the analysis needed more than the job memory limit of "
                                        f"{memory >> 20} MiB (NUMDIFF_SERVICE_JOB_MEMORY_MB)")
        return MEMORY
    except Exception as e:  # noqa: BLE001 - a bug: say which (the traceback goes to the log only)
        _last.clear()
        _log(kind, out, traceback.format_exc())
        (out / "reason.txt").write_text(public_reason(f"internal error in numdiff: {type(e).__name__}: {e} "
                                                      "(the details are in the server's log)", named))
        return INTERNAL
    return OK


def _serve(conn: Connection, memory: int) -> None:
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
        kind, paths, labels, out, parts, options = job
        code = analyse(kind, paths, labels, Path(out), parts, memory, options)
        try:
            conn.send(code)
        except (OSError, ValueError):
            os._exit(0)
        if code == MEMORY:  # the heap may be in a bad state: let the worker start a fresh runner
            os._exit(MEMORY)


class Runner:
    """The worker's handle on its runner process."""

    def __init__(self, ctx: ForkContext, memory: int) -> None:
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, memory), daemon=True)
        self.process.start()
        child.close()
        self.jobs = 0

    def submit(self, kind: str, paths: dict[str, str | None], labels: dict[str, str], out: Path,
               parts: dict[str, str], options: Mapping[str, Any] | None = None) -> None:
        """Start one stage; ``parts`` are the store paths of the run's finished earlier stages, ``options``
        the run's culprit options (plain values: they cross a pipe)."""
        self.jobs += 1
        self._conn.send((kind, paths, labels, str(out), parts, dict(options or {})))

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
            exitcode = self.process.exitcode
            return exitcode if exitcode is not None and exitcode != 0 else INTERNAL
        return None

    @property
    def usable(self) -> bool:
        return self.process.is_alive() and self.jobs < RECYCLE_AFTER

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self._conn.close()
