"""Every query the API and the web pages make: functions of a SQLAlchemy session, no HTTP.

Routes call these and turn ``None`` into their answer (404, 409 ...); a project's rows are only
ever looked up together with the project, so another project's run or model is as absent as a
missing one. The workers' queue has its own queries (:mod:`numdiff.service.worker.jobs`), the
tokens theirs (:mod:`numdiff.service.auth`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from numdiff.analysis.stages import STAGES
from numdiff.service import db
from numdiff.service.status import Status

__all__ = ["count_models", "count_runs", "create_run", "get_model", "get_project", "jobs_of_run", "latest_job",
           "list_runs", "model_by_name", "models_with_runs", "ping", "referenced_blobs", "run_of_project", "runs_of_model"]


def ping(session: Session) -> None:
    """A round trip to the database (the health check)."""
    session.execute(select(1))


def get_project(session: Session, project: int) -> db.Project | None:
    return session.get(db.Project, project)


def get_model(session: Session, model_id: int) -> db.ModelRow | None:
    return session.get(db.ModelRow, model_id)


def count_models(session: Session, project: int) -> int:
    n = session.scalar(select(func.count()).select_from(db.ModelRow).where(db.ModelRow.project_id == project))
    return n or 0


def count_runs(session: Session, *, project: int | None = None, model_id: int | None = None) -> int:
    """The runs of a project, or of one model."""
    q = select(func.count()).select_from(db.Run)
    if project is not None:
        q = q.where(db.Run.project_id == project)
    if model_id is not None:
        q = q.where(db.Run.model_id == model_id)
    return session.scalar(q) or 0


def models_with_runs(session: Session, project: int) -> list[tuple[db.ModelRow, int]]:
    """The project's models by name, each with its number of runs."""
    rows = session.execute(select(db.ModelRow, func.count(db.Run.id))
                           .outerjoin(db.Run, db.Run.model_id == db.ModelRow.id)
                           .where(db.ModelRow.project_id == project).group_by(db.ModelRow.id)
                           .order_by(db.ModelRow.name)).all()
    return [(model, n) for model, n in rows]


def model_by_name(session: Session, project: int, name: str) -> db.ModelRow | None:
    """The project's model called ``name``."""
    model: db.ModelRow | None = session.execute(
        select(db.ModelRow).where(db.ModelRow.project_id == project, db.ModelRow.name == name)).scalar_one_or_none()
    return model


def run_of_project(session: Session, project: int, run_id: int) -> db.Run | None:
    """The run if it belongs to ``project`` (unknown and foreign runs are both None)."""
    run = session.get(db.Run, run_id)
    return run if run is not None and run.project_id == project else None


def jobs_of_run(session: Session, run_id: int) -> Sequence[db.Job]:
    """The run's jobs in stage order."""
    return session.execute(select(db.Job).where(db.Job.run_id == run_id)
                           .order_by(db.Job.stage, db.Job.id)).scalars().all()


def latest_job(session: Session, run_id: int, kind: str) -> db.Job | None:
    """The run's newest job of stage ``kind``."""
    job: db.Job | None = session.execute(select(db.Job).where(db.Job.run_id == run_id, db.Job.kind == kind)
                                         .order_by(db.Job.id.desc()).limit(1)).scalar()
    return job


def list_runs(session: Session, project: int, *, model: str | None = None, status: str | None = None,
              labels: Mapping[str, str] | None = None, limit: int = 100) -> Sequence[db.Run]:
    """The project's runs, newest first, filtered by model name, status and labels (all must match)."""
    q = select(db.Run).where(db.Run.project_id == project).order_by(db.Run.id.desc())
    if model is not None:
        q = q.join(db.ModelRow, db.ModelRow.id == db.Run.model_id).where(db.ModelRow.name == model)
    if status is not None:
        q = q.where(db.Run.status == status)
    for key, value in (labels or {}).items():  # every label must match: one indexed EXISTS each
        q = q.where(select(db.RunLabel.run_id).where(db.RunLabel.run_id == db.Run.id, db.RunLabel.key == key,
                                                     db.RunLabel.value == value).exists())
    return session.execute(q.limit(limit)).scalars().all()


def runs_of_model(session: Session, model_id: int, status: Status | None = None,
                  limit: int = 500) -> Sequence[db.Run]:
    """The model's runs, newest first (only those in ``status`` when given)."""
    q = select(db.Run).where(db.Run.model_id == model_id)
    if status is not None:
        q = q.where(db.Run.status == status)
    return session.execute(q.order_by(db.Run.id.desc()).limit(limit)).scalars().all()


def create_run(session: Session, project: int, model_name: str, labels: Mapping[str, str],
               files: Mapping[str, str], *, inputs_are_representative: bool = False) -> db.Run | None:
    """The run, its labels and one queued job per stage, committed in one transaction (the model too if new).

    ``inputs_are_representative``: the uploader says the run used the ETRecord's representative inputs.

    None when a concurrent upload created the model at the same moment: the session is rolled
    back; retry in a new session (the model is there then).
    """
    model = model_by_name(session, project, model_name)
    if model is None:
        model = db.ModelRow(project_id=project, name=model_name, created=db.now())
        session.add(model)
        try:
            session.flush()
        except IntegrityError:  # created by a concurrent upload: use theirs
            session.rollback()
            return None
    run = db.Run(project_id=project, model_id=model.id, labels=dict(labels), etrecord_sha256=files["etrecord"],
                 etdump_sha256=files["etdump"], debug_buffer_sha256=files.get("debug_buffer"),
                 step_inputs_sha256=files.get("step_inputs"), inputs_are_representative=inputs_are_representative,
                 status=Status.QUEUED, created=db.now())
    session.add(run)
    session.flush()
    session.add_all(db.RunLabel(run_id=run.id, key=k, value=v) for k, v in labels.items())
    session.add_all(db.Job(run_id=run.id, kind=kind, stage=stage, status=Status.QUEUED, attempts=0, created=db.now())
                    for stage, kind in enumerate(STAGES))
    session.commit()
    return run


def referenced_blobs(session: Session) -> set[str]:
    """Every store hash a run or a job refers to (what the orphan collector keeps)."""
    keep: set[str] = set()
    for column in (db.Run.etrecord_sha256, db.Run.etdump_sha256, db.Run.debug_buffer_sha256, db.Run.step_inputs_sha256,
                   db.Run.analysis_sha256,
                   db.Run.report_sha256, db.Job.result_sha256):
        keep.update(d for d in session.execute(select(column).where(column.is_not(None)).distinct()).scalars() if d)
    return keep
