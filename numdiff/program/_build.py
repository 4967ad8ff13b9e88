"""Assemble a ``torch.export.ExportedProgram`` from a serialized program, without torch's deserializer.

The graph comes from :class:`~numdiff.program._builder.GraphBuilder`; this module decodes
the rest of the program JSON with ``torch.export`` classes directly: the graph signature
(:mod:`torch.export.graph_signature`), range constraints (shape symbols with their bounds), the
module call graph (pytree specs through ``treespec_loads``, a registry lookup), state dict,
constants and example inputs (``torch.load(weights_only=True)`` only). Nothing here imports
``torch._export.serde.serialize`` or ``torch._dynamo`` or evaluates type hints.

The nodes carry no fake-tensor ``val`` metadata (numdiff runs graphs on real tensors), which
torch's verifier would demand; :class:`LoadedProgram` — an ``ExportedProgram`` in every other
respect — therefore checks what applies to a loaded program (its signature and module call
graph) when it is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import torch
from torch.export import graph_signature as gs
from torch.export.exported_program import ExportedProgram, ModuleCallEntry, ModuleCallSignature
from torch.utils._pytree import treespec_loads

from torch._export.verifier import Verifier

from numdiff.program._delegate import DELEGATE_CALL, LoweredModule, UnrunnableOp
from numdiff.program._edge_target import EdgeTarget
from numdiff.program.graph_args import Unsupported
from numdiff.program.graph_meta import ProgramLoadError
from numdiff.program.guard import ProgramNames

__all__ = ["LoadedProgram", "NumdiffEdgeVerifier", "module_call_graph", "range_constraints", "require_supported_torch",
           "signature"]

#: The oldest torch whose ``torch.export`` has every graph-signature kind this module decodes
#: (``OutputKind.PARAMETER_MUTATION`` arrived in 2.9); pyproject.toml declares the tested range.
MIN_TORCH = (2, 9)


def require_supported_torch(version: str) -> None:
    """Refuse a torch older than :data:`MIN_TORCH` with a named error instead of an AttributeError later.

    Raises:
        UsageError: ``version`` (``torch.__version__``) is older; the message says what to install.
    """
    from numdiff.errors import UsageError

    parts = re.findall(r"\d+", version.split("+")[0])[:2]
    found = tuple(int(p) for p in parts)
    if len(found) == 2 and found < MIN_TORCH:
        raise UsageError(f"numdiff builds and runs programs with torch 2.9 or newer; this environment has torch {version}\n"
                         "Install a tested torch: pip install 'torch>=2.9.1,<2.16' (the profiling view, which needs "
                         "no torch, works with any).")


require_supported_torch(torch.__version__)

_INPUT_KINDS = {
    "user_input": gs.InputKind.USER_INPUT, "parameter": gs.InputKind.PARAMETER, "buffer": gs.InputKind.BUFFER,
    "tensor_constant": gs.InputKind.CONSTANT_TENSOR, "custom_obj": gs.InputKind.CUSTOM_OBJ, "token": gs.InputKind.TOKEN,
}
_OUTPUT_KINDS = {
    "user_output": gs.OutputKind.USER_OUTPUT, "loss_output": gs.OutputKind.LOSS_OUTPUT,
    "buffer_mutation": gs.OutputKind.BUFFER_MUTATION, "parameter_mutation": gs.OutputKind.PARAMETER_MUTATION,
    "gradient_to_parameter": gs.OutputKind.GRADIENT_TO_PARAMETER,
    "gradient_to_user_input": gs.OutputKind.GRADIENT_TO_USER_INPUT,
    "user_input_mutation": gs.OutputKind.USER_INPUT_MUTATION, "token": gs.OutputKind.TOKEN,
}
_TARGET_KEYS = ("parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "user_input_name")
_MAX_BOUND = 1 << 62


class NumdiffEdgeVerifier(Verifier):
    """Verifier for programs numdiff loaded from an ETRecord (Edge ops, delegates, stand-ins)."""

    dialect = "NUMDIFF_EDGE"

    def allowed_op_types(self) -> tuple[type[Any], ...]:
        return (torch._ops.OpOverload, torch._ops.HigherOrderOperator, type(DELEGATE_CALL), UnrunnableOp, EdgeTarget)

    def allowed_getattr_types(self) -> tuple[type[Any], ...]:
        return (torch.fx.GraphModule, torch.utils._pytree.TreeSpec, LoweredModule)


class LoadedProgram(ExportedProgram):
    """An ``ExportedProgram`` numdiff built from a file (no fake-tensor ``val`` metadata on nodes).

    Its range constraints are decoded on first use: they need sympy, whose import alone costs
    over a second, and running the graph never reads them.
    """

    _numdiff_pending_ranges: dict[str, Any] | None = None

    @property  # type: ignore[misc]
    def range_constraints(self) -> dict[Any, Any]:
        pending = self._numdiff_pending_ranges
        if pending is not None:
            self._range_constraints = range_constraints({"range_constraints": pending})
            self._numdiff_pending_ranges = None
        return self._range_constraints

    def validate(self) -> None:
        """Check the signature against the graph's placeholders and outputs, and the module call graph."""
        from torch._export.verifier import _verify_exported_program_module_call_graph, _verify_exported_program_signature

        _verify_exported_program_module_call_graph(self)
        _verify_exported_program_signature(self)


def _argument(arg: object, names: ProgramNames) -> gs.ArgumentSpec:
    """A signature argument: ``{"name": ...}`` (tensor/token) or an ``Argument`` union."""
    if isinstance(arg, dict) and set(arg) == {"name"}:
        return gs.TensorArgument(name=names.safe(arg["name"]))
    if not isinstance(arg, dict) or len(arg) != 1:
        raise ProgramLoadError("a signature argument is not a one-key JSON object")
    (kind, value), = arg.items()
    if kind == "as_tensor":
        return gs.TensorArgument(name=names.safe(value["name"]))
    if kind == "as_sym_int" and "as_name" in value:
        return gs.SymIntArgument(name=names.safe(value["as_name"]))
    if kind == "as_sym_float" and "as_name" in value:
        return gs.SymFloatArgument(name=names.safe(value["as_name"]))
    if kind == "as_sym_bool" and "as_name" in value:
        return gs.SymBoolArgument(name=names.safe(value["as_name"]))
    if kind == "as_custom_obj":
        return gs.CustomObjArgument(name=names.safe(value["name"]), class_fqn=str(value.get("class_fqn", "")))
    if kind == "as_token":
        return gs.TokenArgument(name=names.safe(value["name"]))
    if kind in ("as_int", "as_float", "as_bool", "as_string", "as_none"):
        return gs.ConstantArgument(name="", value=None if kind == "as_none" else value)
    raise Unsupported(f"signature argument kind {kind}")


#: Name fields each spec kind must carry (torch's signature classes assert on them).
_INPUT_REQUIRED = {"parameter": "parameter_name", "buffer": "buffer_name", "tensor_constant": "tensor_constant_name",
                   "custom_obj": "custom_obj_name"}
_OUTPUT_REQUIRED = {"buffer_mutation": "buffer_name", "parameter_mutation": "parameter_name",
                    "gradient_to_parameter": "parameter_name", "gradient_to_user_input": "user_input_name",
                    "user_input_mutation": "user_input_name"}


def _spec(spec: object, index: int, side: str, kinds: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The kind and body of one signature spec, checked to be ``{kind: {"arg": ..., ...}}`` with a known kind."""
    where = f"signature {side} spec {index}"
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ProgramLoadError(f"{where} is not a one-key JSON object")
    (kind, body), = spec.items()
    if kind not in kinds:
        raise Unsupported(f"{side} spec kind {str(kind)[:80]}")
    if not isinstance(body, dict) or "arg" not in body:
        raise ProgramLoadError(f"{where} ({kind}) has no 'arg' field")
    return kind, body


def _required(body: dict[str, Any], field_name: str | None, where: str) -> None:
    if field_name is not None and not isinstance(body.get(field_name), str):
        raise ProgramLoadError(f"{where} lacks its {field_name!r} field (a string)")


def signature(signature_json: object, names: ProgramNames) -> gs.ExportGraphSignature:
    """The graph signature of a serialized program (each spec's kind-specific fields checked first)."""
    if not isinstance(signature_json, dict):
        raise ProgramLoadError("the graph signature is not a JSON object")
    try:
        input_specs = []
        for index, spec in enumerate(signature_json.get("input_specs") or []):
            kind, body = _spec(spec, index, "input", _INPUT_KINDS)
            where = f"signature input spec {index} ({kind})"
            _required(body, _INPUT_REQUIRED.get(kind), where)
            if kind == "buffer" and not isinstance(body.get("persistent"), bool):
                raise ProgramLoadError(f"{where} lacks its 'persistent' field (true or false)")
            target = next((body[k] for k in _TARGET_KEYS if k in body and k != "user_input_name"), None)
            persistent = body.get("persistent") if kind == "buffer" else None
            input_specs.append(gs.InputSpec(_INPUT_KINDS[kind], _argument(body["arg"], names), target, persistent))
        output_specs = []
        for index, spec in enumerate(signature_json.get("output_specs") or []):
            kind, body = _spec(spec, index, "output", _OUTPUT_KINDS)
            _required(body, _OUTPUT_REQUIRED.get(kind), f"signature output spec {index} ({kind})")
            target = next((body[k] for k in ("buffer_name", "parameter_name", "user_input_name") if k in body), None)
            output_specs.append(gs.OutputSpec(_OUTPUT_KINDS[kind], _argument(body["arg"], names), target))
        return gs.ExportGraphSignature(input_specs=input_specs, output_specs=output_specs)
    except (AssertionError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, ProgramLoadError):
            raise
        raise ProgramLoadError(f"the graph signature is malformed: {type(e).__name__}: {str(e)[:300]}") from e


def _bound(value: object, infinite: object) -> object:
    import sympy  # type: ignore[import-untyped]  # only for programs with shape symbols (seconds to import)

    if value is None:
        return infinite
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProgramLoadError(f"range constraint bound {str(value)[:40]!r} is not an integer")
    if abs(value) >= _MAX_BOUND:
        return infinite
    return sympy.Integer(value)


def range_constraints(program: dict[str, Any]) -> dict[Any, Any]:
    """Shape symbols (names checked by the guard) with their bounds (``sympy.Symbol`` → ``ValueRanges``)."""
    constraints = program.get("range_constraints") or {}
    if not constraints:
        return {}
    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges

    out: dict[Any, Any] = {}
    for symbol, bounds in constraints.items():
        if not isinstance(bounds, dict):
            raise ProgramLoadError(f"range constraint for {symbol!r} is not a JSON object")
        low, high = _bound(bounds.get("min_val"), -int_oo), _bound(bounds.get("max_val"), int_oo)
        out[sympy.Symbol(symbol, integer=True)] = ValueRanges(low, high)
    return out


def module_call_graph(entries: Iterable[object] | None, names: ProgramNames) -> list[ModuleCallEntry]:
    """The module call graph (root signature with its pytree specs)."""
    graph = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            raise ProgramLoadError("a module call graph entry is not a JSON object")
        sig = entry.get("signature")
        decoded = None
        if isinstance(sig, dict):
            try:
                in_spec, out_spec = treespec_loads(sig["in_spec"]), treespec_loads(sig["out_spec"])
            except (KeyError, ValueError, TypeError, NotImplementedError) as e:
                raise ProgramLoadError(f"module call graph: unreadable pytree spec ({type(e).__name__}: {e})") from e
            decoded = ModuleCallSignature(
                inputs=[_argument(a, names) for a in sig.get("inputs") or []],
                outputs=[_argument(a, names) for a in sig.get("outputs") or []],
                in_spec=in_spec,
                out_spec=out_spec,
                forward_arg_names=sig.get("forward_arg_names"),
            )
        graph.append(ModuleCallEntry(fqn=str(entry.get("fqn", "")), signature=decoded))
    return graph
