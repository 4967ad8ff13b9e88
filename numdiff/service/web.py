"""Server-rendered pages (Jinja2, no JavaScript build, no CDN): projects, models, runs, reports, comparison.

A browser signs in once with its project token (``/ui/login`` stores it in an HttpOnly,
SameSite=Strict cookie); every page then shows that project only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import func, select

from numdiff.service import db

__all__ = ["add_pages"]

_env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(),
                   trim_blocks=True, lstrip_blocks=True)


def _page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_env.get_template(name).render(**context), status_code=status_code)


def _min_snr(values: list[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    return min(finite) if finite else None


def _fmt_snr(v: float | None) -> str:
    if v is None:
        return "—"
    return "∞" if math.isinf(v) and v > 0 else f"{v:.1f}"


def _total_p50(analysis: Any) -> float | None:
    for block in analysis.profile.blocks:
        vals = [e.p50 for e in block.events if e.p50 is not None and e.name.startswith("Method::execute")]
        if vals:
            return float(sum(vals))
    return None


def add_pages(app: FastAPI) -> None:
    from numdiff.service.app import COOKIE, current_project, get_run, load_analysis, _service_app

    def project_or_login(request: Request) -> int | None:
        try:
            return current_project(request)
        except HTTPException:
            return None

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui", status_code=303)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/ui/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form() -> HTMLResponse:
        return _page("login.html", title="Sign in")

    @app.post("/ui/login", include_in_schema=False)
    def login(token: str = Form(...)) -> Response:
        svc = _service_app(app)
        from numdiff.service.auth import project_for_token

        with svc.sessions() as s:
            if project_for_token(s, token.strip()) is None:
                return _page("login.html", status_code=401, title="Sign in", error="That token is not valid.")
        resp = RedirectResponse("/ui", status_code=303)
        resp.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict", path="/ui")
        return resp

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    def project_page(request: Request) -> Response:
        project = project_or_login(request)
        if project is None:
            return RedirectResponse("/ui/login", status_code=303)
        svc = _service_app(app)
        with svc.sessions() as s:
            p = s.get(db.Project, project)
            rows = s.execute(select(db.ModelRow, func.count(db.Run.id)).outerjoin(db.Run, db.Run.model_id == db.ModelRow.id)
                             .where(db.ModelRow.project_id == project).group_by(db.ModelRow.id)
                             .order_by(db.ModelRow.name)).all()
        return _page("project.html", title=p.name, project=p, models=rows)

    @app.get("/ui/models/{name}", response_class=HTMLResponse, include_in_schema=False)
    def model_page(name: str, request: Request) -> Response:
        project = project_or_login(request)
        if project is None:
            return RedirectResponse("/ui/login", status_code=303)
        svc = _service_app(app)
        with svc.sessions() as s:
            model = _model_or_404(s, project, name)
            runs = s.execute(select(db.Run).where(db.Run.model_id == model.id).order_by(db.Run.id.desc())
                             .limit(500)).scalars().all()
        keys = sorted({k for r in runs for k in (r.labels or {})})
        return _page("model.html", title=name, model=model, runs=runs, keys=keys)

    @app.get("/ui/models/{name}/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(name: str, request: Request, by: str = "device") -> Response:
        """Lowest SNR of every op, one column per run (newest done run of each value of label ``by``)."""
        project = project_or_login(request)
        if project is None:
            return RedirectResponse("/ui/login", status_code=303)
        svc = _service_app(app)
        with svc.sessions() as s:
            model = _model_or_404(s, project, name)
            runs = s.execute(select(db.Run).where(db.Run.model_id == model.id, db.Run.status == db.DONE)
                             .order_by(db.Run.id.desc()).limit(500)).scalars().all()
        chosen: dict[str, db.Run] = {}
        for run in runs:
            chosen.setdefault(str((run.labels or {}).get(by, f"run {run.id}")), run)
        columns = sorted(chosen.items())[:24]
        table: dict[str, dict[str, float | None]] = {}
        order: list[str] = []
        totals: dict[str, float | None] = {}
        unit = ""
        for value, run in columns:
            analysis = load_analysis(svc, run)
            totals[value] = _total_p50(analysis)
            unit = analysis.profile.time_unit
            seen: dict[str, int] = {}
            for row in (analysis.gap.rows if analysis.gap else []):
                base = ", ".join(row.aot_ops) or "(no reference op)"
                seen[base] = seen.get(base, 0) + 1
                key = base if seen[base] == 1 else f"{base} #{seen[base]}"
                if key not in table:
                    table[key] = {}
                    order.append(key)
                table[key][value] = _min_snr(row.snr)
        worst = {k: min((v for v in table[k].values() if v is not None), default=None) for k in order}
        spread = {k: (max(vs) - min(vs)) if len(vs := [v for v in table[k].values() if v is not None and math.isfinite(v)]) > 1
                  else None for k in order}
        return _page("compare.html", title=f"{name}: compare by {by}", model=model, by=by, columns=columns,
                     order=order, table=table, worst=worst, spread=spread, totals=totals, unit=unit, fmt=_fmt_snr)

    @app.get("/ui/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(run_id: int, request: Request) -> Response:
        project = project_or_login(request)
        if project is None:
            return RedirectResponse("/ui/login", status_code=303)
        svc = _service_app(app)
        with svc.sessions() as s:
            run = get_run(s, project, run_id)
            model = s.get(db.ModelRow, run.model_id)
            jobs = s.execute(select(db.Job).where(db.Job.run_id == run.id).order_by(db.Job.stage, db.Job.id)).scalars().all()
        return _page("run.html", title=f"run {run.id}", run=run, model=model, jobs=jobs)

    @app.get("/ui/runs/{run_id}/report", include_in_schema=False)
    def run_report(run_id: int, request: Request) -> Response:
        project = project_or_login(request)
        if project is None:
            return RedirectResponse("/ui/login", status_code=303)
        svc = _service_app(app)
        with svc.sessions() as s:
            run = get_run(s, project, run_id)
        if run.report_sha256 is None:
            raise HTTPException(409, f"run {run.id} is {run.status}: no report yet")
        return FileResponse(svc.store.path(run.report_sha256), media_type="text/html; charset=utf-8")


def _model_or_404(session: Any, project: Any, name: str) -> Any:
    """The project's model called ``name``; another project's model is as absent as a missing one."""
    model = session.execute(select(db.ModelRow).where(db.ModelRow.project_id == project,
                                                      db.ModelRow.name == name)).scalar_one_or_none()
    if model is None:
        raise HTTPException(404, f"no model {name!r} in this project")
    return model
