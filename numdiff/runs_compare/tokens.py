"""Decode runs read as tokens: per step, the argmax of the logits against the base run's and the reference's.

The runs of each ETDump are the steps of one generation (``find_culprits``' decode view). The logits
are the value of the op that makes the program's first output. Per step: the run's token and its
margin (top logit minus the runner-up), the base run's token, and, when the run's step inputs are
given, the reference graph run from the start on those same inputs: its token, the top-k agreement
and the KL divergence of the run's logits from it. The first step whose token differs from the
base's is set beside the first step whose tensors part from the base's (any op beyond the tolerance)
and the first step where the run departs from the reference (an op beyond its own noise).
"""

from __future__ import annotations

import math

import torch

from numdiff.comparators import NumericalComparatorBase, kl_divergence, topk_agreement
from numdiff.culprits import CulpritReport, CulpritRow
from numdiff.runs_compare.ops import compare_step
from numdiff.runs_compare.records import OpComparison, TokenStep, TokenView
from numdiff.runs_compare.values import LoadedRun, row_value

__all__ = ["argmax_margin", "token_view"]


def argmax_margin(logits: torch.Tensor) -> tuple[int, float]:
    """The argmax of the last position's logits and its margin over the runner-up (NaN with one class).

    Example:
        >>> argmax_margin(torch.tensor([[0.5, 2.0, 1.5]]))
        (1, 0.5)
    """
    row = logits.detach().to(torch.float64).reshape(-1, logits.shape[-1] if logits.dim() else 1)[-1]
    if row.numel() < 2:
        return int(row.argmax()) if row.numel() else -1, math.nan
    top = torch.topk(row, 2)
    return int(top.indices[0]), float(top.values[0] - top.values[1])


def _reference_logits(graph_module: torch.fx.GraphModule, row: CulpritRow,
                      step_input: tuple[object, ...]) -> torch.Tensor | None:
    """The reference graph run from the start on one step's inputs: the value of the logits' node."""
    from numdiff.capture import capture_intermediate_outputs

    found: list[torch.Tensor] = []

    def keep(handle: object, node: torch.fx.Node, value: object) -> None:
        if node.name != row.node:
            return
        if isinstance(value, (list, tuple)):
            value = value[row.element or 0]
        if isinstance(value, torch.Tensor):
            found.append(value.detach().clone())

    capture_intermediate_outputs(graph_module, [[tuple(step_input)]], on_output=keep)
    return found[0] if found else None


def _step_report(run: LoadedRun, step: int) -> CulpritReport | None:
    if run.report is None:
        return None
    if run.report.decode is None:
        return run.report if step == 0 else None
    per_step = run.report.decode.per_step
    return per_step[step] if step < len(per_step) else None


def token_view(base: LoadedRun, run: LoadedRun, comparator: NumericalComparatorBase, tolerance: float | None,
               graph_module: torch.fx.GraphModule | None, output_row: int | None,
               k: int) -> tuple[TokenView | None, tuple[OpComparison, ...], int | None]:
    """The run's :class:`TokenView`, and the ops of the first step whose tensors part from the base's (and that step).

    ``graph_module`` is the reference graph, run on the run's step inputs when it has them.
    """
    from numdiff.culprits.decode import load_step_inputs

    if run.report is None or base.report is None or output_row is None:
        return None, (), None
    inputs = None if run.files.step_inputs is None else load_step_inputs(run.files.step_inputs)
    steps: list[TokenStep] = []
    first_ops: tuple[OpComparison, ...] = ()
    first_step: int | None = None
    for step in range(min(base.runs, run.runs)):
        base_rep, run_rep = _step_report(base, step), _step_report(run, step)
        if base_rep is None or run_rep is None or output_row >= len(run_rep.rows):
            break
        base_values, run_values = base.values(step), run.values(step)
        ops = compare_step(base_rep, run_rep, base_values, run_values, comparator, tolerance)
        diverge = any(op.verdict.beyond_noise for op in ops)
        if diverge and first_step is None:
            first_step, first_ops = step, ops
        logits = row_value(run_values, run_rep.rows[output_row])
        base_logits = row_value(base_values, base_rep.rows[output_row])
        if logits is None:
            break
        token, margin = argmax_margin(logits)
        base_token = None if base_logits is None else argmax_margin(base_logits)[0]
        ref_token, agree, kl = None, math.nan, math.nan
        if graph_module is not None and inputs is not None and step < len(inputs):
            ref = _reference_logits(graph_module, run_rep.rows[output_row], inputs[step])
            if ref is not None and ref.shape == logits.shape:
                ref_token = argmax_margin(ref)[0]
                agree, kl = topk_agreement(ref, logits, k), kl_divergence(ref, logits)
        steps.append(TokenStep(step, token, margin, ref_token, agree, kl, base_token, diverge))
    decode = run.report.decode
    departs = None if decode is None or decode.first_divergent_step is None else decode.first_divergent_step.step
    view = TokenView(tuple(steps),
                     next((s.step for s in steps if s.base_token is not None and s.token != s.base_token), None),
                     next((s.step for s in steps if s.tensors_diverge), None), departs,
                     next((s.step for s in steps if s.reference_token is not None and s.token != s.reference_token),
                          None), k)
    return view, first_ops, first_step
