"""Run labels as rows, so run lists filter by label in SQL (indexed by key and value).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("run_labels",
                    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
                    sa.Column("key", sa.String(100), primary_key=True),
                    sa.Column("value", sa.String(500), nullable=False))
    op.create_index("ix_run_labels_key_value", "run_labels", ["key", "value"])
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("labels", sa.JSON))
    labels = sa.table("run_labels", sa.column("run_id", sa.Integer), sa.column("key", sa.String),
                      sa.column("value", sa.String))
    connection = op.get_bind()
    rows = [{"run_id": run_id, "key": str(k)[:100], "value": str(v)[:500]}
            for run_id, mapping in connection.execute(sa.select(runs.c.id, runs.c.labels))
            for k, v in (mapping or {}).items()]
    if rows:
        op.bulk_insert(labels, rows)


def downgrade() -> None:
    op.drop_index("ix_run_labels_key_value", table_name="run_labels")
    op.drop_table("run_labels")
