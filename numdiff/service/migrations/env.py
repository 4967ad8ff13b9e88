"""Alembic environment of the numdiff service: run online on the connection numdiff passes in."""

from __future__ import annotations

from alembic import context

from numdiff.service.db import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
