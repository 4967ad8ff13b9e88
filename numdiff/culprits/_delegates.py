"""Name a delegate row after what it computes: backend, call index and the compute ops inside.

A delegate call is logged as one runtime output, so its row's node is the partition's last node,
often a ``dequantize`` or a layout op that tells the user nothing. The row's ``delegate`` names
the backend and which of its calls this is (``XnnpackBackend #2``, in execution order), then the
convolutions, matmuls and linears it contains with their module paths and source lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from numdiff._core.names import COMPUTE_OPS
from numdiff._core.stack import user_frame
from numdiff.align import EventLike
from numdiff.culprits._noise import op_type

__all__ = ["COMPUTE_OPS", "XNNPACK", "compute_nodes", "delegate_calls", "delegate_location", "describe_delegate"]

#: XNNPACK's backend name, as the ETDump names its delegate calls.
XNNPACK = "XnnpackBackend"


def delegate_calls(events: Sequence[EventLike]) -> dict[frozenset[int], tuple[str, int]]:
    """``{handle ids: (backend, 1-based call index of that backend)}`` for every delegate call, in order.

    A call is also found under its handle without the ids an earlier call holds (the handle the
    culprit finder pairs it under: :func:`numdiff.align.own_delegate_ids`).
    """
    from numdiff.align import own_delegate_ids

    events = list(events)
    own = own_delegate_ids(events)
    out: dict[frozenset[int], tuple[str, int]] = {}
    counts: dict[str, int] = {}
    for ev in events:
        handles = ev.debug_handles
        if ev.name != "DELEGATE_CALL" or handles is None:
            continue
        handle = (handles,) if isinstance(handles, int) else tuple(handles)
        key = frozenset(handle)
        if key in out:
            continue
        backend = ev.delegate_backend_name or "delegate"
        counts[backend] = counts.get(backend, 0) + 1
        out[key] = (backend, counts[backend])
        if handle in own:
            out.setdefault(frozenset(own[handle]), out[key])
    return out


def compute_nodes(node: torch.fx.Node, replayed: Sequence[str]) -> list[torch.fx.Node]:
    """The convolutions, matmuls and linears among ``node`` and the nodes replayed with it, in graph order."""
    members = set(replayed) | {node.name}
    return [n for n in node.graph.nodes if n.name in members and op_type(n.target) in COMPUTE_OPS]


def delegate_location(node: torch.fx.Node, replayed: Sequence[str], module_paths: Mapping[str, str],
                      traces: Mapping[str, str | None]) -> tuple[str | None, str | None]:
    """``(module path, source line)`` for a delegate row: its compute ops' modules (comma-separated,
    in graph order), and the source line when there is one compute op. The partition's last node
    (often a ``dequantize`` whose module is the model's root) would name nothing the user can act on;
    ``(None, None)`` when the delegate holds no compute op."""
    compute = compute_nodes(node, replayed)
    paths = list(dict.fromkeys(p for p in (module_paths.get(n.name) for n in compute) if p))
    line = user_frame(traces.get(compute[0].name)) if len(compute) == 1 else None
    return (", ".join(paths) or None), line


def describe_delegate(backend: str, index: int, node: torch.fx.Node, replayed: Sequence[str],
                      module_paths: Mapping[str, str], traces: Mapping[str, str | None]) -> str:
    """``"XnnpackBackend #2: conv2d_1 (features.conv1, model.py:12 forward: ...)"``."""
    compute = compute_nodes(node, replayed)
    parts = []
    for n in compute:
        where = [w for w in (module_paths.get(n.name), user_frame(traces.get(n.name))) if w]
        parts.append(n.name + (f" ({', '.join(where)})" if where else ""))
    return f"{backend} #{index}: " + ("; ".join(parts) if parts else "no convolution, matmul or linear inside")
