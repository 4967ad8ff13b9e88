"""The first schema: projects, tokens, models, runs, jobs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("projects", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("name", sa.String(200), nullable=False, unique=True),
                    sa.Column("created", sa.DateTime, nullable=False))
    op.create_table("tokens", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False, index=True),
                    sa.Column("sha256", sa.String(64), nullable=False, unique=True),
                    sa.Column("prefix", sa.String(16), nullable=False),
                    sa.Column("created", sa.DateTime, nullable=False),
                    sa.Column("revoked", sa.DateTime, nullable=True))
    op.create_table("models", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False, index=True),
                    sa.Column("name", sa.String(200), nullable=False),
                    sa.Column("baseline_run_id", sa.Integer, nullable=True),
                    sa.Column("created", sa.DateTime, nullable=False),
                    sa.UniqueConstraint("project_id", "name"))
    op.create_table("runs", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("project_id", sa.Integer, sa.ForeignKey("projects.id"), nullable=False, index=True),
                    sa.Column("model_id", sa.Integer, sa.ForeignKey("models.id"), nullable=False, index=True),
                    sa.Column("labels", sa.JSON, nullable=False),
                    sa.Column("etrecord_sha256", sa.String(64), nullable=False),
                    sa.Column("etdump_sha256", sa.String(64), nullable=False),
                    sa.Column("debug_buffer_sha256", sa.String(64), nullable=True),
                    sa.Column("status", sa.String(16), nullable=False, index=True),
                    sa.Column("reason", sa.Text, nullable=True),
                    sa.Column("analysis_sha256", sa.String(64), nullable=True),
                    sa.Column("report_sha256", sa.String(64), nullable=True),
                    sa.Column("created", sa.DateTime, nullable=False),
                    sa.Column("finished", sa.DateTime, nullable=True))
    op.create_table("jobs", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
                    sa.Column("kind", sa.String(32), nullable=False),
                    sa.Column("status", sa.String(16), nullable=False, index=True),
                    sa.Column("attempts", sa.Integer, nullable=False),
                    sa.Column("worker", sa.String(100), nullable=True),
                    sa.Column("lease_until", sa.DateTime, nullable=True),
                    sa.Column("reason", sa.Text, nullable=True),
                    sa.Column("elapsed_ms", sa.BigInteger, nullable=True),
                    sa.Column("created", sa.DateTime, nullable=False))


def downgrade() -> None:
    for table in ("jobs", "runs", "models", "tokens", "projects"):
        op.drop_table(table)
