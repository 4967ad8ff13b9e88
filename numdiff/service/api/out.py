"""Response bodies built from rows: a run with its jobs, a run with its results, strict JSON."""

from __future__ import annotations

from pydantic import BaseModel
from fastapi.responses import Response
from sqlalchemy.orm import Session

from numdiff.analysis.records import ProgramSignature
from numdiff.analysis.signature import same_program
from numdiff.service import crud, db, schemas
from numdiff.service.api.deps import load_analysis
from numdiff.service.status import Status
from numdiff.service.store import Store

__all__ = ["json_response", "run_out", "run_result"]


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Strict JSON with non-finite floats as ``null`` (as the command line's JSON writes them)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


def run_out(session: Session, run: db.Run) -> schemas.RunOut:
    model = crud.get_model(session, run.model_id)
    jobs = crud.jobs_of_run(session, run.id)
    return schemas.RunOut(id=run.id, model=model.name if model is not None else "", status=run.status,
                          reason=run.reason, labels={str(k): str(v) for k, v in (run.labels or {}).items()},
                          created=run.created, finished=run.finished, attempts=max((j.attempts for j in jobs), default=0),
                          jobs=[schemas.JobOut(kind=j.kind, status=j.status, attempts=j.attempts, elapsed_ms=j.elapsed_ms,
                                               reason=j.reason) for j in jobs],
                          artifacts={"etrecord": run.etrecord_sha256, "etdump": run.etdump_sha256,
                                     "debug_buffer": run.debug_buffer_sha256, "step_inputs": run.step_inputs_sha256},
                          inputs_are_representative=run.inputs_are_representative)


def run_result(store: Store, session: Session, run: db.Run) -> schemas.RunResult:
    """The run with its SNR gap rows and culprits once done (only the run's state before)."""
    out = schemas.RunResult(**run_out(session, run).model_dump())
    if run.status != Status.DONE or run.analysis_sha256 is None:
        return out
    a = load_analysis(store, run)
    if a.gap is not None:
        out.gap = [schemas.GapRecord(
            aot_ops=r.aot_ops, runtime_ops=r.runtime_ops, gap=list[float | None](r.snr),
            aot_debug_handle=r.aot_debug_handle,
            aot_intermediate_output=None if r.aot_stats is None else r.aot_stats.model_dump(),
            runtime_intermediate_output=None if r.runtime_stats is None else r.runtime_stats.model_dump(),
            matched=r.matched, match=r.match) for r in a.gap.rows]
    else:
        out.gap_unavailable = a.gap_unavailable
    if a.culprits.available:
        out.culprits = [r.model_dump() for r in a.culprits.rows]
    else:
        out.culprits_unavailable = a.culprits.reason
    out.program, out.baseline_program, out.program_differs_from_baseline = program_check(store, session, run)
    return out


def program_check(store: Store, session: Session, run: db.Run) -> tuple[str | None, str | None, bool | None]:
    """The run's program signature, its model's baseline's, and whether they differ (None where either is
    unknown: a run not done, no baseline, or an analysis written before signatures)."""
    if run.status != Status.DONE or run.analysis_sha256 is None:
        return None, None, None
    analysed = load_analysis(store, run).program
    baseline = _baseline_program(store, session, run)
    differs = None if analysed is None or baseline is None else not same_program(analysed, baseline)
    return (None if analysed is None else analysed.sha256), (None if baseline is None else baseline.sha256), differs


def _baseline_program(store: Store, session: Session, run: db.Run) -> ProgramSignature | None:
    """The program signature of the run's model's baseline (None without a done baseline or a signature)."""
    model = crud.get_model(session, run.model_id)
    if model is None or model.baseline_run_id is None:
        return None
    base = crud.run_of_project(session, model.project_id, model.baseline_run_id)
    if base is None or base.status != Status.DONE or base.analysis_sha256 is None:
        return None
    return load_analysis(store, base).program
