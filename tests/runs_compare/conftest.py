"""Shared fixtures: the oracle runs of tests/fixtures/runs_mlp and runs_decode (scripts/make_runs_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MLP = FIXTURES / "runs_mlp"
DECODE = FIXTURES / "runs_decode"
DEEPER = FIXTURES / "deeper_decode"


def mlp_run(name: str) -> tuple[str, str]:
    return str(MLP / name / "etdump.etdp"), str(MLP / name / "debug_buffer.bin")


def decode_run(folder: Path) -> tuple[str, str, str]:
    return str(folder / "etdump.etdp"), str(folder / "debug_buffer.bin"), str(folder / "step_inputs.pt")


@pytest.fixture(scope="module")
def mlp_truth() -> dict[str, object]:
    return json.loads((MLP / "truth.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def decode_truth() -> dict[str, object]:
    return json.loads((DECODE / "truth.json").read_text())  # type: ignore[no-any-return]
