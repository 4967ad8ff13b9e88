"""The last-resort route through torch's export deserializer still loads what the builder loads."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from numdiff.program.loader import load_program
from numdiff.program._loader_torch import load_program_with_torch

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize("fixture,entry", [("mlp_fp32", "edge_dialect_exported_program/forward"),
                                           ("xnnpack", "edge_dialect_exported_program/forward")])
def test_torch_route_matches_the_builder(fixture: str, entry: str) -> None:
    with zipfile.ZipFile(FIXTURES / fixture / "etrecord.bin") as z:
        program = json.loads(z.read(entry))
        companions = [z.read(entry + suffix) for suffix in ("_state_dict", "_constants", "_example_inputs")]
    built = load_program(program, *companions)
    via_torch = load_program_with_torch(json.loads(json.dumps(program)), *companions)

    def summary(ep: object) -> list[tuple[str, str, object, str]]:
        return [(n.op, n.name, n.meta.get("debug_handle"), n.meta.get("numdiff_op_type", ""))
                for n in ep.graph.nodes]  # type: ignore[attr-defined]

    assert summary(via_torch) == summary(built)
