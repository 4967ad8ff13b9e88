"""Do the runtime's delegates compute in the precision the ETRecord says?

A delegate call's ops with weights (convolutions, linears) are quantized in the ETRecord when one
of their tensor inputs comes from a ``dequantize``; XNNPACK names the operators it ran in its
profiling events, with their data types: ``Convolution (NHWC, QS8) IGEMM``, ``Fully Connected (NC,
QDU8, F32, QC8W) GEMM`` (quantized: a type tag that starts with ``Q``) or ``Convolution (NHWC, F32)
IGEMM`` (floating point). A run of a quantized program read with the ETRecord of the float one (or
the other way round: the ETRecord kept from before quantizing) pairs by instruction and debug
handle as well as the right one does, and its values differ by about the quantization noise: a
confident false culprit at every delegate. The operator names tell the two programs apart, and static (``QS8``) from dynamic (``QDU8``: activations quantized at run time) quantization.

Only calls with both sides known are checked: a delegate whose runtime logged no compute operator
with type tags (no profiling events, another backend's names) or whose ETRecord side holds no
compute op says nothing. A compute op counts for a call only when no other instruction carries its
debug handle: a handle whose nodes were split between instructions (the partitioner took a
weight's transpose into one delegate, the matmul ran in another or in a portable kernel) says
which op the call holds a part of, not that the call computes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import torch

from numdiff.align import EventLike
from numdiff.culprits._noise import op_type
from numdiff.capture import handle_key
from numdiff.capture.nodes import DEBUG_HANDLE_KEY

__all__ = ["delegate_precision_mismatch"]

#: XNNPACK operators with weights, whose data types follow the graph's quantization (a product of
#: two activations, ``Batch Matrix Multiply``, runs in float even between dequantizes).
_RUNTIME_COMPUTE = ("Convolution", "Deconvolution", "Fully Connected")
#: The graph's ops with weights (as :data:`_RUNTIME_COMPUTE`).
_WEIGHTED = frozenset({"conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
                       "linear", "addmm"})
#: ``Convolution (NHWC, QS8) IGEMM #2`` -> ``Convolution``, ``NHWC, QS8``.
_NAME = re.compile(r"^(?P<op>[A-Za-z][A-Za-z ]*?) \((?P<tags>[^()]*)\)")
_DEQUANTIZE = frozenset({"dequantize_per_tensor", "dequantize_per_channel", "dequantize_per_token",
                         "dequantize_per_channel_group", "dequantize_affine"})


def _runtime_precision(names: Iterable[str]) -> set[str]:
    """What the compute operators among ``names`` ran in: a subset of :data:`_KINDS`."""
    seen: set[str] = set()
    for name in names:
        m = _NAME.match(name)
        if m is None or m.group("op") not in _RUNTIME_COMPUTE:
            continue
        tags = [t.strip() for t in m.group("tags").split(",")]
        if any(t in ("QD8", "QDU8") for t in tags):  # activations quantized at run time
            seen.add("dynamic")
        elif any(t.startswith("Q") for t in tags):
            seen.add("static")
        elif any(t in ("F32", "F16", "BF16") for t in tags):
            seen.add("float")
    return seen


def _graph_precision(inside: Sequence[torch.fx.Node], shared: frozenset[int] = frozenset()) -> set[str]:
    """What the ETRecord's compute ops among a delegate's nodes compute in (a subset of
    :data:`_KINDS`): quantized when a tensor input comes from a dequantize, dynamically when the
    delegate chooses its quantization parameters at run time (a ``choose_qparams`` among its
    nodes), float otherwise. Compute ops with a debug handle in ``shared`` (carried by another
    instruction too) are left out."""
    dynamic = any(op_type(n.target).startswith("choose_qparams") for n in inside)
    seen: set[str] = set()
    for n in inside:
        if op_type(n.target) not in _WEIGHTED or not shared.isdisjoint(handle_key(n.meta[DEBUG_HANDLE_KEY])):
            continue
        sources = [a for a in n.args if isinstance(a, torch.fx.Node)]
        quantized = any(op_type(a.target) in _DEQUANTIZE for a in sources)
        seen.add(("dynamic" if dynamic else "static") if quantized else "float")
    return seen


#: How a compute op computes: on values quantized ahead of time, at run time, or in floating point.
_KINDS = ("static", "dynamic", "float")
_SAID = {"static": "in int8, quantized ahead of time", "dynamic": "in int8, quantized at run time",
         "float": "in floating point"}


def delegate_precision_mismatch(graph: torch.fx.Graph, events: Sequence[EventLike]) -> str | None:
    """Why the delegates' logged operators cannot come from the program the ETRecord describes, or None.

    Each delegate call is compared with the reference graph's nodes that carry its debug handles
    (whatever the pairing made of its outputs). A call is a mismatch when the ETRecord's compute
    ops are quantized (ahead of time or at run time) and the runtime ran none quantized that way,
    or all float and the runtime ran some quantized. One such call suffices: XNNPACK does not run a
    quantized convolution for a float graph, a float one for a quantized graph, nor a dynamically
    quantized one for a static graph. A compute op whose handle another instruction (a delegate
    call or a portable op) carries too is not counted for the call: the call may hold only part of
    that handle's nodes.
    """
    by_handle: dict[int, list[torch.fx.Node]] = {}
    for n in graph.nodes:
        if n.op == "call_function" and DEBUG_HANDLE_KEY in n.meta:
            for h in handle_key(n.meta[DEBUG_HANDLE_KEY]):
                by_handle.setdefault(h, []).append(n)
    internal: dict[int, list[str]] = {}
    calls: dict[int, tuple[str, frozenset[int]]] = {}
    for ev in events:
        iid = ev._instruction_id
        if not isinstance(iid, int):
            continue
        if ev.is_delegated_op:
            internal.setdefault(iid, []).append(ev.name)
        elif ev.name == "DELEGATE_CALL" and ev.debug_handles is not None:
            hs = ev.debug_handles
            calls.setdefault(iid, (ev.delegate_backend_name or "delegate",
                                   frozenset([hs] if isinstance(hs, int) else hs)))
    carriers: dict[int, set[int]] = {}  # debug handle id -> the instructions carrying it
    for ev in events:
        iid, carried = ev._instruction_id, ev.debug_handles
        if isinstance(iid, int) and carried is not None and not ev.is_delegated_op and (ev.op_types or iid in calls):
            for h in [carried] if isinstance(carried, int) else carried:
                carriers.setdefault(h, set()).add(iid)
    counts: dict[str, int] = {}
    for iid, (backend, handles) in sorted(calls.items()):
        counts[backend] = counts.get(backend, 0) + 1
        inside = list(dict.fromkeys(n for h in sorted(handles) for n in by_handle.get(h, ())))
        shared = frozenset(h for h in handles if carriers.get(h, {iid}) != {iid})
        ran, graph_side = _runtime_precision(internal.get(iid, ())), _graph_precision(inside, shared)
        if not ran or not graph_side:
            continue
        quant_graph, quant_ran = graph_side - {"float"}, ran - {"float"}
        if (quant_graph and not quant_graph & quant_ran) or (not quant_graph and quant_ran):
            said = " and ".join(_SAID[k] for k in _KINDS if k in graph_side)
            ran_said = " and ".join(_SAID[k] for k in _KINDS if k in ran)
            return (f"the ETRecord's delegate {backend} #{counts[backend]} computes {said}, but the runtime ran it "
                    f"{ran_said} ({_operators(internal[iid])}): the ETRecord describes another program than the one "
                    "that ran (e.g. the float model's, or one quantized another way)")
    return None


def _operators(names: Sequence[str]) -> str:
    """The distinct compute operator names (without their ``#n``), at most three."""
    shown = list(dict.fromkeys(re.sub(r" #\d+$", "", n) for n in names
                               if (m := _NAME.match(n)) is not None and m.group("op") in _RUNTIME_COMPUTE))
    return ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
