"""``/api/v1/project``: the token's project and how many models and runs it has."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from numdiff.service import crud, schemas
from numdiff.service.api.deps import ProjectDep, SessionDep
from numdiff.service.api.out import json_response

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["projects"])


@router.get("/project", response_model=schemas.ProjectOut)
def project_info(project: ProjectDep, session: SessionDep) -> Response:
    p = crud.get_project(session, project)
    name = p.name if p is not None else ""
    return json_response(schemas.ProjectOut(name=name, models=crud.count_models(session, project),
                                            runs=crud.count_runs(session, project=project)))
