"""Issue 26: sizes and allow-listed targets that do not fit their node are refused by name, not crashed on.

Each case is a real fixture ETRecord with one field changed as a mutation campaign found it; each must be an
``ETRecordError`` naming the file, the entry and the node, on every public route, never a raw exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.security.hostile import ATEN, EDGE, Program, assert_refused, craft, nodes


def _parameter_meta(program: Program) -> dict[str, Any]:
    values = program["graph_module"]["graph"]["tensor_values"]
    name = next(n for n in values if n.startswith("p_") and n.endswith("bias"))
    return values[name]  # type: ignore[no-any-return]


def _node(program: Program, prefix: str) -> dict[str, Any]:
    return next(n for n in nodes(program) if n["outputs"] and str(n["target"]).startswith(prefix))


def test_a_meta_whose_element_count_overflows_is_refused(tmp_path: Path) -> None:
    def mutate(program: Program) -> None:
        meta = _parameter_meta(program)
        meta["sizes"] = [{"as_int": 2**31}, {"as_int": 2**31}]
        meta["strides"] = [{"as_int": 2**31}, {"as_int": 1}]

    path = craft(tmp_path, ATEN, mutate)
    assert_refused(path, ATEN, tmp_path / "CANARY",
                   match=r"(?s)p_\w+_bias.* sizes \[2147483648, 2147483648\] hold more elements than.*")


def test_a_builtin_given_the_wrong_number_of_arguments_is_refused(tmp_path: Path) -> None:
    def mutate(program: Program) -> None:
        _node(program, "executorch.exir.dialects.edge.ops.aten.relu")["target"] = "_operator.add"

    path = craft(tmp_path, EDGE, mutate)
    assert_refused(path, EDGE, tmp_path / "CANARY",
                   match=r"(?s)node 'aten_relu_default': '_operator.add' takes 2 arguments \(a, b\), the node gives 1 positional")


@pytest.mark.parametrize("hop", ["cond", "map_impl", "while_loop"])
def test_a_higher_order_op_given_arguments_of_another_signature_is_refused(tmp_path: Path, hop: str) -> None:
    def mutate(program: Program) -> None:
        _node(program, "executorch.exir.dialects.edge.ops.aten.addmm")["target"] = f"torch.ops.higher_order.{hop}"

    path = craft(tmp_path, EDGE, mutate)
    assert_refused(path, EDGE, tmp_path / "CANARY",
                   match=rf"(?s)node 'aten_addmm_default'.*'torch.ops.higher_order.{hop}' takes")
