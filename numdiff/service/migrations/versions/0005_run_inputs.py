"""A run can say which graph inputs it used.

Adds ``runs.inputs_are_representative`` (``numdiff submit --inputs-are-representative``, the upload
form's field of that name): when true, the culprit stage judges every op that reads a graph input the
runtime did not log on the ETRecord's representative inputs, as ``numdiff analyze
--inputs-are-representative`` does; existing runs said nothing, so they stay false. Adds
``runs.step_inputs_sha256``: the run's own inputs (``numdiff submit --step-inputs``, a ``torch.save``
list with each run's input tuple), on which the culprit stage then judges it.

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
    op.add_column("runs", sa.Column("step_inputs_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "step_inputs_sha256")
    op.drop_column("runs", "inputs_are_representative")
