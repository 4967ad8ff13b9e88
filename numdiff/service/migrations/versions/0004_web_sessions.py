"""Browser sessions and token expiry.

Adds ``web_sessions`` (the web pages' cookie holds a random session id, no longer the token: only
the id's SHA-256 is stored, with the token it was signed in with and when it expires) and
``tokens.expires`` (``numdiff admin create-token --expires-days N``; existing tokens never expire).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("expires", sa.DateTime, nullable=True))
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("token_id", sa.Integer, sa.ForeignKey("tokens.id"), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("expires", sa.DateTime, nullable=False),
    )
    op.create_index("ix_web_sessions_token_id", "web_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_index("ix_web_sessions_token_id", table_name="web_sessions")
    op.drop_table("web_sessions")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("expires")
