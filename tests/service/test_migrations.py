"""Schema migrations with Alembic: a database written by the first schema upgrades with its data.

Revision 0002 moves run labels into rows (``run_labels``) so run lists filter by label in SQL;
the labels of runs stored under 0001 must come along, and the filter must give the same runs
as the labels say; revision 0003 splits an unfinished analysis job into one job per stage. Runs on
SQLite and on a real PostgreSQL (the fixture's cluster).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from numdiff.service import auth, db
from numdiff.service.app import create_app
from numdiff.service.settings import Settings
from tests.service._server import postgres


def _upgrade(engine: sa.Engine, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from numdiff.service import db as service_db

    config = Config()
    config.set_main_option("script_location", str(service_db.__file__).replace("db.py", "migrations"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


NOW = datetime.datetime(2026, 1, 1)


def _at_revision(url: str, revision: str) -> sa.Engine:
    """An engine on a database at ``revision`` holding project 1 ('lab') and its model 1 ('m')."""
    engine = db.make_engine(url)
    _upgrade(engine, revision)
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO projects (id, name, created) VALUES (1, 'lab', :t)"), {"t": NOW})
        c.execute(sa.text("INSERT INTO models (id, project_id, name, created) VALUES (1, 1, 'm', :t)"), {"t": NOW})
    return engine


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    data = tmp_path_factory.mktemp("migrate")
    if request.param == "sqlite":
        yield str(data), db.default_url(data)
    else:
        with postgres() as url:
            yield str(data), url


def test_labels_of_old_runs_move_to_rows_and_filter_in_sql(database: tuple[str, str]) -> None:
    data, url = database
    engine = _at_revision(url, "0001")
    now = NOW
    with engine.begin() as c:
        for rid, labels in [(1, '{"device": "pixel8", "build": "1"}'), (2, '{"device": "pixel9", "build": "1"}'),
                            (3, '{}'), (4, '{"device": "pixel8", "build": "2"}')]:
            c.execute(sa.text("INSERT INTO runs (id, project_id, model_id, labels, etrecord_sha256, etdump_sha256, "
                              "status, created) VALUES (:id, 1, 1, :labels, :h, :h, 'done', :t)"),
                      {"id": rid, "labels": labels, "h": "0" * 64, "t": now})
    db.migrate(engine)  # 0001 → head, as `numdiff serve` does at start-up
    with engine.connect() as c:
        rows = sorted(c.execute(sa.text("SELECT run_id, key, value FROM run_labels")).all())
    assert rows == [(1, "build", "1"), (1, "device", "pixel8"), (2, "build", "1"), (2, "device", "pixel9"),
                    (4, "build", "2"), (4, "device", "pixel8")]
    with db.session_factory(engine)() as s:
        token = auth.create_token(s, "lab")
    engine.dispose()
    with TestClient(create_app(Settings.create(data, url))) as client:
        headers = {"Authorization": f"Bearer {token}"}

        def ids(*labels: str) -> list[int]:
            r = client.get("/api/v1/runs", headers=headers, params=[("label", lab) for lab in labels])
            assert r.status_code == 200, r.text
            return [run["id"] for run in r.json()["runs"]]

        assert ids() == [4, 3, 2, 1]
        assert ids("device=pixel8") == [4, 1]
        assert ids("device=pixel8", "build=1") == [1]
        assert ids("device=pixel8", "build=3") == []
        assert ids("nokey=x") == []
        r = client.get("/api/v1/runs", headers=headers, params={"label": "device=pixel8", "limit": 1})
        assert [run["id"] for run in r.json()["runs"]] == [4]


def test_an_unfinished_single_job_becomes_the_four_stage_jobs(database: tuple[str, str]) -> None:
    # revision 0003: one job per stage; a queued or running 'analyze' job of an older numdiff becomes the
    # four stage jobs (queued, in order), a finished one stays as the record of how its run was analysed
    data, url = database
    engine = _at_revision(url, "0002")
    now = NOW
    with engine.begin() as c:
        for rid, run_status, job_status in [(1, "done", "done"), (2, "queued", "queued"), (3, "running", "running")]:
            c.execute(sa.text("INSERT INTO runs (id, project_id, model_id, labels, etrecord_sha256, etdump_sha256, "
                              "status, created) VALUES (:id, 1, 1, '{}', :h, :h, :s, :t)"),
                      {"id": rid, "h": "0" * 64, "s": run_status, "t": now})
            c.execute(sa.text("INSERT INTO jobs (run_id, kind, status, attempts, created) "
                              "VALUES (:id, 'analyze', :s, 1, :t)"), {"id": rid, "s": job_status, "t": now})
    db.migrate(engine)
    with engine.connect() as c:
        rows = c.execute(sa.text("SELECT run_id, kind, stage, status, attempts, result_sha256 FROM jobs "
                                 "ORDER BY run_id, stage, id")).all()
    engine.dispose()
    stages = [(k, i, "queued", 0, None) for i, k in enumerate(("profile", "gap", "culprits", "report"))]
    assert [tuple(r) for r in rows] == [(1, "analyze", 0, "done", 1, None)] \
        + [(2, *s) for s in stages] + [(3, *s) for s in stages]


def test_tokens_of_0003_survive_0004_and_never_expire(database: tuple[str, str]) -> None:
    data, url = database
    engine = _at_revision(url, "0003")
    token = auth.PREFIX + "old-token-from-0003"
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO tokens (project_id, sha256, prefix, created) VALUES (1, :h, :p, :t)"),
                  {"h": auth.hash_token(token), "p": token[:12], "t": NOW})
    db.migrate(engine)  # 0003 → head: web_sessions and tokens.expires
    with db.session_factory(engine)() as s:
        project = auth.project_for_token(s, token)
        assert project is not None and project.name == "lab"
        session_id = auth.start_session(s, token)
        assert session_id is not None and token not in session_id
        assert auth.project_for_session(s, session_id) is not None
        auth.end_session(s, session_id)
        assert auth.project_for_session(s, session_id) is None
    engine.dispose()


def test_runs_of_0004_are_not_declared_representative_after_0005(database: tuple[str, str]) -> None:
    # revision 0005: runs.inputs_are_representative; a run stored before said nothing about its inputs
    _data, url = database
    engine = _at_revision(url, "0004")
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO runs (id, project_id, model_id, labels, etrecord_sha256, etdump_sha256, "
                          "status, created) VALUES (1, 1, 1, '{}', :h, :h, 'done', :t)"), {"h": "0" * 64, "t": NOW})
    db.migrate(engine)
    with db.session_factory(engine)() as s:
        run = s.get(db.Run, 1)
        assert run is not None and run.inputs_are_representative is False
        run.inputs_are_representative = True
        s.commit()
    with engine.connect() as c:
        assert c.execute(sa.text("SELECT inputs_are_representative FROM runs")).scalar_one() in (True, 1)
    engine.dispose()


def test_the_models_and_the_migrations_agree(database: tuple[str, str]) -> None:
    """The schema Alembic builds is the one ``numdiff.service.db`` declares (a column added to one only shows here)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    _data, url = database
    engine = db.make_engine(url)
    db.migrate(engine)
    with engine.connect() as c:
        differences = compare_metadata(MigrationContext.configure(c, opts={"compare_server_default": False}),
                                       db.Base.metadata)
    engine.dispose()
    assert differences == []


def test_0005_downgrades_and_upgrades_again(database: tuple[str, str]) -> None:
    """``alembic downgrade 0004`` drops the two columns (their values with them) and head adds them back."""
    from alembic import command
    from alembic.config import Config

    _data, url = database
    engine = _at_revision(url, "head")
    config = Config()
    config.set_main_option("script_location", str(db.__file__).replace("db.py", "migrations"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0004")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("runs")}
    assert not {"inputs_are_representative", "step_inputs_sha256"} & columns
    db.migrate(engine)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("runs")}
    assert {"inputs_are_representative", "step_inputs_sha256"} <= columns
    engine.dispose()
