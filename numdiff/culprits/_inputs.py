"""Which runtime tensor a graph input is, when the runtime logged one: a delegate call's own argument.

Portable kernels log their outputs only; a delegate call logs its inputs, then its outputs. So a
graph input (placeholder) has a runtime value only when a delegate consumes it, and then it is one
*position* of that delegate's logged inputs: the partition's external inputs, in the order the
partitioner collects them (nodes in graph order, each node's inputs in argument order). The value
of a graph input is that exact position, never another logged tensor of the same shape: a
portable op that logs several tensors (``native_layer_norm.out`` logs ``[out, mean, rstd]``) logs
no input at all. When the partition's inputs cannot be lined up with what the delegate logged
(another count: the call may also log scalar constants it takes), a graph input is the one logged
input of its exact shape and dtype when exactly one has them and no other input of the partition
has (or may have) them; otherwise the representative input is used and the note says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from numdiff._core.types import DebugHandle
from numdiff.align import RuntimeOutput
from numdiff.culprits._noise import op_type

__all__ = ["LoggedInput", "delegate_inputs", "is_delegate_call"]

#: The event name of a delegate call (its debug data is its inputs, then its outputs).
_DELEGATE_EVENT = "DELEGATE_CALL"


@dataclass(frozen=True, slots=True)
class LoggedInput:
    """The runtime's value of one graph input.

    Attributes:
        value: The tensor the runtime passed (one argument of a delegate call).
        source: Where it was logged, for notes (``"argument 0 of the delegate call logged under
            handle (1, 2, 3)"``).
    """

    value: object
    source: str


def is_delegate_call(output: RuntimeOutput, names: Mapping[DebugHandle, list[str]]) -> bool:
    """Whether ``output`` was logged by a delegate call (whose data holds its inputs first)."""
    return output.op_name == _DELEGATE_EVENT or _DELEGATE_EVENT in names.get(output.handle, ())


def _partition(graph: torch.fx.Graph, ids: frozenset[int]) -> list[torch.fx.Node]:
    """The call nodes of ``graph`` whose debug handles lie inside ``ids`` (one delegate), in order."""
    from numdiff.capture import handle_key
    from numdiff.capture.nodes import DEBUG_HANDLE_KEY

    inside: list[torch.fx.Node] = []
    members: set[str] = set()
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        handle = node.meta.get(DEBUG_HANDLE_KEY)
        if handle is not None and set(handle_key(handle)) <= ids:
            inside.append(node)
            members.add(node.name)
        elif handle is None and node.all_input_nodes and all(a.name in members for a in node.all_input_nodes):
            inside.append(node)  # getitem and other handle-less nodes fed only by the partition
            members.add(node.name)
    return inside


def _external_inputs(partition: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """The partition's inputs from outside it, first use first (constants excluded: a delegate owns them)."""
    members = {n.name for n in partition}
    out: dict[str, torch.fx.Node] = {}
    for node in partition:
        for arg in node.all_input_nodes:
            if arg.name not in members and arg.op != "get_attr":
                out.setdefault(arg.name, arg)
    return list(out.values())


def _by_shape_and_dtype(placeholders: list[torch.fx.Node], externals: list[torch.fx.Node],
                        logged: object) -> dict[torch.fx.Node, int]:
    """Each graph input that exactly one logged input matches in shape and dtype, when no other input
    of the partition has them (or may have them: one of unknown shape): its position."""
    def spec(value: object) -> tuple[tuple[int, ...], torch.dtype] | None:
        if isinstance(value, torch.Tensor):
            try:
                return tuple(int(d) for d in value.shape), value.dtype
            except TypeError:  # a symbolic size
                return None
        return None

    def qparams(node: torch.fx.Node) -> bool:  # a scale or zero point computed at run time: one per tensor or row
        source = node.args[0] if node.args else None
        return isinstance(source, torch.fx.Node) and op_type(source.target).startswith("choose_qparams")

    values = list(logged) if isinstance(logged, (list, tuple)) else []
    specs = {n: spec(n.meta.get("val")) for n in externals}
    if any(v is None and not qparams(n) for n, v in specs.items()):
        return {}
    out: dict[torch.fx.Node, int] = {}
    for node in placeholders:
        want = specs[node]
        if want is None or sum(w == want for w in specs.values()) != 1:
            continue
        positions = [i for i, v in enumerate(values) if spec(v) == want]
        if len(positions) == 1:
            out[node] = positions[0]
    return out


def delegate_inputs(graph: torch.fx.Graph, runtime_outputs: Mapping[DebugHandle, RuntimeOutput],
                    names: Mapping[DebugHandle, list[str]]) -> tuple[dict[str, LoggedInput], list[str]]:
    """``({graph input: its logged value}, notes)`` from every delegate call that consumes a graph input.

    The first delegate (execution order) that takes a graph input gives its value. A delegate whose
    partition has another number of external inputs than it logged gives none (noted).
    """
    found: dict[str, LoggedInput] = {}
    notes: list[str] = []
    for handle, output in runtime_outputs.items():
        data = output.data
        if not is_delegate_call(output, names) or not isinstance(data, (list, tuple)):
            continue
        count = len(data) - output.num_outputs
        if count <= 0:
            continue
        externals = _external_inputs(_partition(graph, frozenset(handle)))
        placeholders = [n for n in externals if n.op == "placeholder"]
        if not placeholders:
            continue
        if len(externals) != count:
            matched = _by_shape_and_dtype(placeholders, externals, data[:count])
            for node, position in matched.items():
                if node.name not in found:
                    found[node.name] = LoggedInput(
                        data[position], f"argument {position} of the delegate call logged under handle {handle} "
                        f"(the only logged input of its shape and dtype; the call logged {count} inputs, its "
                        f"partition reads {len(externals)})")
            rest = [n.name for n in placeholders if n not in matched]
            if rest:
                notes.append(f"the delegate call logged under handle {handle} logged {count} input(s) but its "
                             f"partition reads {len(externals)} ({', '.join(n.name for n in externals)}): graph "
                             f"input(s) {', '.join(rest)} taken from the representative inputs")
            continue
        for position, node in enumerate(externals):
            if node.op == "placeholder" and node.name not in found:
                found[node.name] = LoggedInput(
                    data[position], f"argument {position} of the delegate call logged under handle {handle}")
    return found, notes
