"""Load one ExecuTorch-serialized ``ExportedProgram`` (JSON + pickled tensors) without ExecuTorch.

ExecuTorch writes programs with its own copy of the torch.export serializer: an older schema
(major version 5), Edge operator names, ``debug_handle``/``from_node`` metadata, delegate calls
whose first argument is a JSON-encoded lowered module, and — after ``to_executorch`` —
out-variant operators fed by ``memory.alloc`` nodes. :func:`load_program`

0. checks the JSON with :func:`~numdiff.program.guard.guard_program` before anything
   resolves or generates code from it (allow-listed operators only, safe value names, no
   evaluable expressions, bounded subgraph depth),
1. builds the graph itself (:class:`~numdiff.program._builder.GraphBuilder`) and the
   program around it (:mod:`numdiff.program._build`), loading the pickled companions with
   ``torch.load(weights_only=True)`` only. This imports neither torch's export deserializer nor
   ``torch._dynamo`` and evaluates no type hints, so it costs milliseconds, not seconds;
2. only if the program holds a construct the builder does not know, falls back to torch's
   deserializer (:mod:`numdiff.program._loader_torch`) and logs that it did.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import torch
from torch._export.verifier import Verifier

from numdiff.program._delegate import LoweredModule, load_lowered_module
from numdiff.program.graph_args import Unsupported
from numdiff.program._builder import OP_TYPE_KEY, UNRUNNABLE_KEY, GraphBuilder
from numdiff.program.graph_meta import SUPPORTED_SCHEMA_MAJOR, ProgramLoadError, check_header
from numdiff.program.pickles import load_torch_artifact
from numdiff.program._build import (
    LoadedProgram,
    NumdiffEdgeVerifier,
    module_call_graph,
    signature,
)
from numdiff.program.node_names import derive_node_names
from numdiff.program.guard import ProgramNames, guard_program

__all__ = ["OP_TYPE_KEY", "SUPPORTED_SCHEMA_MAJOR", "UNRUNNABLE_KEY", "ProgramLoadError", "load_program"]

_log = logging.getLogger(__name__)
#: Set on a program numdiff built itself (``graph_module.meta``): a runnable module can be made without unlifting.
BUILT_KEY = "numdiff_built"


def load_program(
    program: dict[str, Any] | bytes,
    state_dict: bytes,
    constants: bytes,
    example_inputs: bytes,
) -> torch.export.ExportedProgram:
    """Build a runnable ``ExportedProgram`` from one serialized program and its companions.

    Args:
        program: The program JSON (bytes, or already parsed; parsed JSON is not modified).
        state_dict: ``torch.save`` bytes of the state dict.
        constants: ``torch.save`` bytes of the constants.
        example_inputs: ``torch.save`` bytes of the example inputs (may be empty).

    Returns:
        The loaded program; nodes carry ``debug_handle``, ``nn_module_stack``, ``from_node``,
        ``stack_trace``, ``numdiff_op_type`` (and ``numdiff_unrunnable`` on stand-ins).

    Raises:
        ProgramLoadError: The program or a companion cannot be read (no file/entry context yet).
    """
    if isinstance(program, bytes):
        try:
            program = json.loads(program.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProgramLoadError(f"program is not valid JSON: {e}") from e
        if isinstance(program, dict):
            derive_node_names(program)  # ExecuTorch 0.7 and torch 2.9 wrote nodes without names
    check_header(program)
    if not isinstance(program, dict):  # check_header guarantees it; this narrows the type
        raise ProgramLoadError("program JSON is not an object")
    names = guard_program(program)  # before anything resolves or generates code from the JSON
    weights = load_torch_artifact(state_dict, "state dict") or {}
    consts = load_torch_artifact(constants, "constants") or {}
    examples = load_torch_artifact(example_inputs, "example inputs")
    try:
        return _build(program, names, weights, consts, examples)
    except Unsupported as e:
        _log.warning(
            "numdiff's program builder does not handle %s; loading this program with torch's export "
            "deserializer instead (slower: it imports torch._dynamo)", e,
        )
    from numdiff.program._loader_torch import load_program_with_torch

    return load_program_with_torch(
        json.loads(json.dumps(program)), state_dict, constants, example_inputs, load_nested=_load_nested
    )


def _lowered(text: str) -> LoweredModule:
    return load_lowered_module(text, _load_nested)


def _build(program: dict[str, Any], names: ProgramNames, weights: object, consts: object,
           examples: object) -> torch.export.ExportedProgram:
    if not isinstance(weights, dict) or not isinstance(consts, dict):
        raise ProgramLoadError("the state dict or constants companion is not a dict")
    gm_json = program["graph_module"]
    try:
        graph_module = GraphBuilder(names, _lowered).build(gm_json.get("graph"))
        sig = signature(gm_json.get("signature") or {}, names)
        calls = module_call_graph(gm_json.get("module_call_graph"), names)
        raw_ranges = program.get("range_constraints") or {}
        if not isinstance(raw_ranges, dict) or not all(isinstance(v, dict) for v in raw_ranges.values()):
            raise ProgramLoadError("range_constraints is not a JSON object of {min_val, max_val} objects")
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        if isinstance(e, ProgramLoadError):
            raise
        raise ProgramLoadError(f"program is malformed: {type(e).__name__}: {str(e)[:300]}") from e
    graph_module.meta[BUILT_KEY] = True
    example = examples if isinstance(examples, tuple) and len(examples) == 2 else None
    try:
        loaded = LoadedProgram(
            root=graph_module,
            graph=graph_module.graph,
            graph_signature=sig,
            state_dict=weights,
            range_constraints={},
            module_call_graph=calls,
            example_inputs=example,
            constants=consts,
            verifiers=[_verifier(program, graph_module)],
        )
        loaded._numdiff_pending_ranges = dict(raw_ranges) if raw_ranges else None
        return loaded
    except Exception as e:
        raise ProgramLoadError(f"loaded program fails verification: {type(e).__name__}: {str(e)[:400]}") from e


def _verifier(program: dict[str, Any], graph_module: torch.fx.GraphModule) -> type[Verifier]:
    """torch's verifier class for a plain ATen/training program, else numdiff's Edge verifier."""
    from torch._export.verifier import load_verifier

    declared = [d for d in (program.get("verifiers") or []) if d]
    if not declared or declared[0] not in ("ATEN", "TRAINING"):
        return NumdiffEdgeVerifier
    for module in graph_module.modules():
        for node in module.graph.nodes if isinstance(module, torch.fx.GraphModule) else ():
            if node.op == "call_function" and not isinstance(
                node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)
            ) and node.target.__module__ in ("numdiff.program._delegate", "numdiff.program.graph_args"):
                return NumdiffEdgeVerifier
            if node.op == "get_attr" and isinstance(getattr(module, str(node.target), None), LoweredModule):
                return NumdiffEdgeVerifier
    return load_verifier(declared[0])


def _load_nested(program: object, state_dict: bytes, constants: bytes, example_inputs: bytes) -> torch.export.ExportedProgram:
    """Load a delegate's original program (already parsed JSON) with the same rules."""
    if not isinstance(program, dict):
        raise ProgramLoadError("delegate's original program is not a JSON object")
    return load_program(program, state_dict, constants, example_inputs)
