"""Operator names in a crafted ETRecord never reach a callable outside the allow-list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numdiff.program._allowlist import ForbiddenOperator, classify_target
from tests.security.hostile import ATEN, EDGE, Program, assert_refused, craft, first_op, nodes

# (target, argument the payload would be called with) — each would run code or import if resolved.
ATTACKS = {
    "load_library": ("torch.ops.load_library", "{canary}.so"),
    "import_module": ("torch.ops.import_module", "os"),
    "os_system": ("os.system", "touch {canary}"),
    "importlib": ("importlib.import_module", "os"),
    "builtins_eval": ("builtins.eval", "open('{canary}', 'w')"),
    "builtins_exec": ("builtins.exec", "open('{canary}', 'w')"),
    "dunder_import": ("__import__", "os"),
    "dunder_chain": ("torch.__class__.__init__.__globals__", "x"),
    "hop_not_listed": ("torch.ops.higher_order.print", "touch {canary}"),
    "private_namespace": ("torch.ops._C._nn.default", "x"),
    "packet_not_overload": ("torch.ops.aten.relu", "x"),
    "dots_out_of_place": ("torch.ops.aten..relu.default", "x"),
    "extension_registry": ("#custom:os.system", "x"),
    "lazy_torch_module": ("torch._dynamo.reset", "x"),
}


def _with_target(target: str, argument: str) -> object:
    def mutate(program: Program) -> None:
        node = first_op(program)
        node["target"] = target
        node["inputs"] = [{"name": "command", "arg": {"as_string": argument}}]

    return mutate


@pytest.mark.parametrize("entry", [ATEN, EDGE], ids=["aten", "edge"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_forbidden_target_is_refused(tmp_path: Path, attack: str, entry: str) -> None:
    target, argument = ATTACKS[attack]
    canary = tmp_path / "CANARY"
    path = craft(tmp_path, entry, _with_target(target, argument.format(canary=canary)))  # type: ignore[arg-type]
    assert_refused(path, entry, canary, match=rf"refused 1 operator name.*{re.escape(repr(target))}")


def test_every_refused_operator_is_listed_once(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    bad = ["os.system", "builtins.eval", "torch.ops.load_library"]

    def mutate(program: Program) -> None:
        for node, target in zip(nodes(program), bad * 2, strict=False):
            node["target"] = target

    path = craft(tmp_path, ATEN, mutate)  # (ATen op names are not matched against the ETDump)
    assert_refused(path, ATEN, canary, match=r"refused 3 operator name\(s\).*'os\.system'.*'builtins\.eval'.*'torch\.ops\.load_library'")


def test_operator_argument_is_checked(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        first_op(program)["inputs"].append({"name": "fn", "arg": {"as_operator": "os.system"}})

    path = craft(tmp_path, ATEN, mutate)
    assert_refused(path, ATEN, canary, match=r"'os\.system'")


def test_kwarg_not_in_schema_is_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"

    def mutate(program: Program) -> None:
        first_op(program)["inputs"].append({"name": "inplace", "arg": {"as_bool": True}})

    for entry in (ATEN, EDGE):
        path = craft(tmp_path, entry, mutate)
        assert_refused(path, entry, canary, match=r"has no argument 'inplace'")


def test_kwarg_name_with_code_is_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    payload = f"x=__import__('os').system('touch {canary}'),y"

    def mutate(program: Program) -> None:
        first_op(program)["inputs"][0]["name"] = payload

    for entry in (ATEN, EDGE):
        path = craft(tmp_path, entry, mutate)
        assert_refused(path, entry, canary, match=r"argument name .* is not a plain identifier")


@pytest.mark.parametrize(
    "target",
    [
        "executorch.exir.dialects.edge.ops.aten.relu.default",
        "executorch.exir.dialects.edge.ops.quantized_decomposed.quantize_per_tensor.default",
        "executorch.exir.dialects.edge.ops.dim_order_ops._to_dim_order_copy.default",
        "executorch.exir.dialects.backend.ops.quantized_decomposed.dequantize_per_tensor.default",
        "torch.ops.higher_order.executorch_call_delegate",
        "torch.ops.higher_order.cond",
        "_operator.getitem",
        "memory.alloc",
        "torch.ops.no_such_namespace.op.default",
    ],
)
def test_names_executorch_writes_are_allowed(target: str) -> None:
    assert classify_target(target).kind in ("edge", "delegate", "higher_order", "builtin", "unrunnable")


@pytest.mark.parametrize("target", sorted(t for t, _ in ATTACKS.values()) + ["torch.ops.aten.relu.__call__", "a" * 300])
def test_allow_list_refuses(target: str) -> None:
    with pytest.raises(ForbiddenOperator):
        classify_target(target)


def test_unlisted_higher_order_op_gets_a_true_hint(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    path = craft(tmp_path, ATEN, _with_target("torch.ops.higher_order.scan", "x"))  # type: ignore[arg-type]
    assert_refused(path, ATEN, canary, match=r"(?s)'torch\.ops\.higher_order\.scan'.*please report the operator")
    path = craft(tmp_path, ATEN, _with_target("os.system", "x"))  # type: ignore[arg-type]
    assert_refused(path, ATEN, canary, match=r"(?s)'os\.system'.*the file was modified or crafted")
