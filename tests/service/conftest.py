"""Real servers for the service tests: one on SQLite and one on a real PostgreSQL 15, shared by the session."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from numdiff.report import Analysis  # noqa: E402
from tests.service._server import EXAMPLE, Server, postgres, running  # noqa: E402


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(tmp_path_factory.mktemp("svc-sqlite") / "data", None) as server:
        yield server


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with postgres() as url, running(tmp_path_factory.mktemp("svc-pg") / "data", url) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest) -> Server:
    """The core flow runs against both databases."""
    name = "sqlite_server" if request.param == "sqlite" else "pg_server"
    got: Server = request.getfixturevalue(name)
    return got


@pytest.fixture(scope="session")
def reference() -> Analysis:
    """The library's own analysis of the bundled example (what the service must reproduce)."""
    return Analysis.from_files(EXAMPLE.etdump, EXAMPLE.etrecord, EXAMPLE.debug_buffer)


def floats(values: list[Any]) -> list[str | None]:
    """Floats as comparable text; None where there is no number (the API's null, Python's inf and nan)."""
    return [None if v is None or not math.isfinite(float(v)) else repr(float(v)) for v in values]


def snr_rows(analysis: Analysis) -> list[tuple[list[str], list[str], list[str]]]:
    assert analysis.gap is not None
    return [(r.aot_ops, r.runtime_ops, floats(r.snr)) for r in analysis.gap.rows]


def data_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())
