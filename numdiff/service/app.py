"""The REST API (FastAPI): projects → models → runs, uploads, results, compare. OpenAPI at ``/docs``.

Every ``/api/v1`` route needs ``Authorization: Bearer TOKEN``; a token sees its own project
only (another project's run is 404, like a run that does not exist). Uploads are stored, never
parsed, here: the analysis job (``numdiff.service.jobs``) reads them with the hardened readers.
"""

from __future__ import annotations

import asyncio
import csv
import errno
import io
import time
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response
from python_multipart.exceptions import MultipartParseError
from sqlalchemy import func, select

from numdiff.service import db, schemas
from numdiff.service.auth import project_for_token
from numdiff.service.settings import Settings
from numdiff.service.store import Store, TooLarge
from numdiff.service.upload import BadForm, parse_form
from numdiff.service.wake import wake_all

__all__ = ["create_app"]

FILE_FIELDS = {"etrecord", "etdump", "debug_buffer"}
COOKIE = "numdiff_token"


class Service:
    """What the routes share: settings, the database and the store."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = db.make_engine(settings.db_url)
        self.sessions = db.session_factory(self.engine)
        self.store = Store(settings.data, settings.store_quota_bytes)



#: How often a long-polling ``GET /api/v1/runs/{id}?wait=S`` looks at the run again.
_LONG_POLL_S = 0.05

def _json(model: Any, status_code: int = 200) -> Response:
    """Strict JSON with non-finite floats as "Infinity"/"NaN" strings (as the saved analysis writes them)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(COOKIE) if request.url.path.startswith("/ui") else None


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def current_project(request: Request) -> int:
    """The caller's project id (401 without a valid token)."""
    svc = _service(request)
    with svc.sessions() as s:
        project = project_for_token(s, _token(request))
    if project is None:
        raise HTTPException(401, "a valid bearer token is required (Authorization: Bearer TOKEN; "
                                 "create one with `numdiff admin create-token`)",
                            headers={"WWW-Authenticate": "Bearer"})
    return project.id


ProjectId = Annotated[int, Depends(current_project)]


def run_out(s: Any, run: db.Run) -> schemas.RunOut:
    model = s.get(db.ModelRow, run.model_id)
    jobs = s.execute(select(db.Job).where(db.Job.run_id == run.id).order_by(db.Job.stage, db.Job.id)).scalars().all()
    return schemas.RunOut(id=run.id, model=model.name, status=run.status, reason=run.reason,
                          labels={str(k): str(v) for k, v in (run.labels or {}).items()},
                          created=run.created, finished=run.finished, attempts=max((j.attempts for j in jobs), default=0),
                          jobs=[schemas.JobOut(kind=j.kind, status=j.status, attempts=j.attempts, elapsed_ms=j.elapsed_ms,
                                               reason=j.reason) for j in jobs],
                          artifacts={"etrecord": run.etrecord_sha256, "etdump": run.etdump_sha256,
                                     "debug_buffer": run.debug_buffer_sha256})


def get_run(s: Any, project: int, run_id: int) -> db.Run:
    """The run if it belongs to ``project``; 404 otherwise (unknown and foreign look the same)."""
    run: db.Run | None = s.get(db.Run, run_id)
    if run is None or run.project_id != project:
        raise HTTPException(404, f"no run {run_id} in this project")
    return run


def load_analysis(svc: Service, run: db.Run) -> Any:
    from numdiff.report import Analysis

    if run.status != db.DONE or run.analysis_sha256 is None:
        raise HTTPException(409, f"run {run.id} is {run.status}, not done" + (f": {run.reason}" if run.reason else ""))
    return Analysis.load(svc.store.path(run.analysis_sha256))


def run_result(svc: Service, s: Any, run: db.Run) -> schemas.RunResult:
    out = schemas.RunResult(**run_out(s, run).model_dump())
    if run.status != db.DONE or run.analysis_sha256 is None:
        return out
    a = load_analysis(svc, run)
    if a.gap is not None:
        out.gap = [schemas.GapRecord(
            aot_ops=r.aot_ops, runtime_ops=r.runtime_ops, gap=r.snr, aot_debug_handle=r.aot_debug_handle,
            aot_intermediate_output=None if r.aot_stats is None else r.aot_stats.model_dump(),
            runtime_intermediate_output=None if r.runtime_stats is None else r.runtime_stats.model_dump(),
            matched=r.matched, match=r.match) for r in a.gap.rows]
    else:
        out.gap_unavailable = a.gap_unavailable
    if a.culprits.available:
        out.culprits = [r.model_dump() for r in a.culprits.rows]
    else:
        out.culprits_unavailable = a.culprits.reason
    return out


def _labels_from(items: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or len(key) > 100 or len(value) > 500:
            raise HTTPException(422, f"label {item[:120]!r} is not KEY=VALUE (key ≤ 100, value ≤ 500 characters)")
        labels[key.strip()] = value.strip()
    return labels


def create_app(settings: Settings) -> FastAPI:
    """The ASGI application of one service instance (the schema must already be migrated)."""
    app = FastAPI(title="numdiff service", version="1",
                  description="Numerical debugging of ExecuTorch runs for device labs and CI: upload a run "
                              "(ETRecord, ETDump, debug buffer), get its per-layer SNR, culprits and HTML report, "
                              "compare runs.")
    app.state.service = Service(settings)

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, str]:
        svc = _service_app(app)
        with svc.sessions() as s:
            s.execute(select(1))
        return {"status": "ok"}

    @app.get("/api/v1/project", response_model=schemas.ProjectOut, tags=["projects"])
    def project_info(project: ProjectId) -> Response:
        svc = _service_app(app)
        with svc.sessions() as s:
            p = s.get(db.Project, project)
            models = s.scalar(select(func.count()).select_from(db.ModelRow).where(db.ModelRow.project_id == project))
            runs = s.scalar(select(func.count()).select_from(db.Run).where(db.Run.project_id == project))
        return _json(schemas.ProjectOut(name=p.name, models=models or 0, runs=runs or 0))

    @app.get("/api/v1/models", response_model=list[schemas.ModelOut], tags=["models"])
    def models(project: ProjectId) -> list[schemas.ModelOut]:
        svc = _service_app(app)
        with svc.sessions() as s:
            rows = s.execute(select(db.ModelRow, func.count(db.Run.id)).outerjoin(db.Run, db.Run.model_id == db.ModelRow.id)
                             .where(db.ModelRow.project_id == project).group_by(db.ModelRow.id)
                             .order_by(db.ModelRow.name)).all()
        return [schemas.ModelOut(name=m.name, runs=n, baseline_run=m.baseline_run_id) for m, n in rows]

    @app.put("/api/v1/models/{name}/baseline", response_model=schemas.ModelOut, tags=["models"])
    def set_baseline(name: str, body: schemas.BaselineRequest, project: ProjectId) -> schemas.ModelOut:
        svc = _service_app(app)
        with svc.sessions() as s:
            run = get_run(s, project, body.run_id)
            model = s.get(db.ModelRow, run.model_id)
            if model is None or model.name != name:
                raise HTTPException(404, f"run {body.run_id} is not a run of model {name!r}")
            model.baseline_run_id = run.id
            s.commit()
            n = s.scalar(select(func.count()).select_from(db.Run).where(db.Run.model_id == model.id)) or 0
            return schemas.ModelOut(name=model.name, runs=n, baseline_run=run.id)

    @app.post("/api/v1/runs", response_model=schemas.RunOut, status_code=201, tags=["runs"],
              openapi_extra={"requestBody": {"content": {"multipart/form-data": {"schema": {
                  "type": "object", "required": ["model", "etrecord", "etdump"],
                  "properties": {"model": {"type": "string"},
                                 "label": {"type": "array", "items": {"type": "string"},
                                           "description": "KEY=VALUE, repeatable"},
                                 "etrecord": {"type": "string", "format": "binary"},
                                 "etdump": {"type": "string", "format": "binary"},
                                 "debug_buffer": {"type": "string", "format": "binary"}}}}}}})
    async def upload_run(request: Request, project: ProjectId) -> Response:
        """Upload a run (streaming multipart; each file at most NUMDIFF_SERVICE_MAX_UPLOAD_MB, else 413)."""
        svc = _service_app(app)
        limit = svc.settings.max_upload_bytes
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > 3 * limit + (1 << 20):
            raise HTTPException(413, f"the upload is larger than the limit of {limit} bytes per file")
        try:
            form = await parse_form(request.stream(), request.headers.get("content-type", ""), svc.store,
                                    FILE_FIELDS, limit)
        except TooLarge as e:
            raise HTTPException(413, f"a file of the upload is {e} (NUMDIFF_SERVICE_MAX_UPLOAD_MB)") from None
        except (BadForm, MultipartParseError) as e:
            raise HTTPException(422, f"bad upload: {e}") from None
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):  # disk or quota full: nothing was committed
                raise HTTPException(507, "the server's store is full (no space left or quota exceeded); "
                                         "nothing was kept: retry once space is freed") from None
            raise
        model_name = (form.fields.get("model") or [""])[0].strip()
        if not model_name or len(model_name) > 200:
            raise HTTPException(422, "the form needs a model name (field 'model', at most 200 characters)")
        missing = [f for f in ("etrecord", "etdump") if f not in form.files]
        if missing:
            raise HTTPException(422, f"the form needs the file(s) {', '.join(missing)}")
        labels = _labels_from(form.fields.get("label", []))
        return await run_in_threadpool(_create_run, svc, project, model_name, labels, form.files)

    @app.get("/api/v1/runs", response_model=schemas.RunList, tags=["runs"])
    def list_runs(project: ProjectId, model: str | None = None, status: str | None = None,
                  label: Annotated[list[str] | None, Query(description="KEY=VALUE; repeatable (all must match)")] = None,
                  limit: int = Query(100, ge=1, le=1000)) -> Response:
        svc = _service_app(app)
        wanted = _labels_from(label or [])
        with svc.sessions() as s:
            q = select(db.Run).where(db.Run.project_id == project).order_by(db.Run.id.desc())
            if model is not None:
                q = q.join(db.ModelRow, db.ModelRow.id == db.Run.model_id).where(db.ModelRow.name == model)
            if status is not None:
                q = q.where(db.Run.status == status)
            for key, value in wanted.items():  # every label must match: one indexed EXISTS each
                q = q.where(select(db.RunLabel.run_id).where(db.RunLabel.run_id == db.Run.id, db.RunLabel.key == key,
                                                             db.RunLabel.value == value).exists())
            out = [run_out(s, run) for run in s.execute(q.limit(limit)).scalars()]
        return _json(schemas.RunList(runs=out))

    @app.get("/api/v1/runs/{run_id}", response_model=schemas.RunOut, tags=["runs"])
    async def show_run(run_id: int, project: ProjectId,
                       wait: float = Query(0.0, ge=0.0, le=30.0, description=(
                           "seconds to wait for the run to finish (done or failed) before answering: a long poll, "
                           "so clients learn of the result within about 50 ms without polling"))) -> Response:
        svc = _service_app(app)

        def look() -> tuple[str, Response]:
            with svc.sessions() as s:
                run = get_run(s, project, run_id)
                return run.status, _json(run_out(s, run))

        deadline = time.monotonic() + wait
        status, answer = await run_in_threadpool(look)
        while status not in (db.DONE, db.FAILED) and time.monotonic() < deadline:
            await asyncio.sleep(_LONG_POLL_S)
            status, answer = await run_in_threadpool(look)
        return answer

    @app.get("/api/v1/runs/{run_id}/result", response_model=schemas.RunResult, tags=["results"])
    def show_result(run_id: int, project: ProjectId) -> Response:
        """The run with its SNR gap rows and culprits (only ``status`` etc. until the job is done)."""
        svc = _service_app(app)
        with svc.sessions() as s:
            return _json(run_result(svc, s, get_run(s, project, run_id)))

    @app.get("/api/v1/runs/{run_id}/analysis.json", tags=["results"])
    def analysis_file(run_id: int, project: ProjectId) -> FileResponse:
        """The saved analysis (``numdiff.report.Analysis.load`` reads it)."""
        return _blob(app, project, run_id, "analysis_sha256", "application/json", f"run{run_id}.json")

    @app.get("/api/v1/runs/{run_id}/report.html", tags=["results"])
    def report_file(run_id: int, project: ProjectId) -> FileResponse:
        """The HTML report (self-contained: no CDN)."""
        return _blob(app, project, run_id, "report_sha256", "text/html; charset=utf-8", None)

    @app.get("/api/v1/runs/{run_id}/jobs/{kind}", tags=["results"])
    def stage_result(run_id: int, kind: str, project: ProjectId) -> FileResponse:
        """One stage's result as JSON once its job is done: ``profile`` (latency per event), ``gap``
        (SNR/MSE/L1 rows), ``culprits``, or ``report`` (the saved analysis). 409 until it is done."""
        svc = _service_app(app)
        if kind not in db.STAGES:
            raise HTTPException(422, f"no stage {kind!r}; the stages are {', '.join(db.STAGES)}")
        with svc.sessions() as s:
            run = get_run(s, project, run_id)
            job = s.execute(select(db.Job).where(db.Job.run_id == run.id, db.Job.kind == kind)
                            .order_by(db.Job.id.desc()).limit(1)).scalar()
            if job is None:
                raise HTTPException(404, f"run {run.id} has no {kind} job (it was analysed by an older numdiff: "
                                         "see its analysis.json)")
            if job.status != db.DONE or job.result_sha256 is None:
                raise HTTPException(409, f"the {kind} stage of run {run.id} is {job.status}"
                                         + (f": {job.reason}" if job.reason else ""))
            digest = job.result_sha256
        return FileResponse(svc.store.path(digest), media_type="application/json", filename=f"run{run_id}-{kind}.json")

    @app.get("/api/v1/runs/{run_id}/gap.csv", tags=["results"])
    def gap_csv(run_id: int, project: ProjectId) -> Response:
        """The gap rows as CSV: one row per aligned pair with its lowest SNR, MSE and L1."""
        svc = _service_app(app)
        with svc.sessions() as s:
            a = load_analysis(svc, get_run(s, project, run_id))
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["index", "aot_ops", "runtime_ops", "snr_db", "mse", "l1", "matched", "match", "module"])
        for r in (a.gap.rows if a.gap else []):
            w.writerow([r.index, " ".join(r.aot_ops), " ".join(r.runtime_ops), _low(r.snr), _high(r.mse), _high(r.l1),
                        r.matched, r.match or "", r.module or ""])
        return Response(buf.getvalue(), media_type="text/csv")

    @app.post("/api/v1/compare", response_model=schemas.CompareResult, tags=["compare"])
    def compare(body: schemas.CompareRequest, project: ProjectId) -> Response:
        """The CI gate over HTTP: ``new_run`` against ``base_run`` or the model's baseline (``numdiff diff``)."""
        import json

        from numdiff.report.diff_render import render_diff
        from numdiff.analysis.diff import Thresholds, diff_analyses

        svc = _service_app(app)
        with svc.sessions() as s:
            new = get_run(s, project, body.new_run)
            base_id = body.base_run
            if base_id is None:
                model = s.get(db.ModelRow, new.model_id)
                if model is None or model.baseline_run_id is None:
                    raise HTTPException(409, "give base_run, or set the model's baseline first "
                                             "(PUT /api/v1/models/{name}/baseline)")
                base_id = model.baseline_run_id
            base = get_run(s, project, base_id)
            a_base, a_new = load_analysis(svc, base), load_analysis(svc, new)
        report = diff_analyses(a_base, a_new, Thresholds(body.max_snr_drop_db, body.max_latency_increase_pct,
                                                         body.min_latency_increase_us, body.snr_cap_db))
        diff = json.loads(render_diff(report, "json"))
        return _json(schemas.CompareResult(passed=bool(report), base_run=base.id, new_run=new.id,
                                           regressions=len(report.regressions), diff=diff))

    from numdiff.service.web import add_pages

    add_pages(app)
    return app


def _low(values: list[float]) -> str:
    return "" if not values else repr(min(values))


def _high(values: list[float]) -> str:
    return "" if not values else repr(max(values))


def _service_app(app: FastAPI) -> Service:
    svc: Service = app.state.service
    return svc


def _blob(app: FastAPI, project: int, run_id: int, column: str, media_type: str, filename: str | None) -> FileResponse:
    svc = _service_app(app)
    with svc.sessions() as s:
        run = get_run(s, project, run_id)
        digest = getattr(run, column)
        if run.status != db.DONE or digest is None:
            raise HTTPException(409, f"run {run.id} is {run.status}, not done" + (f": {run.reason}" if run.reason else ""))
    return FileResponse(svc.store.path(digest), media_type=media_type, filename=filename)


def _create_run(svc: Service, project: int, model_name: str, labels: dict[str, str], files: dict[str, str]) -> Response:
    """The run and its job, in one transaction (a crash before the commit leaves no trace but orphan blobs)."""
    from sqlalchemy.exc import IntegrityError

    for _ in range(3):
        with svc.sessions() as s:
            model = s.execute(select(db.ModelRow).where(db.ModelRow.project_id == project,
                                                        db.ModelRow.name == model_name)).scalar_one_or_none()
            if model is None:
                model = db.ModelRow(project_id=project, name=model_name, created=db.now())
                s.add(model)
                try:
                    s.flush()
                except IntegrityError:  # created by a concurrent upload: use theirs
                    s.rollback()
                    continue
            run = db.Run(project_id=project, model_id=model.id, labels=labels, etrecord_sha256=files["etrecord"],
                         etdump_sha256=files["etdump"], debug_buffer_sha256=files.get("debug_buffer"),
                         status=db.QUEUED, created=db.now())
            s.add(run)
            s.flush()
            s.add_all(db.RunLabel(run_id=run.id, key=k, value=v) for k, v in labels.items())
            s.add_all(db.Job(run_id=run.id, kind=kind, stage=stage, status=db.QUEUED, attempts=0, created=db.now())
                      for stage, kind in enumerate(db.STAGES))
            s.commit()
            wake_all(svc.settings.data)
            return _json(run_out(s, run), status_code=201)
    raise HTTPException(503, "could not create the model row; retry")


