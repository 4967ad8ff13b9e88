"""``/api/v1/models``: a project's models and their baselines (the run new runs are compared with)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from numdiff.service import crud, schemas
from numdiff.service.api.deps import ProjectDep, SessionDep, owned_run

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/models", tags=["models"])


@router.get("", response_model=list[schemas.ModelOut])
def models(project: ProjectDep, session: SessionDep) -> list[schemas.ModelOut]:
    return [schemas.ModelOut(name=m.name, runs=n, baseline_run=m.baseline_run_id)
            for m, n in crud.models_with_runs(session, project)]


@router.put("/{name}/baseline", response_model=schemas.ModelOut)
def set_baseline(name: str, body: schemas.BaselineRequest, project: ProjectDep, session: SessionDep) -> schemas.ModelOut:
    run = owned_run(session, project, body.run_id)
    model = crud.get_model(session, run.model_id)
    if model is None or model.name != name:
        raise HTTPException(404, f"run {body.run_id} is not a run of model {name!r}")
    model.baseline_run_id = run.id
    session.commit()
    return schemas.ModelOut(name=model.name, runs=crud.count_runs(session, model_id=model.id), baseline_run=run.id)
