"""A small generated fleet (12 runs: one truncated ETDump, one missing debug buffer) analysed once per session."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.dev_scripts import load_script

pytest.importorskip("pyarrow")

# Test traffic stays on loopback: a local Ray started by these tests binds to 127.0.0.1 (Ray reads this
# when it is imported, which the tests do later; without it, Ray listens on the machine's external address).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

REPO = Path(__file__).resolve().parents[2]


def make_fleet_module() -> ModuleType:
    return load_script("scripts/make_fleet.py", "numdiff_make_fleet")


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """12 runs over 6 devices, analysed with the pool backend (2 workers)."""
    from numdiff.batch import load_manifest, run_batch

    root = tmp_path_factory.mktemp("fleet")
    manifest = make_fleet_module().make_fleet(root, 12, REPO / "numdiff/examples/planted_culprit", iterations=3,
                                              seed=7, broken=1, missing=1)
    out = root / "out"
    result = run_batch(load_manifest(manifest), out, backend="pool", workers=2)
    return {"root": root, "manifest": manifest, "out": out, "result": result}
