"""Shared test fixtures: the oracle-recorded artifacts and a clean environment."""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from numdiff.report import Analysis

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
    """Output must not depend on the terminal the tests run in: terminal views are 100 columns wide, as when
    the output is not a terminal (CI); without COLUMNS they would take the width of the terminal pytest runs in."""
    for var in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "24")


# --- saved analyses shared by the analysis and report tests (built once per session: each runs a reference graph) ---

#: Committed analysis files (an old format version, for migration and reading tests).
SAVED_ANALYSES = Path(__file__).parent / "analysis" / "data"


def artifact_args(name: str) -> list[str]:
    """CLI flags for a fixture folder (``example`` = the bundled example)."""
    if name == "example":
        from numdiff.examples import example_files

        f = example_files()
        paths = [f.etdump, f.etrecord, f.debug_buffer]
    else:
        paths = [FIXTURES / name / "etdump.etdp", FIXTURES / name / "etrecord.bin", FIXTURES / name / "debug_buffer.bin"]
    return ["--etdump", str(paths[0]), "--etrecord", str(paths[1]), "--debug-buffer", str(paths[2])]


def _analyse(name: str, **labels: str) -> Analysis:
    from numdiff.report import Analysis

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


@pytest.fixture
def threads() -> Iterator[None]:
    """torch's intra-op thread count, restored after the test (which may change it)."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def computed_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the threads each pair's float64 sums were computed on (numdiff.gap.presum's worker or not)."""
    import threading

    import numdiff.comparators.numerics as numerics

    names: list[str] = []
    real = numerics._difference_sums

    def spy(a: object, b: object, need_l1: bool) -> Any:
        names.append(threading.current_thread().name)
        return real(a, b, need_l1)

    monkeypatch.setattr(numerics, "_difference_sums", spy)
    return names
