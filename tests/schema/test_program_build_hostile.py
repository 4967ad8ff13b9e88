"""Hostile program JSON against numdiff's program builder (signature specs, node output lists).

Each case rewrites one field of a real fixture's ``exported_program`` entry (in a copy under
``tmp_path``) and checks the load fails with a named :class:`ETRecordError` that says which
entry and which field is wrong, instead of torch's own assertion or a long-running build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from numdiff.errors import ETRecordError
from numdiff.schema.etrecord import parse_etrecord
from tests.security.hostile import ATEN, craft, nodes

Program = dict[str, Any]


def _load(path: Path) -> object:
    return parse_etrecord(str(path)).exported_program


def _input_specs(program: Program) -> list[dict[str, Any]]:
    return program["graph_module"]["signature"]["input_specs"]  # type: ignore[no-any-return]


def _buffer_without_persistent(program: Program) -> None:
    spec = _input_specs(program)[0]
    body = spec.pop("parameter")
    spec["buffer"] = {"arg": body["arg"], "buffer_name": body["parameter_name"]}


def _parameter_without_name(program: Program) -> None:
    del _input_specs(program)[0]["parameter"]["parameter_name"]


def _spec_without_arg(program: Program) -> None:
    del _input_specs(program)[0]["parameter"]["arg"]


def _mutation_without_target(program: Program) -> None:
    outputs = program["graph_module"]["signature"]["output_specs"]
    outputs.append({"buffer_mutation": {"arg": {"as_tensor": {"name": "linear"}}}})


def _non_bool_persistent(program: Program) -> None:
    _buffer_without_persistent(program)
    _input_specs(program)[0]["buffer"]["persistent"] = "yes"


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (_buffer_without_persistent, r"exported_program.*input spec 0 \(buffer\) lacks its 'persistent' field"),
        (_non_bool_persistent, r"input spec 0 \(buffer\) lacks its 'persistent' field \(true or false\)"),
        (_parameter_without_name, r"input spec 0 \(parameter\) lacks its 'parameter_name' field"),
        (_spec_without_arg, r"input spec 0 \(parameter\) has no 'arg' field"),
        (_mutation_without_target, r"output spec 1 \(buffer_mutation\) lacks its 'buffer_name' field"),
    ],
)
def test_signature_spec_missing_kind_field_is_named(tmp_path: Path, mutate: Any, match: str) -> None:
    path = craft(tmp_path, ATEN, mutate)
    with pytest.raises(ETRecordError, match=match):
        _load(path)


def test_repeated_node_outputs_are_refused(tmp_path: Path) -> None:
    """A single-output op whose ``outputs`` list is repeated (fuzz case timeout-16157)."""

    def repeat(program: Program) -> None:
        node = nodes(program)[0]
        node["outputs"] = node["outputs"] * 5000

    with pytest.raises(ETRecordError, match=r"node 'linear' lists 5000 outputs but operator .*linear.* returns 1"):
        _load(craft(tmp_path, ATEN, repeat))


def test_duplicate_output_names_are_refused(tmp_path: Path) -> None:
    """A multi-output list naming the same value twice is refused, not turned into renamed copies."""

    def duplicate(program: Program) -> None:
        node = nodes(program)[0]
        node["outputs"] = [{"as_tensors": [{"name": "linear"}, {"name": "linear"}]}]

    with pytest.raises(ETRecordError, match=r"lists its output 'linear' more than once"):
        _load(craft(tmp_path, ATEN, duplicate))


def test_unmutated_fixture_loads(tmp_path: Path) -> None:
    """The crafting itself leaves a loadable program (so the failures above come from the mutation)."""
    program = _load(craft(tmp_path, ATEN, lambda p: None))
    assert [s.kind.name for s in program.graph_signature.input_specs][:1] == ["PARAMETER"]  # type: ignore[attr-defined]
