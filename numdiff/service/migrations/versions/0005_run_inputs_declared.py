"""A run can say it used the ETRecord's representative inputs.

Adds ``runs.inputs_are_representative`` (``numdiff submit --inputs-are-representative``, the upload
form's field of that name). When true, the culprit stage judges every op that reads a graph input the
runtime did not log on the representative inputs, as ``numdiff analyze --inputs-are-representative``
does; existing runs said nothing, so they stay false.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN with a constant default (SQLite and PostgreSQL both do it in place): a batch
    # copy of ``runs`` would trip the foreign keys of ``jobs`` and ``run_labels`` on SQLite
    op.add_column("runs", sa.Column("inputs_are_representative", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("runs", "inputs_are_representative")
