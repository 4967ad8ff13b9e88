"""Names from a crafted ETRecord never reach generated Python source as they are.

Value names (graph inputs, nodes, outputs) that are not plain identifiers are renamed to
``_nd_<n>``: the program still loads and runs, the original name stays in
``node.meta["numdiff_original_name"]``, and the payload in the name never runs. Names that must
match something else exactly (state-dict keys, forward argument names, keyword arguments) are
refused with an error naming the file and the name.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from numdiff.errors import ETRecordError
from numdiff.program.guard import ORIGINAL_NAME_KEY
from numdiff.schema.etrecord import parse_etrecord
from tests.security.hostile import (
    ATEN,
    EDGE,
    Program,
    assert_refused,
    canary_payload,
    craft,
    first_op,
    load_renamed,
    rename_everywhere,
    replace_program,
    user_input_name,
    user_output_name,
)


def _original_names(program: object) -> dict[str, str]:
    return {
        n.name: n.meta[ORIGINAL_NAME_KEY]
        for n in program.graph.nodes  # type: ignore[attr-defined]
        if ORIGINAL_NAME_KEY in n.meta
    }


def _renamer(pick: str, payload: str) -> object:
    def mutate(program: Program) -> None:
        old = {"input": user_input_name, "output": user_output_name}.get(pick, lambda p: str(first_op(p)["name"]))(program)
        replace_program(program, rename_everywhere(program, old, payload))

    return mutate


@pytest.mark.parametrize("entry", [ATEN, EDGE], ids=["aten", "edge"])
@pytest.mark.parametrize("pick", ["input", "node", "output"])
def test_value_name_with_code_is_renamed(tmp_path: Path, pick: str, entry: str) -> None:
    canary = tmp_path / "CANARY"
    payload = f"x={canary_payload(canary)}"
    path = craft(tmp_path, entry, _renamer(pick, payload))  # type: ignore[arg-type]
    program = load_renamed(path, entry, canary)
    assert payload in _original_names(program).values()
    assert all(n.name.isidentifier() for n in program.graph.nodes)


def test_builtin_shadowing_name_is_renamed(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    path = craft(tmp_path, ATEN, _renamer("input", "torch"))  # type: ignore[arg-type]
    program = load_renamed(path, ATEN, canary)
    assert "torch" in _original_names(program).values()


@pytest.mark.parametrize("entry", [ATEN, EDGE], ids=["aten", "edge"])
def test_state_dict_key_with_quote_is_refused(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"
    key = f'fc1.w"+{canary_payload(canary)}+"'

    def mutate(program: Program) -> None:
        program["graph_module"]["signature"]["input_specs"][0]["parameter"]["parameter_name"] = key

    path = craft(tmp_path, entry, mutate)
    assert_refused(path, entry, canary, match=r"parameter name .* is not a dotted attribute path")


@pytest.mark.parametrize("entry", [ATEN, EDGE], ids=["aten", "edge"])
def test_forward_argument_name_with_code_is_refused(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        signature = program["graph_module"]["module_call_graph"][0]["signature"]
        signature["forward_arg_names"] = [f"x={canary_payload(canary)}"]

    path = craft(tmp_path, entry, mutate)
    assert_refused(path, entry, canary, match=r"forward argument name .* is not a plain identifier")


@pytest.mark.parametrize("entry", [ATEN, EDGE], ids=["aten", "edge"])
def test_pytree_key_with_code_is_refused(tmp_path: Path, entry: str) -> None:
    canary = tmp_path / "CANARY"
    key = f"k':{canary_payload(canary)},'"

    def mutate(program: Program) -> None:
        signature = program["graph_module"]["module_call_graph"][0]["signature"]
        leaf: dict[str, object] = {"type": None, "context": None, "children_spec": []}
        args = {"type": "builtins.tuple", "context": "null", "children_spec": [leaf]}
        kwargs = {"type": "builtins.dict", "context": json.dumps([key]), "children_spec": [leaf]}
        signature["in_spec"] = json.dumps([1, {"type": "builtins.tuple", "context": "null", "children_spec": [args, kwargs]}])

    path = craft(tmp_path, entry, mutate)
    assert_refused(path, entry, canary, match=r"pytree key .* is not a plain name")


def _delegate_named(tmp_path: Path, name: str) -> Path:
    from tests.schema.test_etrecord import _delegating_entries, _zip

    entries = _delegating_entries(with_original=True)
    program = json.loads(entries[EDGE])
    program["graph_module"]["graph"]["nodes"][0]["inputs"][0]["name"] = name
    entries[EDGE] = json.dumps(program).encode()
    return _zip(entries, tmp_path)


def test_delegate_module_name_with_code_is_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    path = _delegate_named(tmp_path, f'm"+{canary_payload(canary)}+"')
    with pytest.raises(ETRecordError, match=r"rec\.bin.*argument name 'm\"\+__import__"):
        parse_etrecord(path).edge_dialect_program  # noqa: B018
    assert not canary.exists()


def test_delegate_module_name_shadowing_an_attribute_is_renamed(tmp_path: Path) -> None:
    edge = parse_etrecord(_delegate_named(tmp_path, "forward")).edge_dialect_program
    assert "lowered_module_0" in {n.name for n in edge.graph.nodes}
    assert callable(edge.graph_module.forward)


def test_fixture_is_left_untouched(tmp_path: Path) -> None:
    source = Path(__file__).parents[1] / "fixtures" / "mlp_fp32" / "etrecord.bin"
    before = source.read_bytes()
    craft(tmp_path, ATEN, _renamer("input", "x y"))  # type: ignore[arg-type]
    assert source.read_bytes() == before
    with zipfile.ZipFile(tmp_path / "hostile_mlp_fp32.etrecord") as z:
        assert "x y" in z.read(ATEN).decode()


def test_pytree_type_that_is_not_a_dotted_name_is_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        signature = program["graph_module"]["module_call_graph"][0]["signature"]
        spec = {"type": canary_payload(canary), "context": "null", "children_spec": []}
        signature["out_spec"] = json.dumps([1, spec])

    path = craft(tmp_path, ATEN, mutate)
    assert_refused(path, ATEN, canary, match=r"out spec: pytree type .*__import__.* is not a dotted attribute path")
