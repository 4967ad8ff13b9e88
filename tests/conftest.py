"""Shared test fixtures: the oracle-recorded artifacts and a clean environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_names(*, need: tuple[str, ...] = ()) -> list[str]:
    """Fixture folders whose expected.json exists and whose files include everything in ``need``."""
    out = []
    for d in sorted(FIXTURES.iterdir()) if FIXTURES.is_dir() else []:
        exp = d / "expected.json"
        if not exp.is_file():
            continue
        files = json.loads(exp.read_text())["files"]
        if all(files.get(k) for k in need):
            out.append(d.name)
    return out


def load_expected(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "expected.json").read_text())  # type: ignore[no-any-return]


def artifact(name: str, kind: str) -> str | None:
    f = load_expected(name)["files"].get(kind)
    return None if not f else str(FIXTURES / name / f)


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output must not depend on the terminal the tests run in."""
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
