"""Last-resort loader: one serialized program through torch's own export deserializer.

numdiff builds programs itself (:mod:`numdiff.program.loader`); this route only runs for a
construct that builder does not know, and the loader logs a note when it does. Importing this
module imports ``torch._export.serde.serialize`` (and with it ``torch._dynamo``): seconds.

ExecuTorch writes programs with its own copy of the torch.export serializer: an older schema
(major version 5), Edge operator names, ``debug_handle``/``from_node`` metadata and delegate calls
whose first argument is a JSON-encoded lowered module. This module

0. checks the JSON with :func:`~numdiff.program.guard.guard_program` before anything
   resolves, imports or generates code from it (allow-listed operators only, safe value names,
   no evaluable expressions),
1. rewrites the JSON so torch's own deserializer can read it (operator names → runnable torch ops,
   delegate calls and unknown ops → a placeholder read without a schema),
2. loads the pickled companions itself with ``torch.load(weights_only=True)`` only (torch's
   deserializer would fall back to unsafe unpickling),
3. runs torch's ``GraphModuleDeserializer`` and then restores what the reference's loader exposes on
   every node (``debug_handle``, ``nn_module_stack``, ``from_node``, ``stack_trace``) plus
   ``numdiff_op_type``, and swaps placeholders for :class:`DelegateCall` / :class:`UnrunnableOp`.
"""

from __future__ import annotations

import json
import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._export.serde import schema as torch_schema
from torch._export.serde import serialize as torch_serde
from torch._export.verifier import Verifier, load_verifier
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from numdiff.program._edge_ops import resolve_target
from numdiff.program._build import NumdiffEdgeVerifier
from numdiff.program._allowlist import is_plain_identifier
from numdiff.program.guard import ORIGINAL_NAME_KEY, ProgramNames, guard_program, prepare_for_torch
from numdiff.program.pickles import load_torch_artifact  # noqa: F401 - re-exported
from numdiff.program.graph_meta import (
    DELEGATE_TARGET,
    ProgramLoadError,
    check_header,
    parse_nn_module_stack,
    parse_source_fn_stack,
)
from numdiff.program._delegate import (
    DELEGATE_CALL,
    DELEGATE_OP_TYPE,
    PLACEHOLDER_HOP,  # noqa: F401 - importing it registers torch.ops.higher_order.<placeholder>
    PLACEHOLDER_TARGET,
    UnrunnableOp,
    load_lowered_module,
)

__all__ = ["load_program_with_torch"]

from numdiff.program._builder import OP_TYPE_KEY, UNRUNNABLE_KEY

# torch's deserializer keeps its state in a module global, so one program deserializes at a time.
_DESERIALIZE_LOCK = threading.RLock()




@dataclass(slots=True)
class _NodePlan:
    """What the rewrite decided for one serialized node, applied after torch deserialized it."""

    serialized_target: str
    op_type: str
    kind: str  # "op" | "delegate" | "unrunnable"
    metadata: dict[str, str]
    reason: str = ""
    lowered: list[Any] = field(default_factory=list)




def _plan_node(node: dict[str, Any]) -> _NodePlan:
    """Rewrite one serialized node in place so torch's deserializer accepts it."""
    target = node.get("target")
    if not isinstance(target, str):
        raise ProgramLoadError(f"node {node.get('name')!r} has no operator name")
    metadata = dict(node.get("metadata") or {})
    if target == DELEGATE_TARGET:
        plan = _NodePlan(target, DELEGATE_OP_TYPE, "delegate", metadata)
    else:
        resolved = resolve_target(target)
        if resolved.target is not None:
            node["target"] = resolved.target
            return _NodePlan(target, resolved.op_type, "op", metadata)
        reason = f"operator {target!r} is not available in this process (no torch op or numdiff stand-in)"
        plan = _NodePlan(target, resolved.op_type, "unrunnable", metadata, reason=reason)
    # Placeholder path: inputs read positionally and without a schema, like the reference does.
    node["target"] = PLACEHOLDER_TARGET
    for named in node.get("inputs", []):
        named["kind"] = torch_schema.ArgumentKind.POSITIONAL.value
    # True keeps torch from wrapping a lone output in a getitem; lists still get getitems.
    node["is_hop_single_tensor_return"] = True
    return plan






def _restore_meta(node: torch.fx.Node, plan: _NodePlan) -> dict[str, Any]:
    """Set the metadata the reference loader exposes; return what getitem users inherit."""
    inherited: dict[str, Any] = {}
    if raw_handle := plan.metadata.get("debug_handle"):
        try:
            inherited["debug_handle"] = int(raw_handle)
        except ValueError as e:
            raise ProgramLoadError(f"node {node.name!r} has a non-integer debug_handle {raw_handle!r}") from e
    if raw_source := plan.metadata.get("source_fn_stack"):
        # Kept as (name, type string): torch would resolve the strings by attribute walks.
        node.meta["source_fn_stack"] = parse_source_fn_stack(raw_source)
    if raw_stack := plan.metadata.get("nn_module_stack"):
        inherited["nn_module_stack"] = parse_nn_module_stack(raw_stack)
    elif plan.kind == "delegate":
        node.meta.pop("nn_module_stack", None)
    node.meta.update(inherited)
    node.meta[OP_TYPE_KEY] = plan.op_type
    return inherited


def _getitem_users(node: torch.fx.Node) -> list[torch.fx.Node]:
    found = []
    for user in node.users:
        if user.op == "call_function" and user.target is operator.getitem:
            found.append(user)
            found.extend(_getitem_users(user))
    return found


def _lowered_attr_name(gm: torch.fx.GraphModule, wanted: object, count: int) -> str:
    """The module attribute a delegate's lowered module is stored under (the file's name if it is plain)."""
    if is_plain_identifier(wanted) and not hasattr(gm, wanted) and len(wanted) <= 128:
        return str(wanted)
    name = f"lowered_module_{count}"
    while hasattr(gm, name):
        name += "_"
    return name


def _keep_original_names(gm: torch.fx.GraphModule, names: ProgramNames) -> None:
    if not names.original:
        return
    for module in gm.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                if (original := names.original.get(node.name)) is not None:
                    node.meta[ORIGINAL_NAME_KEY] = original


def _finish_graph(gm: torch.fx.GraphModule, plans: list[_NodePlan], names: ProgramNames) -> None:
    graph = gm.graph
    _keep_original_names(gm, names)
    main_nodes = [
        n
        for n in graph.nodes
        if n.op == "call_function" and not (n.target is operator.getitem and isinstance(n.args[0], torch.fx.Node))
    ]
    if len(main_nodes) != len(plans):
        raise ProgramLoadError(
            f"graph has {len(main_nodes)} operator nodes after loading but the file lists {len(plans)}",
            "This is a numdiff bug or an unsupported program layout; please report it with the file.",
        )
    for node, plan in zip(main_nodes, plans, strict=True):
        inherited = _restore_meta(node, plan)
        for item in _getitem_users(node):
            item.meta.update(inherited)
            item.meta[OP_TYPE_KEY] = "getitem"
        if plan.kind == "op":
            continue
        if plan.kind == "unrunnable":
            node.target = UnrunnableOp(plan.serialized_target, plan.reason)
            node.meta[UNRUNNABLE_KEY] = plan.reason
            continue
        lowered_arg = node.args[0] if node.args else None
        if not isinstance(lowered_arg, str):
            raise ProgramLoadError(f"delegate node {node.name!r} has no lowered module argument")
        lowered = plan.lowered[0]
        attr_name = _lowered_attr_name(gm, plan.lowered[1], plan.lowered[2])
        gm.register_module(attr_name, lowered)
        with graph.inserting_before(node):
            attr = graph.get_attr(attr_name)
        attr._rename(attr_name)
        node.args = (attr, *node.args[1:])
        node.target = DELEGATE_CALL
        if lowered.unrunnable_reason is not None:
            node.meta[UNRUNNABLE_KEY] = f"{lowered.backend_id} delegate: {lowered.unrunnable_reason}"
    graph.lint()  # type: ignore[no-untyped-call, unused-ignore]  # (untyped in torch 2.9's stubs)
    gm.recompile()


def load_program_with_torch(
    program: dict[str, Any],
    state_dict: bytes,
    constants: bytes,
    example_inputs: bytes,
    *,
    load_nested: Callable[[object, bytes, bytes, bytes], torch.export.ExportedProgram] | None = None,
    verifier: type[Verifier] | None = None,
) -> torch.export.ExportedProgram:
    """Build a runnable ``ExportedProgram`` from one serialized program and its companions.

    Args:
        program: The parsed program JSON (a copy: torch's route rewrites it).
        state_dict: ``torch.save`` bytes of the state dict.
        constants: ``torch.save`` bytes of the constants.
        example_inputs: ``torch.save`` bytes of the example inputs (may be empty).
        load_nested: Loads a delegate's original program (parsed JSON, state dict, constants, example
            inputs); :func:`numdiff.program.loader.load_program` passes its own. Defaults to this route.
        verifier: Verifier to attach. Defaults to torch's verifier for ATen/training programs that
            need no stand-ins, else :class:`NumdiffEdgeVerifier`.

    Returns:
        The loaded program; nodes carry the metadata listed in the module docstring.

    Raises:
        ProgramLoadError: The program or a companion cannot be read (no file/entry context yet).
    """
    check_header(program)  # the caller parsed and checked it; nested programs arrive here unchecked
    names = guard_program(program)  # before anything resolves, imports or generates code from the JSON
    graph_json = program["graph_module"].get("graph", {})
    plans = [_plan_node(node) for node in graph_json.get("nodes", [])]
    prepare_for_torch(program, names)
    for count, (node_json, plan) in enumerate(
        (n, p) for n, p in zip(graph_json.get("nodes", []), plans, strict=True) if p.kind == "delegate"
    ):
        first = node_json["inputs"][0]
        text = first.get("arg", {}).get("as_string")
        if not isinstance(text, str):
            raise ProgramLoadError(f"delegate node {node_json.get('name')!r} has no lowered module")
        lowered = load_lowered_module(text, load_nested or _load_nested)
        outputs = node_json.get("outputs", [])
        lowered.returns_sequence = not (len(outputs) == 1 and "as_tensor" in outputs[0])
        plan.lowered = [lowered, first.get("name") or f"lowered_module_{count}", count]

    weights = load_torch_artifact(state_dict, "state dict") or {}
    consts = load_torch_artifact(constants, "constants") or {}
    examples = load_torch_artifact(example_inputs, "example inputs")
    try:
        serialized = torch_serde._dict_to_dataclass(torch_schema.ExportedProgram, program)  # type: ignore[no-untyped-call]
        ranges = {
            k: ValueRanges(
                torch_serde._int_to_sympy_int(v.min_val, -int_oo),
                torch_serde._int_to_sympy_int(v.max_val, int_oo),
            )
            for k, v in serialized.range_constraints.items()
        }
        with _DESERIALIZE_LOCK:
            result = torch_serde.GraphModuleDeserializer().deserialize(
                serialized.graph_module, weights, consts, examples, ranges
            )
        range_constraints = torch_serde.ExportedProgramDeserializer().deserialize_range_constraints(
            ranges, result.names_to_symbols
        )
    except ProgramLoadError:
        raise
    except Exception as e:
        raise ProgramLoadError(f"program does not deserialize: {type(e).__name__}: {str(e)[:400]}") from e

    _finish_graph(result.graph_module, plans, names)
    if verifier is None:
        plain = all(p.kind == "op" and not p.serialized_target.startswith("executorch.") for p in plans)
        declared = [d for d in (serialized.verifiers or []) if d]
        verifier = load_verifier(declared[0]) if plain and declared and declared[0] != "EDGE" else NumdiffEdgeVerifier
    try:
        return torch.export.ExportedProgram(
            root=result.graph_module,
            graph=result.graph_module.graph,
            graph_signature=result.signature,
            state_dict=result.state_dict,
            range_constraints=range_constraints,
            module_call_graph=result.module_call_graph,
            example_inputs=result.example_inputs,
            constants=result.constants,
            verifiers=[verifier],
        )
    except Exception as e:
        raise ProgramLoadError(f"loaded program fails verification: {type(e).__name__}: {str(e)[:400]}") from e


def _load_nested(program: object, state_dict: bytes, constants: bytes, example_inputs: bytes) -> torch.export.ExportedProgram:
    """Load a delegate's original program (already parsed JSON) with torch's deserializer too."""
    if not isinstance(program, dict):
        raise ProgramLoadError("delegate's original program is not a JSON object")
    return load_program_with_torch(json.loads(json.dumps(program)), state_dict, constants, example_inputs)
