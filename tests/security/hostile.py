"""Craft hostile ETRecords from the real fixtures and check numdiff refuses them without running anything.

Every crafted file is a copy of a fixture ETRecord (never the fixture itself) with one program
entry's JSON rewritten, written into the test's ``tmp_path``. Payloads write a *canary* file when
they run; the checks assert it never appears.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from numdiff.errors import NumdiffError
from numdiff.inspector import Inspector
from numdiff.schema.etrecord import parse_etrecord

FIXTURES = Path(__file__).parents[1] / "fixtures"
EDGE = "edge_dialect_exported_program/forward"
ATEN = "exported_program"
#: Program entry → ETRecord attribute that loads it.
ATTRIBUTE = {EDGE: "edge_dialect_program", ATEN: "exported_program"}
#: Program entry → the reference graph that makes calculate_numeric_gap load it.
REFERENCE_GRAPH = {EDGE: "edge_dialect_exported_program", ATEN: "exported_program"}

Program = dict[str, Any]


def canary_payload(canary: Path) -> str:
    """Python that creates ``canary`` if anything ever evaluates it."""
    return f"__import__('os').system('touch {canary}')"


def craft(tmp_path: Path, entry: str, mutate: Callable[[Program], None], fixture: str = "mlp_fp32") -> Path:
    """A copy of ``fixture``'s ETRecord whose program ``entry`` went through ``mutate``."""
    source = FIXTURES / fixture / "etrecord.bin"
    target = tmp_path / f"hostile_{fixture}.etrecord"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == entry:
                program = json.loads(data)
                mutate(program)
                data = json.dumps(program).encode()
            zout.writestr(info.filename, data)
    return target


def nodes(program: Program) -> list[dict[str, Any]]:
    return program["graph_module"]["graph"]["nodes"]  # type: ignore[no-any-return]


def first_op(program: Program) -> dict[str, Any]:
    """The first operator node (its target is what attacks replace)."""
    return nodes(program)[0]


def rename_everywhere(program: Any, old: str, new: str) -> Any:
    """Replace the value name ``old`` by ``new`` in every string and dict key equal to it."""
    if isinstance(program, dict):
        return {(new if k == old else k): rename_everywhere(v, old, new) for k, v in program.items()}
    if isinstance(program, list):
        return [rename_everywhere(v, old, new) for v in program]
    return new if program == old else program


def user_input_name(program: Program) -> str:
    spec = next(s for s in program["graph_module"]["signature"]["input_specs"] if "user_input" in s)
    return str(spec["user_input"]["arg"]["as_tensor"]["name"])


def user_output_name(program: Program) -> str:
    spec = program["graph_module"]["signature"]["output_specs"][0]
    return str(spec["user_output"]["arg"]["as_tensor"]["name"])


def replace_program(program: Program, new: Program) -> None:
    program.clear()
    program.update(new)


def _inspector(path: Path, fixture: str) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(
            etdump_path=str(FIXTURES / fixture / "etdump.etdp"),
            etrecord=str(path),
            debug_buffer_path=str(FIXTURES / fixture / "debug_buffer.bin"),
        )


def assert_refused(path: Path, entry: str, canary: Path, match: str, fixture: str = "mlp_fp32") -> None:
    """Loading the crafted program fails with a named error, through every public route; no canary."""
    record = parse_etrecord(path)
    with pytest.raises(NumdiffError, match=match) as info:
        getattr(record, ATTRIBUTE[entry])
    assert str(path) in str(info.value) and entry in str(info.value)
    with pytest.raises(NumdiffError, match=match) as info:
        _inspector(path, fixture).calculate_numeric_gap("MSE", reference_graph=REFERENCE_GRAPH[entry])
    assert str(path) in str(info.value)
    _default_route_runs_nothing(path, fixture)
    assert not canary.exists(), "the payload ran"


def _default_route_runs_nothing(path: Path, fixture: str) -> None:
    """The default reference graph may not need the crafted program; it must then simply not run it."""
    try:
        _inspector(path, fixture).calculate_numeric_gap("MSE")
    except NumdiffError:
        pass


def load_renamed(path: Path, entry: str, canary: Path, fixture: str = "mlp_fp32") -> Any:
    """A program whose unsafe names numdiff renamed: it loads and runs, the payload never does."""
    program = getattr(parse_etrecord(path), ATTRIBUTE[entry])
    program.module()
    # A renamed ATen node no longer matches the Edge program's from_node names: skip that validation.
    gap = _inspector(path, fixture).calculate_numeric_gap(
        "MSE", reference_graph=REFERENCE_GRAPH[entry], disable_debug_handle_validation=True
    )
    assert len(gap) > 0
    _default_route_runs_nothing(path, fixture)
    assert not canary.exists(), "the payload ran"
    return program
