"""Could a slightly different graph input explain an op's disagreement with its replay?

The runtime does not log graph inputs, so the one op that reads an input is replayed on the
ETRecord's representative value. When it disagrees with the runtime, either the op computed
something else or the run's input differed. The two can be told apart when the op maps few inputs
to many outputs (a convolution from 3 channels to 16, a linear from 8 features to 32): an input
change moves the output only inside the op's range, a fault (a changed weight or bias) moves it
anywhere. :func:`fit_input` finds the input change that best explains the runtime's output (least
squares on the op linearised at the representative input, by conjugate gradients on its normal
equations, in float64) and measures what remains in the row's own noise units.

Only an op with at least twice as many outputs as inputs, and a solve that converged, is told
apart (an element-wise op, a normalisation or a linear to fewer features can explain any output,
a fault included):

* Explained (what remains is within the row's noise, and the input change is related to the
  input): the run most likely read another input; the op is not judged.
* Not explained: no input near the representative one gives this output, so the verdict no longer
  rests on the input being the representative one.
* Otherwise the verdict stands on the representative input, and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from numdiff.culprits._measure import noise_units
from numdiff.culprits._noise import Noise, Thresholds

__all__ = ["FitCase", "InputFit", "fit_input"]

#: Conjugate-gradient steps; the normal equations' residual must fall by this factor to call it converged.
_STEPS = 40
_CONVERGED = 1e-6
#: Outputs per input above which "no input explains it" is believed.
_TALL = 2.0


@dataclass(frozen=True)
class FitCase:
    """One row that reads a representative graph input: its op and the values it was replayed on."""

    op: Callable[..., Any]
    args: tuple[object, ...]
    kwargs: dict[str, object]
    positions: tuple[int, ...]
    """Which of ``args`` are the representative graph inputs."""
    runtime: torch.Tensor
    noise: Noise
    limits: Thresholds


@dataclass(frozen=True)
class InputFit:
    """What the best-fitting input leaves: noise units of the remaining error, and the input change."""

    units: float
    relative_change: float
    trusted: bool
    """Whether the fit tells a changed input from a fault: an op with at least twice as many outputs
    as inputs (a fault moves its output out of reach of any input) and a solve that converged."""

    def explains(self, limits: Thresholds, related: float) -> bool:
        return not limits.verdict(self.units).beyond_noise and self.relative_change <= related


def fit_input(case: FitCase) -> InputFit | None:
    """The least-squares input change and what it leaves (None when the op cannot be differentiated
    in float64 or its output is not one floating-point tensor)."""
    inputs = [a for a in (case.args[p] for p in case.positions) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if len(inputs) != len(case.positions):
        return None
    if not case.runtime.is_floating_point():
        return None

    def wide(value: object) -> object:
        return value.detach().double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value

    base_args = [wide(a) for a in case.args]
    kwargs = {k: wide(v) for k, v in case.kwargs.items()}

    def op(*xs: torch.Tensor) -> torch.Tensor:
        args = list(base_args)
        for p, x in zip(case.positions, xs):
            args[p] = x
        out = case.op(*args, **kwargs)
        if not isinstance(out, torch.Tensor):
            raise TypeError("not one tensor")
        return out

    x0 = tuple(x.detach().double() for x in inputs)
    try:
        with torch.no_grad():
            y0 = op(*x0)
        target = case.runtime.detach().double().reshape(y0.shape)
        delta, converged = _least_squares(op, x0, target - y0)
        with torch.no_grad():
            fitted = op(*(x + d for x, d in zip(x0, delta)))
    except (RuntimeError, TypeError, ValueError):
        return None
    units, _, _, _ = noise_units(fitted.to(case.runtime.dtype), case.runtime, case.noise)
    size = math.sqrt(sum(float(x.pow(2).sum()) for x in x0))
    change = math.sqrt(sum(float(d.pow(2).sum()) for d in delta))
    tall = y0.numel() >= _TALL * sum(x.numel() for x in x0)
    return InputFit(units, change / size if size else math.inf, tall and converged)


def _least_squares(op: Callable[..., torch.Tensor], x0: tuple[torch.Tensor, ...],
                   residual: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], bool]:
    """``argmin_d |J d - residual|`` for ``J`` the Jacobian of ``op`` at ``x0`` (CG on ``JᵀJ d = Jᵀr``).

    ``Jᵀu`` is reverse-mode autograd; ``J d`` a central difference in float64 (exact for a linear op,
    second order otherwise): forward-mode AD would load torch's scripted decompositions."""
    leaves = tuple(x.detach().requires_grad_(True) for x in x0)
    with torch.enable_grad():
        out = op(*leaves)

    def pullback(u: torch.Tensor) -> tuple[torch.Tensor, ...]:
        grads = torch.autograd.grad(out, leaves, grad_outputs=u, retain_graph=True, allow_unused=True)
        return tuple(torch.zeros_like(x) if g is None else g for g, x in zip(grads, x0))

    scale = math.sqrt(sum(float(x.pow(2).sum()) for x in x0)) or 1.0

    def forward(d: Sequence[torch.Tensor]) -> torch.Tensor:
        size = math.sqrt(sum(float(a.pow(2).sum()) for a in d)) or 1.0
        eps = 1e-6 * scale / size
        with torch.no_grad():
            ahead = op(*(x + eps * a for x, a in zip(x0, d)))
            behind = op(*(x - eps * a for x, a in zip(x0, d)))
        return (ahead - behind) / (2 * eps)

    def normal(d: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return pullback(forward(d))

    rhs = pullback(residual)
    d = tuple(torch.zeros_like(x) for x in x0)
    r = rhs
    p = r
    rr = sum(float((a * a).sum()) for a in r)
    start = rr
    if start == 0:
        return d, True
    for _ in range(_STEPS):
        q = normal(p)
        pq = sum(float((a * b).sum()) for a, b in zip(p, q))
        if pq <= 0:
            break
        alpha = rr / pq
        d = tuple(a + alpha * b for a, b in zip(d, p))
        r = tuple(a - alpha * b for a, b in zip(r, q))
        new = sum(float((a * a).sum()) for a in r)
        if new <= _CONVERGED**2 * start:
            return d, True
        p = tuple(a + (new / rr) * b for a, b in zip(r, p))
        rr = new
    return d, rr <= _CONVERGED**2 * start
