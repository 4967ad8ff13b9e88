"""Persisted analysis jobs and the worker processes that run them.

A worker (``python -m numdiff.service.worker --data DIR``, the database URL in ``NUMDIFF_SERVICE_DB_URL``; started by ``numdiff serve
--workers N``) claims one job at a time with an atomic ``UPDATE ... WHERE id = ? AND attempts = ?``
(a compare-and-set that works the same on SQLite and PostgreSQL), holds a lease on it that it
renews while the job runs, and has the job's stage run by its runner (:mod:`numdiff.service.worker.child`):
a process forked from the warmed-up worker, limited in address space (``RLIMIT_AS``), killed when
a job passes its wall-time limit, and reused across jobs while healthy. The runner reads the uploads
with numdiff's hardened readers (``numdiff.analysis.stages``): the web process never parses an
upload. A run's stages (profile, gap, culprits, report) are separate jobs that run in that order:
each stage's result goes to the store and its job row in one transaction; the report stage's
(the saved-analysis JSON and the HTML report) also to the run row, which is then done. A failed
stage fails the run with its reason, and its later stages with "not run".

A worker killed mid-job stops renewing its lease; once the lease runs out the job is claimed
again (``attempts`` counts the tries; past ``max_attempts`` the job fails with that reason).
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, Result, and_, case, exists, or_, select, update
from sqlalchemy.orm import Session, aliased

from numdiff.analysis.stages import STAGES, input_options
from numdiff.service import db
from numdiff.service.status import Status
from numdiff.service.settings import Settings
from numdiff.service.store import Store
from numdiff.service.worker.child import OK, Runner, die_with_parent
from numdiff.service.worker.wake import POLLERS, Waker, wake_all

__all__ = ["Worker", "claim", "culprit_options", "main"]


def culprit_options(run: db.Run, store: Store) -> dict[str, Any]:
    """The stages' options the run's upload gave: its own inputs (``step_inputs``, the stored file), or its
    word that it used the ETRecord's representative ones (the upload refuses both)."""
    return input_options(None if run.step_inputs_sha256 is None else str(store.path(run.step_inputs_sha256)),
                         run.inputs_are_representative)


def _rowcount(result: Result[Any]) -> int:
    """The rows an ``UPDATE`` matched (the compare-and-set succeeded when it is 1)."""
    return cast(CursorResult[Any], result).rowcount


def claim(session: Session, worker: str, lease_s: float, prefer_run: int | None = None) -> tuple[int, int] | None:
    """Claim the oldest claimable job; ``(job id, attempt)`` or None.

    A job is claimable when it is queued (or running with its lease run out) and every earlier
    stage of its run is done. Jobs of ``prefer_run`` come first: the worker that just ran a run's
    stage runs its next one, with the run's files still open in its runner.
    """
    t = db.now()
    earlier = aliased(db.Job)
    blocked = exists().where(earlier.run_id == db.Job.run_id, earlier.stage < db.Job.stage, earlier.status != Status.DONE)
    order = [db.Job.id] if prefer_run is None else [case((db.Job.run_id == prefer_run, 0), else_=1), db.Job.id]
    cand = session.execute(
        select(db.Job.id, db.Job.attempts).where(or_(db.Job.status == Status.QUEUED,
                                                     and_(db.Job.status == Status.RUNNING, db.Job.lease_until < t)),
                                                 ~blocked)
        .order_by(*order).limit(1)).first()
    if cand is None:
        session.rollback()
        return None
    res = session.execute(
        update(db.Job).where(db.Job.id == cand.id, db.Job.attempts == cand.attempts,
                             db.Job.status.in_((Status.QUEUED, Status.RUNNING)))
        .values(status=Status.RUNNING, worker=worker, attempts=cand.attempts + 1,
                lease_until=t + datetime.timedelta(seconds=lease_s)))
    session.commit()
    return (cand.id, cand.attempts + 1) if _rowcount(res) == 1 else None


class Worker:
    """One worker process's loop: claim, run in a limited child, record, repeat until told to stop."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.settings = settings
        self.name = name
        self.engine = db.make_engine(settings.db_url)
        self.sessions = db.session_factory(self.engine)
        self.store = Store(settings.data, settings.store_quota_bytes)
        self.stop = threading.Event()
        self._ctx = multiprocessing.get_context("fork")
        self._runner: Runner | None = None

    def runner(self) -> Runner:
        """The runner for the next job: the current one while usable, else a fresh fork."""
        if self._runner is None or not self._runner.usable:
            if self._runner is not None:
                self._runner.kill()
            self._runner = Runner(self._ctx, self.settings.job_memory_bytes)
        return self._runner

    def drop_runner(self) -> None:
        if self._runner is not None:
            self._runner.kill()
            self._runner = None

    def warm_up(self) -> None:
        """Import the analysis code (and run it once on the bundled example) so each forked job starts warm."""
        try:
            from numdiff.examples import example_files
            from numdiff.report import Analysis, render_html

            ex = example_files()
            render_html(Analysis.from_files(ex.etdump, ex.etrecord, ex.debug_buffer))
        except Exception:  # noqa: BLE001 - warming up is an optimisation only
            pass

    def run_forever(self, poll_s: float = 0.2) -> None:
        """Claim and run jobs until stopped; between jobs sleep ``poll_s`` or until woken (:mod:`numdiff.service.worker.wake`)."""
        parent = os.getppid()
        waker = Waker(self.settings.data, self.name)
        last_run: int | None = None
        try:
            while not self.stop.is_set():
                if os.getppid() != parent:  # the server died: stop (its restart starts new workers)
                    break
                with self.sessions() as s:
                    claimed = claim(s, self.name, self.settings.lease_s, prefer_run=last_run)
                if claimed is None:
                    last_run = None
                    waker.wait(poll_s)
                    continue
                last_run = self.run_job(*claimed)
        finally:
            waker.close()

    def _still_mine(self, job_id: int, attempt: int) -> ColumnElement[bool]:
        return and_(db.Job.id == job_id, db.Job.attempts == attempt, db.Job.worker == self.name,
                    db.Job.status == Status.RUNNING)

    def _finish(self, job_id: int, attempt: int, run_id: int, kind: str, status: Status, reason: str | None,
                result: str | None = None, report: str | None = None, elapsed_ms: int | None = None) -> None:
        """Record the job's outcome; the run is done after its report stage, failed after any failed stage."""
        with self.sessions() as s:
            res = s.execute(update(db.Job).where(self._still_mine(job_id, attempt))
                            .values(status=status, reason=reason, lease_until=None, elapsed_ms=elapsed_ms,
                                    result_sha256=result))
            if _rowcount(res) != 1:  # the lease was lost and someone else has the job now
                s.rollback()
                return
            if status == Status.FAILED:
                s.execute(update(db.Job).where(db.Job.run_id == run_id, db.Job.id != job_id,
                                               db.Job.status.in_((Status.QUEUED, Status.RUNNING)))
                          .values(status=Status.FAILED, lease_until=None, reason=f"not run: the {kind} stage failed"))
                s.execute(update(db.Run).where(db.Run.id == run_id)
                          .values(status=Status.FAILED, reason=reason, finished=db.now()))
            elif kind == STAGES[-1]:
                s.execute(update(db.Run).where(db.Run.id == run_id)
                          .values(status=Status.DONE, reason=None, analysis_sha256=result, report_sha256=report,
                                  finished=db.now()))
            s.commit()
        if status == Status.FAILED or kind == STAGES[-1]:  # the run is finished: wake its long polls
            wake_all(self.settings.data, POLLERS)

    def _stored_parts(self, run_id: int) -> dict[str, str]:
        """Store paths of the run's finished stage results, by kind."""
        with self.sessions() as s:
            rows = s.execute(select(db.Job.kind, db.Job.result_sha256).where(
                db.Job.run_id == run_id, db.Job.status == Status.DONE, db.Job.result_sha256.is_not(None))).all()
        return {kind: str(self.store.path(digest)) for kind, digest in rows if digest is not None}

    def run_job(self, job_id: int, attempt: int) -> int | None:
        """Run one claimed job to its end; the run's id (None if the job or run vanished)."""
        with self.sessions() as s:
            job = s.get(db.Job, job_id)
            run = s.get(db.Run, job.run_id) if job is not None else None
            model = s.get(db.ModelRow, run.model_id) if run is not None else None
        if job is None or run is None or model is None:
            return None
        run_id: int = run.id
        if attempt > self.settings.max_attempts:
            self._finish(job_id, attempt, run.id, job.kind, Status.FAILED,
                         f"the {job.kind} stage was started {attempt - 1} times and its worker died each time "
                         "(killed, or out of memory); giving up")
            return run_id
        if run.status == Status.QUEUED:
            with self.sessions() as s:
                s.execute(update(db.Run).where(db.Run.id == run.id, db.Run.status == Status.QUEUED)
                          .values(status=Status.RUNNING))
                s.commit()
        paths = {"etdump": str(self.store.path(run.etdump_sha256)), "etrecord": str(self.store.path(run.etrecord_sha256)),
                 "debug_buffer": None if run.debug_buffer_sha256 is None else str(self.store.path(run.debug_buffer_sha256))}
        labels = {str(k): str(v) for k, v in (run.labels or {}).items()}
        labels.setdefault("model", model.name)
        parts = self._stored_parts(run.id) if job.stage > 0 else {}
        options = culprit_options(run, self.store)
        out = self.store.temp_dir(f"job{job_id}-")
        started = time.monotonic()
        try:
            runner = self.runner()
            try:
                runner.submit(job.kind, paths, labels, out, parts, options)
            except OSError:  # the runner died since its last job: start another
                self.drop_runner()
                runner = self.runner()
                runner.submit(job.kind, paths, labels, out, parts, options)
            status, reason = self._supervise(runner, out, job_id, attempt, started)
            elapsed = int((time.monotonic() - started) * 1000)
            if status == "lost" or status == "stopped":
                return run_id
            if status == Status.DONE:
                try:
                    if job.kind == STAGES[-1]:
                        result, report = self.store.adopt(out / "analysis.json"), self.store.adopt(out / "report.html")
                    else:
                        result, report = self.store.adopt(out / "result.json"), None
                except OSError as e:  # disk or quota full: the job fails with the reason, nothing half-stored
                    self._finish(job_id, attempt, run.id, job.kind, Status.FAILED,
                                 f"could not store the results: {e.strerror or e} (free space in the data directory "
                                 "and submit the run again)", elapsed_ms=elapsed)
                    return run_id
                self._finish(job_id, attempt, run.id, job.kind, Status.DONE, None, result, report, elapsed)
            else:
                self._finish(job_id, attempt, run.id, job.kind, Status.FAILED, reason, elapsed_ms=elapsed)
            return run_id
        finally:
            shutil.rmtree(out, ignore_errors=True)
            self.store.tidy_tmp()  # an idle worker leaves no folder in tmp/

    def _supervise(self, runner: Runner, out: Path, job_id: int, attempt: int,
                   started: float) -> tuple[str, str | None]:
        beat = max(self.settings.lease_s / 3.0, 0.1)
        while True:
            code = runner.poll(timeout=min(beat, 0.5))
            if code is not None:
                break
            if self.stop.is_set():  # shutting down: give the job back for the next worker
                self.drop_runner()
                with self.sessions() as s:
                    s.execute(update(db.Job).where(self._still_mine(job_id, attempt))
                              .values(status=Status.QUEUED, worker=None, lease_until=None, attempts=attempt - 1))
                    s.commit()
                return "stopped", None
            if time.monotonic() - started > self.settings.job_timeout_s:
                self.drop_runner()
                return Status.FAILED, (f"the analysis took longer than the job time limit of "
                                   f"{self.settings.job_timeout_s:g} s (NUMDIFF_SERVICE_JOB_TIMEOUT_S)")
            with self.sessions() as s:
                res = s.execute(update(db.Job).where(self._still_mine(job_id, attempt))
                                .values(lease_until=db.now() + datetime.timedelta(seconds=self.settings.lease_s)))
                s.commit()
            if _rowcount(res) != 1:
                self.drop_runner()
                return "lost", None
        reason_file = out / "reason.txt"
        reason = reason_file.read_text(errors="replace")[:4000] if reason_file.exists() else None
        if code == OK:
            return Status.DONE, None
        if not runner.process.is_alive():
            self.drop_runner()
        if code < 0:
            return Status.FAILED, reason or (f"the analysis process was killed by signal {-code} "
                                         f"(out of memory? limit {self.settings.job_memory_bytes >> 20} MiB)")
        return Status.FAILED, reason or f"the analysis process exited with status {code}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numdiff.service.worker", description="a numdiff service worker")
    parser.add_argument("--data", required=True)
    parser.add_argument("--db", default=None, help="database URL (default: $NUMDIFF_SERVICE_DB_URL, else SQLite in --data)")
    parser.add_argument("--name", default=f"worker-{os.getpid()}")
    args = parser.parse_args(argv)
    settings = Settings.create(args.data, args.db)
    worker = Worker(settings, f"{args.name}-{os.getpid()}")

    warming = [True]

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        worker.stop.set()
        if warming[0]:  # nothing to give back yet: leave at once rather than finish warming up
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    die_with_parent(signal.SIGTERM)
    if os.environ.get("NUMDIFF_SERVICE_WARM_UP", "1") != "0":
        worker.warm_up()
    warming[0] = False
    worker.runner()  # fork the first runner now, not when the first job is waiting
    try:
        worker.run_forever()
    finally:
        worker.drop_runner()
        worker.store.release_tmp()
    return 0
