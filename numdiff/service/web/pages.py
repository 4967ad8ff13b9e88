"""Server-rendered pages (Jinja2, no JavaScript build, no CDN): projects, models, runs, reports, comparison.

A browser signs in once with its project token: ``/ui/login`` starts a session
(:func:`numdiff.service.auth.start_session`) and keeps its random id, never the token, in an
HttpOnly, SameSite=Strict cookie with a ``Max-Age``; every page then shows that project only, until
the session expires or ``POST /ui/logout`` ends it. Forms that change state (signing in and out)
accept only same-origin posts: a page on another origin cannot sign a visitor in to the attacker's
project (login CSRF) or out, see :func:`same_origin`.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Cookie, Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from urllib.parse import quote, urlsplit

from numdiff._core.names import ops_title
from numdiff._core.terminal import printable
from numdiff.errors import NumdiffError
from numdiff.service import crud, db
from numdiff.service.api.deps import (
    COOKIE,
    ServiceDep,
    SessionDep,
    StoreDep,
    load_analysis,
    optional_project,
    owned_model,
    owned_run,
)
from numdiff.service.api.out import program_check
from numdiff.service.auth import SESSION_MAX_AGE_S, end_session, start_session
from numdiff.service.schemas import MAX_ID
from numdiff.service.status import Status
from numdiff.analysis.doubt import rows_clear_of_doubt
from numdiff.report.verdicts import CULPRIT, INHERITED, cause, lowest_snr, total_p50
from numdiff.service.web.render import STYLESHEET, page
from numdiff.service.web.summary import run_rows

__all__ = ["PageAnswer", "add_page_answers", "router"]

router = APIRouter(include_in_schema=False)

#: The caller's project, or None: a page then sends the browser to the sign-in form.
PageProject = Annotated[int | None, Depends(optional_project)]


class PageAnswer(NumdiffError):
    """Raised by a page's dependencies when the page answers otherwise: the sign-in form, or an error page a
    person can leave. :func:`add_page_answers` makes the app send ``response`` (caught there, never shown)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _is_page(request: Request) -> bool:
    return request.url.path == "/ui" or request.url.path.startswith("/ui/")


def _refused_page(request: Request, status_code: int, message: str) -> HTMLResponse:
    """An error on a page (a NUL in the URL, a form without its field, an unknown page) as a page with a way back."""
    return page("error.html", status_code=status_code, title=_TITLES.get(status_code, "Error"),
                message=printable(message, newlines=False), crumbs=[],
                back=("/ui", "Back to your project's models"), signed_in=COOKIE in request.cookies)


#: The heading of an error page, by status code.
_TITLES = {400: "Bad request", 403: "Refused", 404: "Not found", 405: "Not allowed", 409: "Not ready",
           422: "Bad request"}


def add_page_answers(app: FastAPI) -> None:
    """Send a :class:`PageAnswer`'s response, and answer every other error under ``/ui`` (an ``HTTPException``
    such as the 422 for a NUL in the URL, a form that fails validation, a page that does not exist) with
    an HTML error page a person can leave, never FastAPI's JSON; the API keeps its JSON answers.
    Call once on the app that includes :data:`router`."""
    from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    async def answer(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageAnswer)
        return exc.response

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if _is_page(request):
            return _refused_page(request, exc.status_code, str(exc.detail))
        return await http_exception_handler(request, exc)

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if _is_page(request):
            said = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'the request'}: "
                             f"{str(e.get('msg', 'invalid')).lower()}" for e in exc.errors())
            return _refused_page(request, 422, f"this request could not be read ({said})")
        return await request_validation_exception_handler(request, exc)

    app.add_exception_handler(PageAnswer, answer)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)


def signed_in(project: PageProject) -> int:
    """The caller's project; the sign-in form for a browser that is not signed in."""
    if project is None:
        raise PageAnswer(_to_login())
    return project


SignedIn = Annotated[int, Depends(signed_in)]


def _not_found(e: HTTPException, session: SessionDep, project: int) -> PageAnswer:
    return PageAnswer(_error_page(e, crumbs=[_home(session, project)], back=("/ui", "Back to the project's models")))


def page_model(name: str, project: SignedIn, session: SessionDep) -> db.ModelRow:
    """The project's model ``name``, or an error page with a way back."""
    try:
        return owned_model(session, project, name)
    except HTTPException as e:
        raise _not_found(e, session, project) from e


def page_run(run_id: str, project: SignedIn, session: SessionDep) -> db.Run:
    """The project's run ``run_id``, or an error page with a way back.

    The id is read here, not by FastAPI's validation: ``/ui/runs/abc`` (or 0, or a 20-digit id) is the
    same page as a missing run, never a JSON 422; it is checked before the database sees it.
    """
    number = int(run_id) if run_id.isascii() and run_id.isdigit() and len(run_id) <= 10 else 0
    if not 1 <= number <= MAX_ID:
        shown = printable(run_id, newlines=False)[:40]
        raise _not_found(HTTPException(404, f"no run {shown!r}: a run's id is a whole number from 1 to {MAX_ID}"),
                         session, project)
    try:
        return owned_run(session, project, number)
    except HTTPException as e:
        raise _not_found(e, session, project) from e


PageModel = Annotated[db.ModelRow, Depends(page_model)]
PageRun = Annotated[db.Run, Depends(page_run)]

def _to_login() -> RedirectResponse:
    return RedirectResponse("/ui/login", status_code=303)


def _fmt_snr(v: float | None) -> str:
    if v is None:
        return "—"
    return "∞" if math.isinf(v) and v > 0 else f"{v:.1f}"


def _home(session: SessionDep, project: int) -> tuple[str, str]:
    """The breadcrumbs' first step: the project, linking to its models."""
    p = crud.get_project(session, project)
    return (f"project {p.name}" if p is not None else "project", "/ui")


def _error_page(e: HTTPException, crumbs: list[tuple[str, str]], back: tuple[str, str]) -> HTMLResponse:
    """A lookup's 404/409 as a page a person can leave: what is missing, and a link back (never raw JSON)."""
    return page("error.html", status_code=e.status_code, title="Not found" if e.status_code == 404 else "Not ready",
                message=str(e.detail), crumbs=crumbs, back=back)


@router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=303)


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(status_code=204)


@router.get("/static/pages.css")
def stylesheet() -> Response:
    """The pages' style sheet (no page holds inline styles: their CSP allows this file, not ``'unsafe-inline'``)."""
    return Response(STYLESHEET, media_type="text/css; charset=utf-8", headers={"Cache-Control": "max-age=3600"})


@router.get("/ui/login", response_class=HTMLResponse)
def login_form() -> HTMLResponse:
    return page("login.html", title="Sign in")


def same_origin(request: Request) -> None:
    """403 for a form posted from another origin (CSRF): ``Sec-Fetch-Site``, then ``Origin``, then ``Referer``.

    Browsers send ``Origin`` (and ``Sec-Fetch-Site``) with every cross-origin POST, so a forged form
    always carries one; a request with none of them comes from a program, not from a page, and is
    let through (it has the token anyway). The origin's host and port must be this server's ``Host``.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise HTTPException(403, "a form from another site cannot post here (cross-site request refused)")
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return
    host = request.headers.get("host", "")
    if origin == "null" or not host or urlsplit(origin).netloc.lower() != host.lower():
        raise HTTPException(403, "a form from another origin cannot post here (cross-origin request refused)")


@router.post("/ui/login", dependencies=[Depends(same_origin)])
def login(service: ServiceDep, token: str = Form(...)) -> Response:
    with service.sessions() as session:
        session_id = start_session(session, token.strip())
    if session_id is None:
        return page("login.html", status_code=401, title="Sign in", error="That token is not valid.")
    resp = RedirectResponse("/ui", status_code=303)
    resp.set_cookie(COOKIE, session_id, max_age=SESSION_MAX_AGE_S, httponly=True, samesite="strict", path="/ui")
    return resp


@router.post("/ui/logout", dependencies=[Depends(same_origin)])
def logout(service: ServiceDep, session_id: Annotated[str | None, Cookie(alias=COOKIE)] = None) -> Response:
    """End the browser's session (the id is worthless from now on) and clear its cookie."""
    with service.sessions() as session:
        end_session(session, session_id)
    resp = RedirectResponse("/ui/login", status_code=303)
    resp.delete_cookie(COOKIE, httponly=True, samesite="strict", path="/ui")
    return resp


@router.get("/ui", response_class=HTMLResponse)
def projectpage(project: SignedIn, session: SessionDep) -> Response:
    p = crud.get_project(session, project)
    return page("project.html", title=p.name if p is not None else "", project=p,
                 models=crud.models_with_runs(session, project), crumbs=[])


@router.get("/ui/models/{name}", response_class=HTMLResponse)
def modelpage(name: str, model: PageModel, project: SignedIn, session: SessionDep, store: StoreDep) -> Response:
    """The model's runs, each with its verdict at a glance (culprit, lowest SNR, latency, change against the baseline)."""
    runs = crud.runs_of_model(session, model.id)
    keys = sorted({k for r in runs for k in (r.labels or {})})
    baseline = None
    if model.baseline_run_id is not None:
        baseline = next((r for r in runs if r.id == model.baseline_run_id), None) or \
            crud.run_of_project(session, project, model.baseline_run_id)
    return page("model.html", title=name, model=model, runs=runs, keys=keys, rows=run_rows(store, runs, baseline),
                fmt=_fmt_snr, crumbs=[_home(session, project), (f"model {name}", "")])


@router.get("/ui/models/{name}/compare", response_class=HTMLResponse)
def comparepage(name: str, model: PageModel, project: SignedIn, session: SessionDep, store: StoreDep,
                by: str = "device") -> Response:
    """Lowest SNR of every op, one column per run (newest done run of each value of label ``by``)."""
    chosen: dict[str, db.Run] = {}
    for run in crud.runs_of_model(session, model.id, Status.DONE):
        chosen.setdefault(str((run.labels or {}).get(by, f"run {run.id}")), run)
    columns = sorted(chosen.items())[:24]
    table: dict[str, dict[str, float | None]] = {}
    causes: dict[str, dict[str, str]] = {}  # op -> column -> "culprit" / "inherited", in the CLI's words
    order: list[str] = []
    totals: dict[str, float | None] = {}
    unit = ""
    doubted: list[str] = []  # columns whose runs may have used other inputs (their SNRs left out)
    for value, run in columns:
        analysis = load_analysis(store, run)
        totals[value] = total_p50(analysis)
        unit = analysis.profile.time_unit
        judged = {tuple(c.aot_ops): c for c in analysis.culprits.rows}
        clear = {id(r) for r in rows_clear_of_doubt(analysis)}
        if analysis.culprits.inputs_in_doubt:
            doubted.append(value)
        seen: dict[str, int] = {}
        for row in (analysis.gap.rows if analysis.gap else []):
            base = ops_title(row.aot_ops) or "(no reference op)"  # a delegate's 300 ops: one short line
            seen[base] = seen.get(base, 0) + 1
            key = base if seen[base] == 1 else f"{base} #{seen[base]}"
            if key not in table:
                table[key] = {}
                order.append(key)
            table[key][value] = lowest_snr(row.snr) if id(row) in clear else None
            said = cause(row, judged.get(tuple(row.aot_ops)))
            if said is not None:
                causes.setdefault(key, {})[value] = said
    worst = {k: min((v for v in table[k].values() if v is not None), default=None) for k in order}
    from numdiff.report.device_outliers import OpCell, outliers

    cells = {(k, v): OpCell(1, int(causes.get(k, {}).get(v) == CULPRIT), snr) for k in order for v, snr in table[k].items()}
    outlier = {o.op: o for o in outliers(order, [value for value, _ in columns], cells, by)}
    spread = {k: (max(vs) - min(vs)) if len(vs := [v for v in table[k].values() if v is not None and math.isfinite(v)]) > 1
              else None for k in order}
    return page("compare.html", title=f"{name}: compare by {by}", model=model, by=by, columns=columns,
                order=order, table=table, worst=worst, spread=spread, totals=totals, unit=unit, fmt=_fmt_snr,
                causes=causes, CULPRIT=CULPRIT, INHERITED=INHERITED, outliers=outlier, doubted=doubted,
                crumbs=[_home(session, project), (f"model {name}", f"/ui/models/{quote(name, safe='')}"),
                        (f"compare by {by}", "")])


@router.get("/ui/runs/{run_id}", response_class=HTMLResponse)
def runpage(run: PageRun, project: SignedIn, session: SessionDep, store: StoreDep) -> Response:
    model = crud.get_model(session, run.model_id)
    crumbs = [_home(session, project)] + ([(f"model {model.name}", f"/ui/models/{quote(model.name, safe='')}")]
                                     if model is not None else []) + [(f"run {run.id}", "")]
    differs = program_check(store, session, run)[2]
    return page("run.html", title=f"run {run.id}", run=run, model=model, jobs=crud.jobs_of_run(session, run.id),
                crumbs=crumbs, program_differs=differs)


@router.get("/ui/runs/{run_id}/report")
def run_report(run: PageRun, project: SignedIn, session: SessionDep, store: StoreDep) -> Response:
    if run.report_sha256 is None:
        return _error_page(HTTPException(409, f"run {run.id} is {run.status}: it has no report yet (reload this "
                                              "page when its stages are done)"),
                           crumbs=[_home(session, project), (f"run {run.id}", f"/ui/runs/{run.id}")],
                           back=(f"/ui/runs/{run.id}", f"Back to run {run.id}"))
    return FileResponse(store.path(run.report_sha256), media_type="text/html; charset=utf-8")
