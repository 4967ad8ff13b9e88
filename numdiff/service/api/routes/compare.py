"""``POST /api/v1/compare``: the CI gate over HTTP (``numdiff diff`` of two runs' analyses)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from numdiff.service import crud, schemas
from numdiff.service.api.deps import ProjectDep, SessionDep, StoreDep, load_analysis, owned_run
from numdiff.service.api.out import json_response

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["compare"])


@router.post("/compare", response_model=schemas.CompareResult)
def compare(body: schemas.CompareRequest, project: ProjectDep, session: SessionDep, store: StoreDep) -> Response:
    """The CI gate over HTTP: ``new_run`` against ``base_run`` or the model's baseline (``numdiff diff``).

    409 when the two runs' analyses are of different programs (their ETRecords' program signatures
    differ); ``passed`` is false when fewer than ``min_matched_share`` of the base's ops were compared.
    """
    import json
    import warnings

    from numdiff.analysis.diff import DifferentProgramsError, GateThresholds, diff_analyses
    from numdiff.report.diff_render import render_diff

    new = owned_run(session, project, body.new_run)
    base_id = body.base_run
    if base_id is None:
        model = crud.get_model(session, new.model_id)
        if model is None or model.baseline_run_id is None:
            raise HTTPException(409, "give base_run, or set the model's baseline first "
                                     "(PUT /api/v1/models/{name}/baseline)")
        base_id = model.baseline_run_id
    base = owned_run(session, project, base_id)
    a_base, a_new = load_analysis(store, base), load_analysis(store, new)
    thresholds = GateThresholds(body.max_snr_drop_db, body.max_latency_increase_pct, body.min_latency_increase_us,
                                body.snr_cap_db, body.min_matched_share)
    try:
        with warnings.catch_warnings():  # "program not checked" is in the diff's notes
            warnings.simplefilter("ignore")
            report = diff_analyses(a_base, a_new, thresholds)
    except DifferentProgramsError as e:
        raise HTTPException(409, f"runs {base.id} (base) and {new.id} (new): {e}") from e
    diff = json.loads(render_diff(report, "json"))
    return json_response(schemas.CompareResult(passed=report.passed, base_run=base.id, new_run=new.id,
                                               regressions=len(report.regressions), diff=diff))
