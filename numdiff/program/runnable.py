"""A runnable ``GraphModule`` from a program numdiff loaded, without ``ExportedProgram.module()``.

``ExportedProgram.module()`` imports ``torch._dynamo`` (seconds) to build input guards, and the
numerical gap only needs to *run* the graph. For a program whose signature lifts only parameters,
buffers and constants and returns only user outputs — every program ExecuTorch writes for
inference — :func:`runnable_module` copies the graph, turns the lifted inputs into attributes of
the module and keeps node names, targets and metadata (so debug handles written onto the
program's nodes are on the copy too) and drops ``getitem`` nodes nothing reads, as ``module()`` does. The module takes the user inputs flat, in any nesting the
ETRecord stores them (``[(x, y)]``), and returns the user outputs as a tuple. Anything else
returns ``None``; the caller then uses ``module()``.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch.export import graph_signature as gs

from numdiff.program._builder import lazy_graph_module

__all__ = ["runnable_module"]

_LIFTED = (gs.InputKind.PARAMETER, gs.InputKind.BUFFER, gs.InputKind.CONSTANT_TENSOR)


def runnable_module(program: torch.export.ExportedProgram) -> torch.fx.GraphModule | None:
    """The program as a module with its weights attached, or ``None`` when its signature needs ``module()``."""
    sig = program.graph_signature
    if any(s.kind not in (*_LIFTED, gs.InputKind.USER_INPUT) for s in sig.input_specs):
        return None
    if any(s.kind != gs.OutputKind.USER_OUTPUT for s in sig.output_specs):
        return None
    lifted = {s.arg.name: s.target for s in sig.input_specs if s.kind in _LIFTED}
    source = program.graph_module
    root, graph = torch.nn.Module(), torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    count = 0
    for node in source.graph.nodes:
        if node.op == "placeholder" and node.name in lifted:
            target = lifted[node.name]
            value = program.state_dict.get(target) if target in program.state_dict else program.constants.get(target)
            if not isinstance(value, torch.Tensor):
                return None
            attr = f"_lifted_{count}"
            count += 1
            root.register_buffer(attr, value.detach() if isinstance(value, torch.nn.Parameter) else value, persistent=False)
            new = graph.create_node("get_attr", attr, name=node.name)
            new.meta = dict(node.meta)
        elif node.op == "placeholder":
            new = graph.placeholder(node.name)
            new.meta = dict(node.meta)
        elif node.op == "output":
            results = node.args[0]
            items = results if isinstance(results, (tuple, list)) else (results,)
            graph.output(tuple(env[n] if isinstance(n, torch.fx.Node) else n for n in items))
            continue
        else:
            if node.op == "get_attr" and not hasattr(root, str(node.target)):
                root.add_module(str(node.target), getattr(source, str(node.target)))
            new = graph.node_copy(node, lambda n: env[n])
        env[node] = new
    for node in reversed(list(graph.nodes)):  # as module() does: no getitem for an output nothing reads
        if node.op == "call_function" and node.target is operator.getitem and not node.users:
            graph.erase_node(node)
    # (CodeGen.__init__ and Graph.lint are untyped in torch 2.9's stubs, typed in 2.13's)
    graph.set_codegen(_FlatInputs())  # type: ignore[no-untyped-call, unused-ignore]
    graph.lint()  # type: ignore[no-untyped-call, unused-ignore]
    return lazy_graph_module(root, graph)


class _FlatInputs(torch.fx.graph.CodeGen):
    """Inputs arrive nested as the ETRecord stores them (``[(x, y)]``); the graph takes the leaves."""

    # The base returns ``Any`` in torch 2.13's stubs but ``tuple[*Ts]`` (the arguments, unchanged) in
    # 2.15's, which a flattening override cannot honestly return; ``Any`` is a valid override of both.
    def process_inputs(self, *args: object) -> Any:
        from torch.utils import _pytree

        return list(_pytree.tree_leaves(args))
