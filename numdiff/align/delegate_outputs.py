"""Which reference-graph value each output of a multi-output delegate call is.

A ``DELEGATE_CALL`` event carries the union of its partition's debug handles, and its debug data
holds the delegate's inputs followed by its outputs. The reference pairs the ``k``-th output from
the end with the ``k``-th handle id from the end, which is right only when the delegate's
outputs happen to be its highest handles. They are not in general: a partition's outputs are its
nodes whose value is used outside the partition, in graph order (the order the partitioner
gives the lowered module's outputs). This module recovers that order from a graph whose nodes
carry debug handles (the Edge graph, or the ATen graph whose handles were propagated from it).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from numdiff._core.events import DELEGATE_CALL
from numdiff._core.types import DebugHandle
from numdiff.align._records import RuntimeOutput

__all__ = ["DELEGATE_CALL", "delegate_output_ids", "partition_output_ids"]



def _handle_id(node: torch.fx.Node) -> int | None:
    handle = getattr(node, "meta", {}).get("debug_handle")
    if isinstance(handle, int) and not isinstance(handle, bool):
        return handle
    if isinstance(handle, tuple) and len(handle) == 1 and isinstance(handle[0], int):
        return handle[0]
    return None


def _outside(user: torch.fx.Node, members: set[int]) -> bool:
    """Whether ``user`` reads its input from outside the partition ``members`` (a ``getitem``
    unpacking a multi-output op is part of that op whatever handle it was given: its own users
    decide)."""
    if user.op == "call_function" and user.target is operator.getitem:
        return any(_outside(u, members) for u in user.users)
    return _handle_id(user) not in members


def partition_output_ids(graph_module: torch.fx.GraphModule, partitions: Iterable[DebugHandle]) -> dict[DebugHandle, tuple[int, ...]]:
    """For each partition (a set of handle ids), the handle id of each output, in output order.

    A partition's output is a node of the partition (its handle id is in the set) with at least
    one user outside it (another handle, no handle, or the graph's output). The ``getitem`` nodes
    that unpack a multi-output op (``choose_qparams``' scale and zero point) are not ops of their
    own: they belong to their op, so their users are looked at instead. Outputs are in graph
    order; consecutive outputs with the same handle id (one op lowered to several nodes) count
    once.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: ((x + 1) * 2, x - 1))
        >>> for handle, node in enumerate(n for n in gm.graph.nodes if n.op == "call_function"):
        ...     node.meta["debug_handle"] = handle
        >>> partition_output_ids(gm, [(0, 1, 2)])
        {(0, 1, 2): (1, 2)}
    """
    wanted = [tuple(p) for p in partitions]
    if not wanted:
        return {}
    ids_of: dict[int, list[DebugHandle]] = {}
    for partition in wanted:
        for member in set(partition):
            ids_of.setdefault(member, []).append(partition)
    outputs: dict[DebugHandle, list[int]] = {p: [] for p in wanted}
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        item = _handle_id(node)
        if item is None or item not in ids_of:
            continue
        for partition in ids_of[item]:
            members = set(partition)
            if any(_outside(user, members) for user in node.users):
                found = outputs[partition]
                if not found or found[-1] != item:
                    found.append(item)
    return {p: tuple(found) for p, found in outputs.items()}


def delegate_output_ids(
    graph_module: torch.fx.GraphModule, runtime_outputs: Mapping[DebugHandle, RuntimeOutput]
) -> dict[DebugHandle, tuple[int, ...]]:
    """``{runtime handle: output handle ids}`` for multi-output delegate calls whose outputs are known.

    Only delegate calls with more than one output are looked at; one is left out when the graph
    does not show exactly as many partition outputs as the runtime logged (then the order is
    unknown, and pairing says so).
    """
    delegates = [
        r.handle for r in runtime_outputs.values() if r.op_name == DELEGATE_CALL and r.num_outputs > 1
    ]
    found = partition_output_ids(graph_module, delegates)
    return {
        handle: ids for handle, ids in found.items() if len(ids) == runtime_outputs[handle].num_outputs
    }
