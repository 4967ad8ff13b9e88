"""Analyses shared by the report tests (built once per session: each runs a reference graph)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numdiff.examples import example_files
from numdiff.report import Analysis
from tests.conftest import FIXTURES

DATA = Path(__file__).parent / "data"


def artifact_args(name: str) -> list[str]:
    """CLI flags for a fixture folder (``example`` = the bundled example)."""
    if name == "example":
        f = example_files()
        paths = [f.etdump, f.etrecord, f.debug_buffer]
    else:
        paths = [FIXTURES / name / "etdump.etdp", FIXTURES / name / "etrecord.bin", FIXTURES / name / "debug_buffer.bin"]
    return ["--etdump", str(paths[0]), "--etrecord", str(paths[1]), "--debug-buffer", str(paths[2])]


def _analyse(name: str, **labels: str) -> Analysis:
    args = artifact_args(name)
    return Analysis.from_files(args[1], args[3], args[5], labels=labels)


@pytest.fixture(scope="session")
def example_analysis() -> Analysis:
    return _analyse("example", device="host", build="1")


@pytest.fixture(scope="session")
def xnnpack_analysis() -> Analysis:
    return _analyse("xnnpack", device="host")


@pytest.fixture(scope="session")
def quant_analysis() -> Analysis:
    return _analyse("pt2e_quant", device="host")
