"""numdiff.culprits._input_fit: telling a slightly different graph input from a wrong op."""

from __future__ import annotations

import torch

from numdiff.culprits._input_fit import FitCase, fit_input
from numdiff.culprits._noise import DEFAULT_THRESHOLDS, Noise


def _case(weight: torch.Tensor, x: torch.Tensor, runtime: torch.Tensor) -> FitCase:
    return FitCase(torch.ops.aten.linear.default, (x, weight), {}, (0,), runtime,
                   Noise(reduction=weight.shape[1]), DEFAULT_THRESHOLDS)


def test_an_input_change_explains_a_tall_op_and_is_measured() -> None:
    torch.manual_seed(0)
    w, x = torch.randn(24, 8), torch.randn(3, 8)
    moved = x + 0.01 * x.pow(2).mean().sqrt() * torch.randn(3, 8)
    fit = fit_input(_case(w, x, torch.nn.functional.linear(moved, w)))
    assert fit is not None and fit.trusted and fit.explains(DEFAULT_THRESHOLDS, 0.3)
    assert 0.005 < fit.relative_change < 0.02 and fit.units < 1


def test_a_changed_weight_is_out_of_reach_of_any_input() -> None:
    torch.manual_seed(1)
    w, x = torch.randn(24, 8), torch.randn(3, 8)
    wrong = w + 0.003 * w.abs().mean() * torch.randn(24, 8)
    fit = fit_input(_case(w, x, torch.nn.functional.linear(x, wrong)))
    assert fit is not None and fit.trusted and not fit.explains(DEFAULT_THRESHOLDS, 0.3) and fit.units > 8


def test_an_op_to_fewer_values_tells_nothing() -> None:
    """A linear to fewer features reaches any output with some input: the fit explains a fault too,
    and says it cannot be trusted to tell."""
    torch.manual_seed(2)
    w, x = torch.randn(4, 8), torch.randn(3, 8)
    wrong = w + 0.05 * torch.randn(4, 8)
    fit = fit_input(_case(w, x, torch.nn.functional.linear(x, wrong)))
    assert fit is not None and not fit.trusted and fit.explains(DEFAULT_THRESHOLDS, 0.3)


def test_an_input_that_is_not_floating_point_is_not_fitted() -> None:
    case = FitCase(torch.ops.aten.embedding.default, (torch.randn(10, 4), torch.tensor([1, 2])), {}, (1,),
                   torch.randn(2, 4), Noise(), DEFAULT_THRESHOLDS)
    assert fit_input(case) is None
