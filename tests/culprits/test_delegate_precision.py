"""The check that the runtime's delegates compute in the ETRecord's precision (culprits/_precision.py)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import torch

from numdiff.capture.nodes import DEBUG_HANDLE_KEY
from numdiff.culprits._precision import delegate_precision_mismatch

importlib.import_module("torch.ao.quantization.fx._decomposed")  # registers quantized_decomposed ops


def _graph() -> torch.fx.Graph:
    """conv2d (float, handle 1) then a linear on dequantized values (handle 2)."""
    g = torch.fx.Graph()
    x, w, q, s = g.placeholder("x"), g.placeholder("w"), g.placeholder("q"), g.placeholder("s")
    conv = g.call_function(torch.ops.aten.conv2d.default, (x, w))
    deq = g.call_function(torch.ops.quantized_decomposed.dequantize_per_tensor.default,
                          (q, s, 0, -128, 127, torch.int8))
    lin = g.call_function(torch.ops.aten.linear.default, (deq, w))
    conv.meta[DEBUG_HANDLE_KEY], deq.meta[DEBUG_HANDLE_KEY], lin.meta[DEBUG_HANDLE_KEY] = 1, 2, 2
    g.output((conv, lin))
    return g


def _event(name: str, iid: int, handles: object, delegated: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name=name, _instruction_id=iid, debug_handles=handles, is_delegated_op=delegated,
                           op_types=None if delegated or name == "DELEGATE_CALL" else [name],
                           delegate_backend_name="XnnpackBackend")


def _run(also_elsewhere: bool) -> list[SimpleNamespace]:
    # the delegate call carries handle 2 (e.g. the weight's transpose), but ran only a float convolution
    events = [_event("DELEGATE_CALL", 0, [1, 2]), _event("Convolution (NHWC, F32) IGEMM #1", 0, None, True)]
    if also_elsewhere:  # the linear itself ran in a portable kernel
        events.append(_event("native_call_addmm.out", 1, 2))
    return events


def test_a_handle_another_instruction_carries_too_says_nothing_of_the_call() -> None:
    assert delegate_precision_mismatch(_graph(), _run(also_elsewhere=True)) is None


def test_a_quantized_op_only_the_call_carries_must_run_quantized() -> None:
    said = delegate_precision_mismatch(_graph(), _run(also_elsewhere=False))
    assert said is not None and "computes in int8, quantized ahead of time and in floating point" in said \
        and "ran it in floating point (Convolution (NHWC, F32) IGEMM)" in said
