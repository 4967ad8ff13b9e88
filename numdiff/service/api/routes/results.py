"""``/api/v1/runs/{id}/...``: a run's results once analysed: rows, the saved analysis, the report, one stage, CSV."""

from __future__ import annotations

import csv
import io

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, Response

from numdiff.analysis.stages import STAGES
from numdiff.service import crud, schemas
from numdiff.service.api.deps import ProjectDep, SessionDep, StoreDep, RunId, load_analysis, owned_run, require_done
from numdiff.service.api.out import json_response, run_result
from numdiff.service.status import Status

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/runs/{run_id}", tags=["results"])


@router.get("/result", response_model=schemas.RunResult)
def show_result(run_id: RunId, project: ProjectDep, session: SessionDep, store: StoreDep) -> Response:
    """The run with its SNR gap rows and culprits (only ``status`` etc. until the job is done)."""
    return json_response(run_result(store, session, owned_run(session, project, run_id)))


@router.get("/analysis.json")
def analysis_file(run_id: RunId, project: ProjectDep, session: SessionDep, store: StoreDep) -> FileResponse:
    """The saved analysis (``numdiff.report.Analysis.load`` reads it)."""
    run = owned_run(session, project, run_id)
    return FileResponse(store.path(require_done(run, run.analysis_sha256)), media_type="application/json",
                        filename=f"run{run_id}.json")


@router.get("/report.html")
def report_file(run_id: RunId, project: ProjectDep, session: SessionDep, store: StoreDep) -> FileResponse:
    """The HTML report (self-contained: no CDN)."""
    run = owned_run(session, project, run_id)
    return FileResponse(store.path(require_done(run, run.report_sha256)), media_type="text/html; charset=utf-8")


@router.get("/jobs/{kind}")
def stage_result(run_id: RunId, kind: str, project: ProjectDep, session: SessionDep, store: StoreDep) -> FileResponse:
    """One stage's result as JSON once its job is done: ``profile`` (latency per event), ``gap``
    (SNR/MSE/L1 rows), ``culprits``, or ``report`` (the saved analysis). 409 until it is done."""
    if kind not in STAGES:
        raise HTTPException(422, f"no stage {kind!r}; the stages are {', '.join(STAGES)}")
    run = owned_run(session, project, run_id)
    job = crud.latest_job(session, run.id, kind)
    if job is None:
        raise HTTPException(404, f"run {run.id} has no {kind} job (it was analysed by an older numdiff: "
                                 "see its analysis.json)")
    if job.status != Status.DONE or job.result_sha256 is None:
        raise HTTPException(409, f"the {kind} stage of run {run.id} is {job.status}"
                                 + (f": {job.reason}" if job.reason else ""))
    return FileResponse(store.path(job.result_sha256), media_type="application/json",
                        filename=f"run{run_id}-{kind}.json")


@router.get("/gap.csv")
def gap_csv(run_id: RunId, project: ProjectDep, session: SessionDep, store: StoreDep) -> Response:
    """The gap rows as CSV: one row per aligned pair with its lowest SNR, MSE and L1.

    Text cells that a spreadsheet would run as a formula (starting with ``= + - @``, tab or CR)
    get a leading ``'``: op names and module paths come from uploaded files.
    """
    a = load_analysis(store, owned_run(session, project, run_id))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["index", "aot_ops", "runtime_ops", "snr_db", "mse", "l1", "matched", "match", "module"])
    for r in (a.gap.rows if a.gap else []):
        w.writerow([r.index, _text(" ".join(r.aot_ops)), _text(" ".join(r.runtime_ops)), _low(r.snr), _high(r.mse),
                    _high(r.l1), r.matched, _text(r.match or ""), _text(r.module or "")])
    return Response(buf.getvalue(), media_type="text/csv")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(cell: str) -> str:
    """A text cell a spreadsheet shows as text: a formula's first character gets a ``'`` before it (OWASP)."""
    return "'" + cell if cell.startswith(_FORMULA_START) else cell


def _low(values: list[float]) -> str:
    return "" if not values else repr(min(values))


def _high(values: list[float]) -> str:
    return "" if not values else repr(max(values))
