"""What one fuzz worker does with one case: build the mutant, run what a user runs, classify the outcome.

``run_case`` is also what ``campaign.py --replay DIR`` calls (in-process, with the traceback shown).
"""

from __future__ import annotations

import faulthandler
import hashlib
import io
import os
import resource
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

__all__ = ["CaseResult", "classify", "run_files", "worker_loop"]

GIB = 1 << 30
TIME_LIMIT_S = 2.0
AS_SLACK = 768 << 20  # address space the runtime itself may reserve during a case (thread stacks, arenas)
_NUMDIFF_DIR = str(Path(__file__).resolve().parent.parent / "numdiff")


@dataclass
class CaseResult:
    case: int
    kind: str
    seed: str
    strategy: str
    outcome: str  # ok | error | ESCAPE | TIMEOUT | MEMORY | MODIFIED | CANARY | CRASH | MUTATOR
    detail: str = ""  # NumdiffError class, or the escape's exception type
    message: str = ""
    frame: str = ""  # innermost numdiff frame module:function:line
    stage: str = ""
    wall: float = 0.0
    growth: int = 0  # peak RSS growth in bytes during the case
    file_bytes: int = 0
    gap_run: bool = False
    case_dir: str = ""
    recycle: bool = False


def _vsz() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _numdiff_frame(exc: BaseException) -> str:
    frame = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        if fs.filename.startswith(_NUMDIFF_DIR):
            rel = os.path.relpath(fs.filename, os.path.dirname(_NUMDIFF_DIR))
            frame = f"{rel[:-3].replace(os.sep, '.')}:{fs.name}:{fs.lineno}"
    return frame


def _is_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)[:500].lower()
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "not enough memory" in text)


def run_files(etdump: Path, etrecord: Path | None, debug_buffer: Path | None, *, gap: bool,
              progress: list[str] | None = None) -> str:
    """Run what a user runs on these files; returns the last stage. Raises what numdiff raises.

    ``progress`` (if given) gets each stage's name appended as it starts."""
    from numdiff.inspector import Inspector

    progress = [] if progress is None else progress
    progress.append("Inspector")
    inspector = Inspector(etdump_path=str(etdump), etrecord=None if etrecord is None else str(etrecord),
                          debug_buffer_path=None if debug_buffer is None else str(debug_buffer))
    progress.append("to_dataframe")
    inspector.to_dataframe()
    progress.append("print_data_tabular")
    inspector.print_data_tabular(file=io.StringIO())
    if gap and etrecord is not None and debug_buffer is not None:
        progress.append("calculate_numeric_gap")
        inspector.calculate_numeric_gap("SNR")
    return progress[-1]


def classify(result: CaseResult, files: dict[str, Path], *, gap: bool, canary: Path) -> None:
    """Run the case on ``files`` and fill in ``result`` (outcome, detail, timing, memory)."""
    from numdiff.errors import NumdiffError

    hashes = {role: _sha(p) for role, p in files.items()}
    result.file_bytes = sum(p.stat().st_size for p in files.values())
    result.gap_run = gap and "etrecord" in files and "debug_buffer" in files
    old_as = resource.getrlimit(resource.RLIMIT_AS)
    rss0 = _maxrss()
    stage: list[str] = []
    t0 = perf_counter()
    try:
        resource.setrlimit(resource.RLIMIT_AS, (_vsz() + GIB + result.file_bytes + AS_SLACK, old_as[1]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result.stage = run_files(files["etdump"], files.get("etrecord"), files.get("debug_buffer"), gap=gap,
                                     progress=stage)
        result.outcome = "ok"
    except NumdiffError as e:
        result.outcome, result.detail, result.message = "error", type(e).__name__, str(e)[:300]
        result.frame = _numdiff_frame(e)
    except Exception as e:  # noqa: BLE001 - the point: anything else escaped
        result.outcome = "MEMORY" if _is_memory(e) else "ESCAPE"
        result.detail = f"{type(e).__module__}.{type(e).__name__}".removeprefix("builtins.")
        try:
            result.message = str(e)[:300]
        except Exception:  # noqa: BLE001
            result.message = "(unprintable)"
        result.frame = _numdiff_frame(e)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old_as)
    result.wall = perf_counter() - t0
    if not result.stage:
        result.stage = stage[-1] if stage else "Inspector"
    result.growth = max(0, _maxrss() - rss0)
    if result.growth > GIB + result.file_bytes:
        result.outcome = "MEMORY"
    elif result.wall > TIME_LIMIT_S and result.outcome in ("ok", "error"):
        result.outcome = "TIMEOUT"
    if any(_sha(p) != hashes[role] for role, p in files.items()):
        result.outcome = "MODIFIED"
    if canary.exists():
        result.outcome = "CANARY"
    result.recycle = result.growth > (256 << 20)  # start a fresh worker so the next peaks are measurable


#: Sent by a worker once the mutant is on disk, just before the case runs (the parent's kill timer restarts).
STARTED = "started"


def worker_loop(conn: Any, seeds: list[Any], max_tasks: int, hang_dump_s: float = 6.0,
                log: str = os.devnull) -> None:
    """Serve cases from ``conn`` until told to stop or ``max_tasks`` are done (then exit to be replaced)."""
    from fuzz.mutators import FILENAMES, make_mutant, seeds_for

    import torch

    torch.set_num_threads(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # stray prints from libraries; results go through the pipe
    os.close(devnull)
    errlog = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(errlog, 2)  # log messages and warnings numdiff prints, out of the summary's way
    os.close(errlog)
    for _ in range(max_tasks):
        msg = conn.recv()
        if msg is None:
            return
        case, kind, seed_name, rng_seed, gap, case_dir = msg
        seed = next(s for s in seeds if s.name == seed_name)
        result = CaseResult(case, kind, seed_name, "", "ok", case_dir=case_dir)
        d = Path(case_dir)
        d.mkdir(parents=True, exist_ok=True)
        canary = d / "CANARY"
        try:
            mutant = make_mutant(kind, seed, rng_seed, str(canary), seeds_for(kind, seeds))
        except Exception as e:  # noqa: BLE001 - a bug in the fuzzer, not in numdiff
            result.outcome, result.detail, result.message = "MUTATOR", type(e).__name__, str(e)[:300]
            conn.send(asdict(result))
            continue
        result.strategy = mutant.strategy
        files = {}
        for role, data in mutant.files.items():
            (d / FILENAMES[role]).write_bytes(data)
            files[role] = d / FILENAMES[role]
        (d / "case.txt").write_text(f"kind={kind} seed={seed_name} rng_seed={rng_seed} strategy={mutant.strategy}\n")
        conn.send(STARTED)  # building a mutant (a 1,200-run ETDump, say) may take seconds: not the case's time
        with open(d / "stack-if-hung.txt", "w") as stack:  # where a killed case was stuck
            faulthandler.dump_traceback_later(hang_dump_s, file=stack)
            try:
                classify(result, files, gap=gap, canary=canary)
            finally:
                faulthandler.cancel_dump_traceback_later()
        conn.send(asdict(result))
        if result.recycle:
            return
