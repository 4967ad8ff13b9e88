"""Every program ExecuTorch wrote for the fixtures passes the guard untouched: nothing refused, nothing renamed."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from numdiff.program.guard import guard_program

FIXTURES = Path(__file__).parents[1] / "fixtures"
RECORDS = sorted(FIXTURES.glob("**/etrecord.bin"))


@pytest.mark.parametrize("record", RECORDS, ids=[str(p.parent.relative_to(FIXTURES)) for p in RECORDS])
def test_fixture_programs_pass_the_guard_unchanged(record: Path) -> None:
    checked = 0
    with zipfile.ZipFile(record) as z:
        for name in z.namelist():
            try:
                program = json.loads(z.read(name))
            except (UnicodeDecodeError, ValueError):
                continue  # pickled companions
            if isinstance(program, dict) and "graph_module" in program:
                assert guard_program(program).renamed == {}, name
                checked += 1
    assert checked >= 1
