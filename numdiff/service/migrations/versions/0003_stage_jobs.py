"""One job per analysis stage (profile, gap, culprits, report), each with its stored result.

Adds ``jobs.stage`` (the order the stages run in) and ``jobs.result_sha256`` (the stage's result in
the store). A run's unfinished single ``analyze`` job from an older numdiff becomes the four stage
jobs, queued, so the upgrade loses nothing; finished ``analyze`` jobs stay as they were.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_STAGES = ("profile", "gap", "culprits", "report")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("stage", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("result_sha256", sa.String(64), nullable=True))
    op.create_index("ix_jobs_run_stage", "jobs", ["run_id", "stage"])
    jobs = sa.table("jobs", sa.column("id", sa.Integer), sa.column("run_id", sa.Integer), sa.column("kind", sa.String),
                    sa.column("status", sa.String), sa.column("attempts", sa.Integer), sa.column("stage", sa.Integer),
                    sa.column("created", sa.DateTime))
    connection = op.get_bind()
    legacy = connection.execute(sa.select(jobs.c.id, jobs.c.run_id).where(
        jobs.c.kind == "analyze", jobs.c.status.in_(("queued", "running")))).all()
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    for job_id, run_id in legacy:
        connection.execute(sa.delete(jobs).where(jobs.c.id == job_id))
        op.bulk_insert(jobs, [{"run_id": run_id, "kind": kind, "status": "queued", "attempts": 0, "stage": stage,
                               "created": now} for stage, kind in enumerate(_STAGES)])


def downgrade() -> None:
    op.drop_index("ix_jobs_run_stage", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("result_sha256")
        batch.drop_column("stage")
