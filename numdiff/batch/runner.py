"""Analyse every run of a manifest, in parallel, and write the fleet tables.

A run's result is its saved analysis (``numdiff.analysis.models.Analysis``, what ``numdiff analyze`` writes),
stored as ``OUT_DIR/analyses/<key>.json``. The key is a SHA-256 over the artifacts' SHA-256 hashes,
the analyses asked for, the labels and the numdiff version: a re-run finds the file and skips the
run; a changed file, label or numdiff gives a new key. A run that fails (missing or corrupt file,
mismatched artifacts, a bug) is recorded with its reason and never stops the batch; failures are
not stored, so a re-run tries them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from numdiff._core.files import atomic_write
from numdiff.analysis.models import Analysis
from numdiff.analysis.records import CulpritSection
from numdiff.batch.executors import run_tasks
from numdiff.batch.manifest import RunSpec
from numdiff.errors import AnalysisFileError, NumdiffError, UsageError

__all__ = ["ANALYSES", "BatchResult", "Outcome", "Task", "analyse_task", "run_batch"]

#: What a batch can compute per run; the profile always, the gap and culprits when asked.
ANALYSES = ("profile", "gap", "culprits")


@dataclass(frozen=True, slots=True)
class Task:
    """One run to analyse, as sent to a worker."""

    run: str
    key: str
    etdump: str
    etrecord: str | None
    debug_buffer: str | None
    labels: dict[str, str]
    analyses: tuple[str, ...]
    #: ``find_culprits`` options: the run's own inputs (``step_inputs``) or ``inputs_are_representative``.
    culprit_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a worker returns: the analysis as JSON and its flattened rows, or why it failed."""

    status: str  # "ok" or "failed"
    seconds: float = 0.0
    analysis_json: str | None = None
    run_fields: dict[str, Any] = field(default_factory=dict)
    op_rows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    error_type: str | None = None
    cpu_seconds: float | None = None
    worker_peak_rss_mib: float | None = None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """Counts and paths of one batch."""

    total: int
    ok: int
    failed: int
    reused: int
    seconds: float
    runs_path: str
    ops_path: str
    analyses_dir: str


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def _analyse(task: Task) -> Analysis:
    """The run's analysis through the one pipeline, with only the stages the batch asked for."""
    from numdiff.inspector import Inspector

    debug_buffer = task.debug_buffer if "gap" in task.analyses else None
    inspector = Inspector(etdump_path=task.etdump, etrecord=task.etrecord, debug_buffer_path=debug_buffer)
    paths = {"etdump": task.etdump, "etrecord": task.etrecord, "debug_buffer": debug_buffer}
    analysis = Analysis.from_inspector(inspector, task.labels, gap="gap" in task.analyses,
                                       culprits="culprits" in task.analyses,
                                       artifact_paths={k: v for k, v in paths.items() if v is not None},
                                       culprit_options=task.culprit_options)
    asked = "numdiff batch --analyses " + ",".join(task.analyses)
    if "gap" not in task.analyses:
        return analysis.model_copy(update={
            "gap_unavailable": f"not asked ({asked})",
            "culprits": CulpritSection(available=False, reason=f"not asked ({asked})")})
    if "culprits" not in task.analyses:
        return analysis.model_copy(update={"culprits": CulpritSection(available=False, reason=f"not asked ({asked})")})
    return analysis


def analyse_task(task: Task) -> Outcome:
    """Analyse one run (in a worker). Never raises for a bad run: the failure is the outcome."""
    from numdiff.batch.tables import flatten

    start, cpu = time.perf_counter(), time.process_time()

    def used() -> dict[str, Any]:
        return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                "worker_peak_rss_mib": _peak_rss_mib()}

    try:
        analysis = _analyse(task)
        run_fields, op_rows = flatten(analysis)
        return Outcome("ok", analysis_json=analysis.model_dump_json(indent=1), run_fields=run_fields,
                       op_rows=op_rows, **used())
    except (KeyboardInterrupt, SystemExit):
        raise
    except NumdiffError as e:
        return Outcome("failed", error=_one_line(str(e)), error_type=type(e).__name__, **used())
    except BaseException as e:  # noqa: BLE001 - a bug or exhausted memory on one run must not stop the batch
        return Outcome("failed", error=f"internal error: {_one_line(str(e)) or type(e).__name__}"
                       " (a bug in numdiff: please report it with this run's files)", error_type=type(e).__name__,
                       **used())


def _peak_rss_mib() -> float | None:
    """Peak resident memory of this (worker) process so far, in MiB (None where the OS does not say)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    peak = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


# --- keys -----------------------------------------------------------------------------------------

class _Hasher:
    """SHA-256 of files, remembered per (path, size, mtime): a shared ETRecord is read once per batch."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int, int], str] = {}

    def __call__(self, path: str) -> str:
        st = os.stat(path)
        ident = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        if ident not in self._seen:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            self._seen[ident] = digest.hexdigest()
        return self._seen[ident]


def _used_artifacts(spec: RunSpec, analyses: Sequence[str]) -> list[tuple[str, str]]:
    """``(role, path)`` of the files the asked analyses read (the debug buffer and the step inputs for the
    gap and culprits)."""
    return [(role, path) for role, path in
            (("etdump", spec.etdump), ("etrecord", spec.etrecord),
             ("debug_buffer", spec.debug_buffer if "gap" in analyses else None),
             ("step_inputs", spec.step_inputs if "gap" in analyses else None)) if path is not None]


def culprit_options(spec: RunSpec, analyses: Sequence[str], inputs_are_representative: bool) -> dict[str, Any]:
    """The run's stage options: its own inputs when the manifest gives them (the gap's reference runs on
    them too), else the batch's word that every run without them used the representative inputs."""
    if "gap" not in analyses:
        return {}
    from numdiff.analysis.stages import input_options

    return input_options(spec.step_inputs, inputs_are_representative and spec.step_inputs is None)


def run_key(spec: RunSpec, analyses: Sequence[str], hasher: Callable[[str], str],
            inputs_are_representative: bool = False) -> str:
    """The key of a run's saved analysis (raises ``OSError`` when an artifact cannot be read)."""
    from numdiff import __version__
    from numdiff.analysis.records import FORMAT_VERSION

    arts = {role: hasher(path) for role, path in _used_artifacts(spec, analyses)}
    declared = "inputs_are_representative" in culprit_options(spec, analyses, inputs_are_representative)
    blob = json.dumps({"artifacts": arts, "analyses": sorted(analyses), "labels": spec.labels,
                       "numdiff": __version__, "format": FORMAT_VERSION}
                      | ({"inputs_are_representative": True} if declared else {}), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def parse_analyses(text: str) -> tuple[str, ...]:
    """``"profile,gap"`` → the analyses to run (profile always; culprits need the gap)."""
    asked = {a.strip() for a in text.split(",") if a.strip()}
    unknown = asked - set(ANALYSES)
    if unknown:
        raise UsageError(f"unknown analysis {sorted(unknown)[0]!r} in --analyses {text!r}\n"
                         f"Choose from: {', '.join(ANALYSES)} (comma-separated).")
    if "culprits" in asked and "gap" not in asked:
        raise UsageError(f"--analyses {text!r}: culprits need the gap\nUse --analyses profile,gap,culprits.")
    return tuple(a for a in ANALYSES if a in asked or a == "profile")


# --- the batch --------------------------------------------------------------------------------------


def _labelled(spec: RunSpec, op_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"run": spec.run, **spec.labels, **r} for r in op_rows]

Progress = Callable[[str, int, int], None]


def run_batch(specs: Sequence[RunSpec], out_dir: str | os.PathLike[str], *, backend: str = "pool",
              workers: int | None = None, address: str | None = None, analyses: Sequence[str] = ANALYSES,
              progress: Progress | None = None, inputs_are_representative: bool = False) -> BatchResult:
    """Analyse every run not already analysed in ``out_dir``, then write the fleet tables there.

    ``inputs_are_representative``: every run without its own ``step_inputs`` used the ETRecord's
    representative inputs (``numdiff batch --inputs-are-representative``).

    Raises:
        UsageError: Bad backend/workers/address, or a missing optional package (``pyarrow``, ``ray``).
    """
    from numdiff.batch.tables import OpsWriter, _arrow, flatten, write_runs

    _arrow()  # fail before the work if the tables cannot be written
    start = time.perf_counter()
    out = os.fspath(out_dir)
    store = os.path.join(out, "analyses")
    os.makedirs(store, exist_ok=True)
    analyses = tuple(analyses)
    labels = list(dict.fromkeys(k for s in specs for k in s.labels))  # manifest order
    rows: dict[str, dict[str, Any]] = {}
    ops = OpsWriter(out, [s.run for s in specs], labels)  # op rows stream out in manifest order
    todo: list[Task] = []
    hasher = _Hasher()
    total = len(specs)

    def record(spec: RunSpec, status: str, **fields: object) -> None:
        base = {"run": spec.run, **spec.labels, "etdump": spec.etdump, "etrecord": spec.etrecord,
                "debug_buffer": spec.debug_buffer, "step_inputs": spec.step_inputs, "status": status, "reused": False}
        rows[spec.run] = {**base, **fields}
        if status != "ok":
            ops.put(spec.run, [])

    try:
        by_run = {s.run: s for s in specs}
        for n, spec in enumerate(specs):
            if progress is not None and n % 50 == 0:
                progress("hashing the artifacts", n, total)
            missing = [(role, path) for role, path in _used_artifacts(spec, analyses) if not os.path.isfile(path)]
            if missing:
                role, path = missing[0]
                record(spec, "failed", error=f"{role} file {path!r} does not exist (fix the path in the manifest, "
                       "or add the file)", error_type="FileNotFoundError")
                continue
            try:
                key = run_key(spec, analyses, hasher, inputs_are_representative)
            except OSError as e:
                record(spec, "failed", error=f"{e.filename}: {e.strerror or e} (fix the manifest's path, or the file)",
                       error_type="FileNotFoundError" if isinstance(e, FileNotFoundError) else "OSError")
                continue
            saved = os.path.join(store, key + ".json")
            if os.path.exists(saved):
                try:
                    run_fields, op_rows = flatten(Analysis.load(saved))
                except AnalysisFileError:
                    pass  # a damaged result: analyse again
                else:
                    record(spec, "ok", reused=True, key=key, analysis=os.path.relpath(saved, out), **run_fields)
                    ops.put(spec.run, _labelled(spec, op_rows))
                    continue
            todo.append(Task(spec.run, key, spec.etdump, spec.etrecord, spec.debug_buffer, dict(spec.labels), analyses,
                             culprit_options(spec, analyses, inputs_are_representative)))

        done = total - len(todo)
        for task, result in run_tasks(analyse_task, todo, backend=backend, workers=workers, address=address):
            spec = by_run[task.run]
            done += 1
            if progress is not None:
                progress("analysing", done, total)
            if not isinstance(result, Outcome):
                record(spec, "failed", key=task.key, error=_one_line(str(result)) or type(result).__name__,
                       error_type=type(result).__name__)
                continue
            if result.status != "ok" or result.analysis_json is None:
                record(spec, "failed", key=task.key, error=result.error, error_type=result.error_type,
                       seconds=result.seconds, cpu_seconds=result.cpu_seconds,
                       worker_peak_rss_mib=result.worker_peak_rss_mib)
                continue
            saved = os.path.join(store, task.key + ".json")
            atomic_write(saved, result.analysis_json)
            record(spec, "ok", key=task.key, analysis=os.path.relpath(saved, out), seconds=result.seconds,
                   cpu_seconds=result.cpu_seconds, worker_peak_rss_mib=result.worker_peak_rss_mib, **result.run_fields)
            ops.put(spec.run, _labelled(spec, result.op_rows))

        ordered = [rows[s.run] for s in specs]
        ops_path = ops.close()
        runs_path = write_runs(out, ordered, labels)
        ok = sum(1 for r in ordered if r["status"] == "ok")
        return BatchResult(total=total, ok=ok, failed=total - ok, reused=sum(1 for r in ordered if r["reused"]),
                           seconds=time.perf_counter() - start, runs_path=runs_path, ops_path=ops_path,
                           analyses_dir=store)
    except BaseException:  # no half-written ops.parquet left behind
        ops.abort()
        raise
