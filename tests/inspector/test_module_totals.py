"""find_total_for_module gives the reference's totals on every key of every graph; module_total is exact.

The reference's answers are recorded by ``scripts/record_module_totals_oracle.py`` (ExecuTorch
1.5.1) into ``tests/data/module_totals_oracle.json``, keyed by fixture, with the SHA-256 of the
ETDump they were recorded on.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from numdiff import Inspector
from tests.conftest import FIXTURES

ORACLE = json.loads((Path(__file__).parents[1] / "data" / "module_totals_oracle.json").read_text())["fixtures"]
#: Fixtures committed with the suite: their recording must be current (realistic ones are checked when current).
CORE = ("attention_view", "cnn_nested", "many_runs", "mlp_fp32", "multi_output", "pt2e_quant",
        "pt2e_quant_portable", "xnnpack")


def _inspector(folder: Path, hierarchy: bool) -> Inspector:
    debug = folder / "debug_buffer.bin"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(folder / "etdump.etdp"), etrecord=str(folder / "etrecord.bin"),
                         debug_buffer_path=str(debug) if debug.is_file() else None,
                         enable_module_hierarchy=hierarchy)


def _current(name: str) -> dict[str, Any] | None:
    entry = ORACLE.get(name)
    dump = FIXTURES / name / "etdump.etdp"
    if entry is None or not dump.is_file():
        return None
    if hashlib.sha256(dump.read_bytes()).hexdigest() != entry["etdump_sha256"]:
        return None
    return entry  # type: ignore[no-any-return]


def _recorded(hierarchy: bool) -> list[Any]:
    mode = "enable_module_hierarchy" if hierarchy else "default"
    out = []
    for name in sorted(ORACLE):
        entry = _current(name)
        if entry is not None and "totals" in entry[mode] and (not hierarchy or name in CORE):
            out.append(pytest.param(name, entry[mode]["totals"], id=name))
    return out


def test_the_core_recordings_are_current() -> None:
    stale = [name for name in CORE if _current(name) is None]
    assert not stale, f"rerun scripts/record_module_totals_oracle.py: {stale}"


@pytest.mark.parametrize(("name", "totals"), _recorded(False))
def test_find_total_for_module_equals_the_reference_on_every_key(name: str, totals: dict[str, float]) -> None:
    insp = _inspector(FIXTURES / name, False)
    got = {key: insp.find_total_for_module(key) for key in totals}
    assert got == pytest.approx(totals, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("name", "totals"), _recorded(True))
def test_find_total_for_module_with_module_hierarchy(name: str, totals: dict[str, float]) -> None:
    insp = _inspector(FIXTURES / name, True)
    assert {key: insp.find_total_for_module(key) for key in totals} == pytest.approx(totals, rel=1e-9, abs=1e-12)


def test_quantized_root_counts_every_op_by_substring_but_module_total_is_exact() -> None:
    name = "pt2e_quant_portable"
    totals = ORACLE[name]["default"]["totals"]
    insp = _inspector(FIXTURES / name, False)
    # The reference: "L__self__" is a substring of every key, "...fc" of fc1, fc2 and fc3.
    assert insp.find_total_for_module("L__self__") == pytest.approx(totals["L__self__"])
    fcs = sum(totals[f"L__self__L__self__fc{i}"] for i in (1, 2, 3))
    assert insp.find_total_for_module("L__self__L__self__fc") == pytest.approx(fcs)
    # numdiff's exact rule: a partial name is no module; a module counts itself and its submodules.
    assert insp.module_total("L__self__L__self__fc") == 0.0
    assert insp.module_total("L__self__L__self__fc1") == pytest.approx(totals["L__self__L__self__fc1"])


def test_module_total_counts_a_module_and_its_descendants_only() -> None:
    name = "cnn_nested"
    totals = ORACLE[name]["default"]["totals"]
    insp = _inspector(FIXTURES / name, False)
    keys = [k for k in totals if k.startswith("L__self__features.") or k.startswith("L__self___features")]
    assert keys
    for key in keys:  # cnn_nested's keys are never substrings of other keys' names at a module boundary
        exact = insp.module_total(key)
        assert exact <= insp.find_total_for_module(key) + 1e-12
    root = max(totals, key=lambda k: totals[k])
    assert insp.module_total("no_such_module") == 0.0
    assert insp.module_total(root) <= totals[root] + 1e-12
