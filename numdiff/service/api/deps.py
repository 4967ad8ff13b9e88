"""The dependencies every route shares: the service's state, its settings and store, a database
session, and the project of the caller's token; plus the lookups that answer 404/409 the same way
everywhere (another project's run is exactly as absent as a run that does not exist).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, HTTPException, Path, Request
from sqlalchemy.orm import Session, sessionmaker

from numdiff.service import crud, db
from numdiff.service.schemas import MAX_ID
from numdiff.service.auth import project_for_session, project_for_token
from numdiff.service.status import Status
from numdiff.service.settings import Settings
from numdiff.service.store import Store
from numdiff.service.worker.wake import RunBell

if TYPE_CHECKING:
    from numdiff.report import Analysis

__all__ = ["COOKIE", "ProjectDep", "RunId", "refuse_nul", "Service", "ServiceDep", "SessionDep", "SettingsDep", "StoreDep", "current_project",
           "get_service", "get_session", "load_analysis", "optional_project", "owned_model", "owned_run"]

#: The cookie the web pages keep their session id in (``/ui`` only; never the token itself).
COOKIE = "numdiff_session"


#: A run id in a URL: 1 to MAX_ID, else 422 before any query (a 20-digit id used to be a 500 and a traceback).
RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="the run's id")]


def refuse_nul(request: Request) -> None:
    """422 for a NUL character in the path or the query (PostgreSQL refuses them in text: a 500 before)."""
    if "\x00" in request.url.path or "%00" in request.url.query or "\x00" in request.url.query:
        raise HTTPException(422, "the URL holds a NUL character")


def refuse_nul_in(what: str, value: str) -> str:
    """``value`` when it holds no NUL character; 422 otherwise."""
    if "\x00" in value:
        raise HTTPException(422, f"{what} holds a NUL character")
    return value


class Service:
    """What the routes share, built once per app: settings, the database, the store and the long polls' bell."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = db.make_engine(settings.db_url)
        self.sessions: sessionmaker[Session] = db.session_factory(self.engine)
        self.store = Store(settings.data, settings.store_quota_bytes)
        self.bell = RunBell(settings.data)


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


def get_settings(service: ServiceDep) -> Settings:
    return service.settings


def get_store(service: ServiceDep) -> Store:
    return service.store


def get_session(service: ServiceDep) -> Iterator[Session]:
    """A session for the request, closed after it (async routes that wait open their own, briefly)."""
    with service.sessions() as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
SessionDep = Annotated[Session, Depends(get_session)]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def optional_project(request: Request, service: ServiceDep) -> int | None:
    """The caller's project id (bearer token, or on ``/ui`` the session cookie), or None; the session is closed at once."""
    token = _bearer(request)
    with service.sessions() as session:
        if token is not None:
            project = project_for_token(session, token)
        elif request.url.path.startswith("/ui"):
            project = project_for_session(session, request.cookies.get(COOKIE))
        else:
            project = None
    return None if project is None else project.id


def current_project(project: Annotated[int | None, Depends(optional_project)]) -> int:
    """The caller's project id (401 without a valid token)."""
    if project is None:
        raise HTTPException(401, "a valid bearer token is required (Authorization: Bearer TOKEN; "
                                 "create one with `numdiff admin create-token`)",
                            headers={"WWW-Authenticate": "Bearer"})
    return project


ProjectDep = Annotated[int, Depends(current_project)]


def owned_run(session: Session, project: int, run_id: int) -> db.Run:
    """The run if it belongs to ``project``; 404 otherwise (unknown and foreign look the same)."""
    run = crud.run_of_project(session, project, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id} in this project")
    return run


def owned_model(session: Session, project: int, name: str) -> db.ModelRow:
    """The project's model called ``name``; another project's model is as absent as a missing one."""
    model = crud.model_by_name(session, project, name)
    if model is None:
        raise HTTPException(404, f"no model {name!r} in this project")
    return model


def require_done(run: db.Run, digest: str | None) -> str:
    """``digest`` (one of the run's results) once the run is done; 409 before."""
    if run.status != Status.DONE or digest is None:
        raise HTTPException(409, f"run {run.id} is {run.status}, not done" + (f": {run.reason}" if run.reason else ""))
    return digest


def load_analysis(store: Store, run: db.Run) -> Analysis:
    """The run's saved analysis; 409 until the run is done."""
    from numdiff.report import Analysis

    return Analysis.load(store.path(require_done(run, run.analysis_sha256)))
