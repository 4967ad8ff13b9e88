"""Service metadata in SQL (SQLAlchemy 2): projects, tokens, models, runs and their jobs.

SQLite in the data directory by default (WAL mode, so the web server and the workers share it),
PostgreSQL by URL. The schema is created and upgraded by Alembic at start-up
(:func:`migrate`); the models below and ``migrations/versions`` must agree.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint, create_engine, event, false
from sqlalchemy.engine import Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from numdiff.service.status import Status

__all__ = ["Base", "Job", "ModelRow", "Project", "Run", "RunLabel", "Token", "WebSession", "default_url", "make_engine",
           "migrate", "now", "session_factory"]


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Project(Base):
    __tablename__ = "projects"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created: Mapped[datetime.datetime] = mapped_column(DateTime, default=now)


class Token(Base):
    """A bearer token: only its SHA-256 is stored; refused after ``expires`` (never, when None)."""

    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created: Mapped[datetime.datetime] = mapped_column(DateTime, default=now)
    revoked: Mapped[datetime.datetime | None] = mapped_column(DateTime, nullable=True)
    expires: Mapped[datetime.datetime | None] = mapped_column(DateTime, nullable=True)


class WebSession(Base):
    """A browser's sign-in: the cookie holds a random id, only its SHA-256 is stored.

    Valid until ``expires``, until signed out (the row is deleted), and only while its token is.
    """

    __tablename__ = "web_sessions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"), index=True)
    created: Mapped[datetime.datetime] = mapped_column(DateTime, default=now)
    expires: Mapped[datetime.datetime] = mapped_column(DateTime)


class ModelRow(Base):
    """A model of a project; ``baseline_run_id`` is the run new runs are compared with by default."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("project_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    baseline_run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created: Mapped[datetime.datetime] = mapped_column(DateTime, default=now)


class Run(Base):
    """One device run: its artifacts (store hashes), labels and the analysis results once done."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), index=True)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    etrecord_sha256: Mapped[str] = mapped_column(String(64))
    etdump_sha256: Mapped[str] = mapped_column(String(64))
    debug_buffer_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The uploader said the run used the ETRecord's representative inputs (the culprit stage then
    #: judges the ops reading graph inputs the runtime did not log on them; migration 0005).
    inputs_are_representative: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: The run's own inputs (a ``torch.save`` list of each run's input tuple), judged on by the culprit stage.
    step_inputs_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default=Status.QUEUED, index=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    analysis_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    report_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created: Mapped[datetime.datetime] = mapped_column(DateTime, default=now)
    finished: Mapped[datetime.datetime | None] = mapped_column(DateTime, nullable=True)


class RunLabel(Base):
    """One label of a run as a row (``Run.labels`` keeps the mapping): run lists filter on these in SQL."""

    __tablename__ = "run_labels"
    __table_args__ = (Index("ix_run_labels_key_value", "key", "value"),)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(String(500))


class Job(Base):
    """One stage of a run's analysis (``kind`` in :data:`numdiff.analysis.stages.STAGES`; ``stage`` is its index there).

    A job becomes claimable when every earlier stage of its run is done; its result (the stage's
    JSON part, or for ``report`` the saved analysis) is ``result_sha256`` in the store.
    """

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_run_stage", "run_id", "stage"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    kind: Mapped[str] = mapped_column(String(32), default="profile")
    stage: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    result_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default=Status.QUEUED, index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime.datetime | None] = mapped_column(DateTime, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    elapsed_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created: Mapped[datetime.datetime] = mapped_column(DateTime, default=now)


def default_url(data: str | os.PathLike[str]) -> str:
    """The embedded default: SQLite in ``DATA/numdiff.sqlite3``."""
    return "sqlite:///" + str(Path(data).resolve() / "numdiff.sqlite3")


def _private_sqlite_files(url: str) -> None:
    """Create the SQLite file 0600 (and make an existing one and its WAL and shared memory 0600).

    SQLite gives the ``-wal`` and ``-shm`` files the database file's mode, so a private database
    keeps its journal private too.
    """
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    try:
        os.close(os.open(database, os.O_CREAT | os.O_RDWR, 0o600))
        for path in (database, database + "-wal", database + "-shm"):
            if os.path.exists(path):
                os.chmod(path, 0o600)
    except OSError:  # not ours (another user's file) or not creatable: SQLite will say what is wrong
        pass


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL mode and a busy timeout (several processes share it), and private files."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    if url.startswith("sqlite"):
        _private_sqlite_files(url)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            cur = conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def migrate(engine: Engine) -> None:
    """Create or upgrade the schema with Alembic (script location inside this package)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
