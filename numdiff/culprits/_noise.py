"""How much error an op may show before it is wrong: noise models and verdicts.

A row's *local error* (replay on the runtime's inputs vs the runtime's output) is measured in
**noise units**: ``rms(error / sigma)`` where ``sigma`` is the error an honest kernel may make:

* **quantized values** (the output of a quantize op, an integer tensor: one step is 1; the output
  of a dequantize op: its scale, per tensor or per channel): ``sigma_q = step / sqrt(12)``, the
  standard deviation of rounding to the grid;
* **floating-point values**: ``sigma_f = eps(dtype) * sqrt(K) * max|replay|``, where ``K`` is the
  op's reduction length (inner dimension of a matmul, ``C_in/groups * kernel`` of a convolution,
  the reduced size of a softmax, norm, mean or sum; 1 for element-wise ops) summed over the nodes
  the row replays (a whole delegate, or nodes sharing a debug handle);
* both combine as ``sqrt(sigma_q**2 + sigma_f**2)``;
* dynamic quantization adds what the replay cannot reproduce: inside an XNNPACK delegate (replayed on
  XNNPACK's own grid) the bound of a one-step flip, element by element where one can show
  (``Noise.bound``); elsewhere (the graph's per-tensor grid) the rounding it carries, on every
  element (``Noise.carried``);
* a static requantization one of XNNPACK's own int8 kernels computes in fixed point (an int8 add or
  mean, see :func:`numdiff.culprits._xnnpack.fixed_point_rounding`) adds the same per-element bound
  for the elements it computed within float error of a tie (``Noise.bound``).

The verdict compares the noise units with :class:`Thresholds` (documented defaults, overridable
per op type): ``ok`` (at most ``ok``), ``expected-noise`` (at most ``expected``), ``suspicious``
(at most ``broken``), ``broken`` (above). A runtime output with NaN/Inf where the replay has none
is ``broken``. An undelegated row ending in one rounding is also ``suspicious`` when elements land a
step off far from any rounding tie (:mod:`numdiff.culprits._rounding`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import SupportsInt, cast

import torch

from numdiff.culprits._rounding import TieMargin
from numdiff.errors import UsageError

__all__ = ["COPYING_OPS", "DEFAULT_BACKEND_THRESHOLDS", "DEFAULT_QUANTIZED_THRESHOLDS", "DEFAULT_THRESHOLDS", "Noise", "Thresholds", "Verdict", "op_type", "reduction_length", "resolve_thresholds", "widest_float"]


class Verdict(str, Enum):
    """What a row's local error says about the op."""

    OK = "ok"
    """At most ``Thresholds.ok`` noise units (bit-exact rows are 0)."""
    EXPECTED_NOISE = "expected-noise"
    """Beyond ``ok`` but within what rounding and kernel differences explain."""
    SUSPICIOUS = "suspicious"
    """Beyond expected noise: the op computes something measurably different."""
    BROKEN = "broken"
    """Far beyond noise, or NaN/Inf the replay does not have."""
    UNMATCHED = "unmatched"
    """The two sides cannot be compared (see the row's note)."""
    NOT_JUDGED = "not-judged"
    """The op reads a graph input the runtime did not log, in a run whose inputs are unknown (a
    decode step after the first without ``step_inputs``): no claim either way."""
    REPLAY_MISMATCH = "replay-mismatch"
    """The replay disagrees with the runtime beyond noise while the runtime matches the reference run
    from the start: the replay's inputs are not what the runtime computed from, so nothing is said
    about the op (never a culprit; see the row's note and ``input_sources``)."""

    @property
    def beyond_noise(self) -> bool:
        """Whether this verdict means the op itself is wrong."""
        return self in (Verdict.SUSPICIOUS, Verdict.BROKEN)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Verdict limits in noise units (see the module docstring).

    Attributes:
        ok: Up to this many noise units a row is ``ok``. Defaults to 1.
        expected: Up to this, ``expected-noise``. Defaults to 64: kernels that accumulate in
            another order, fuse ops or use other transcendental approximations stay within it.
        broken: Up to this, ``suspicious``; above, ``broken``. Defaults to 4096.
    """

    ok: float = 1.0
    expected: float = 64.0
    broken: float = 4096.0

    def __post_init__(self) -> None:
        if not (0 <= self.ok <= self.expected <= self.broken):
            raise UsageError(f"thresholds must satisfy 0 <= ok <= expected <= broken, got {self}\n"
                             "Pass e.g. Thresholds(ok=1, expected=64, broken=4096).")

    def verdict(self, units: float) -> Verdict:
        """The verdict for a local error of ``units`` noise units (NaN → ``unmatched``)."""
        if math.isnan(units):
            return Verdict.UNMATCHED
        if units <= self.ok:
            return Verdict.OK
        if units <= self.expected:
            return Verdict.EXPECTED_NOISE
        return Verdict.SUSPICIOUS if units <= self.broken else Verdict.BROKEN


#: Used for floating-point rows of every op type without an override (key ``"default"``).
DEFAULT_THRESHOLDS = Thresholds()
#: Used for quantized rows (a rounding onto a known step is replayed) without an op override (key
#: ``"quantized"``). Kernels that compute the same quantized op differently (integer accumulation,
#: fixed-point requantization, another rounding mode) disagree only where a value lies within float
#: error of a rounding boundary, by one step: at most one step on *every* element is
#: ``sqrt(12)`` ≈ 3.46 noise units, the ``expected`` limit. More than that is not rounding. (Until
#: the zoo self-test, ``scripts/zoo.py``, this was 8: a changed int8 weight or bias inside an XNNPACK
#: delegate, 2-7 units, passed as expected noise while every clean control was at 0.)
DEFAULT_QUANTIZED_THRESHOLDS = Thresholds(ok=1.0, expected=math.sqrt(12), broken=512.0)

#: Limits for the rows of one delegate call (keys ``"<backend>"`` for floating-point rows and
#: ``"<backend>/quantized"`` for quantized rows, the backend as the ETDump names it), measured on clean
#: runs; rows that quantize dynamically (``choose_qparams``) keep the general limits.
#: XNNPACK requantizes statically quantized ops in fixed point or float32 so as to round exactly, with
#: the same algorithms on every CPU. On 33 of the zoo's 34 clean int8 controls (``scripts/zoo.py``,
#: x86) and the realistic MobileNet its delegates match the replay bit for bit; the other is at 0.2
#: units, one step on 0.3% of the elements. ``expected`` 1 is one step on 8% of them (1/12): 25 times
#: as many elements. Its fp32 delegates stay within 0.56 units on the zoo's 37 controls and 0.11 on
#: the realistic Llama: ``expected`` 8. ARM devices were not measured (XNNPACK runs other
#: microkernels of the same algorithms there); loosen with ``thresholds=`` if clean runs land above.
DEFAULT_BACKEND_THRESHOLDS: Mapping[str, Thresholds] = {
    "XnnpackBackend": Thresholds(ok=1.0, expected=8.0, broken=4096.0),
    "XnnpackBackend/quantized": Thresholds(ok=1.0, expected=1.0, broken=512.0),
}

ThresholdsArg = Thresholds | Mapping[str, "Thresholds | Mapping[str, float]"] | None


def resolve_thresholds(arg: ThresholdsArg) -> dict[str, Thresholds]:
    """``{op type, backend or "default": Thresholds}`` from the user's ``thresholds=`` argument.

    Accepts one :class:`Thresholds` (for every op), or a mapping from op type (``"softmax"``,
    ``"linear"``, ``"quantize_per_tensor"``, ..., ``"quantized"`` for every quantized row, or
    ``"default"`` for every floating-point row), or delegate backend (``"XnnpackBackend"``,
    ``"XnnpackBackend/quantized"``: the rows of its delegate calls) to a :class:`Thresholds` or
    to a dict of its fields (``{"expected": 256}``; missing fields keep the defaults). An op type's
    limits come first, then the backend's, then ``"quantized"``/``"default"``. The backend defaults
    (:data:`DEFAULT_BACKEND_THRESHOLDS`) give way to a ``"default"`` or ``"quantized"`` the user sets.

    Example:
        >>> resolve_thresholds({"softmax": {"expected": 256}})["softmax"].expected
        256.0
    """
    if arg is None:
        return {"default": DEFAULT_THRESHOLDS, "quantized": DEFAULT_QUANTIZED_THRESHOLDS, **DEFAULT_BACKEND_THRESHOLDS}
    if isinstance(arg, Thresholds):
        return {"default": arg, "quantized": arg}
    if not isinstance(arg, Mapping):
        raise UsageError(f"thresholds must be a Thresholds or a mapping of op type to Thresholds, "
                         f"not {type(arg).__name__}\nExample: thresholds={{'softmax': {{'expected': 256}}}}.")
    names = {f.name for f in fields(Thresholds)}

    def one(key: str, value: object, base: Thresholds) -> Thresholds:
        if isinstance(value, Thresholds):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - names
            if unknown:
                raise UsageError(f"thresholds[{key!r}] has unknown field(s) {sorted(unknown)}\n"
                                 f"Known fields: {sorted(names)}.")
            return replace(base, **{k: float(v) for k, v in value.items()})
        raise UsageError(f"thresholds[{key!r}] must be a Thresholds or a dict, not {type(value).__name__}\n"
                         "Example: thresholds={'softmax': {'expected': 256}}.")

    default = one("default", arg["default"], DEFAULT_THRESHOLDS) if "default" in arg else DEFAULT_THRESHOLDS
    quantized = one("quantized", arg["quantized"], DEFAULT_QUANTIZED_THRESHOLDS) if "quantized" in arg \
        else DEFAULT_QUANTIZED_THRESHOLDS
    out = {"default": default, "quantized": quantized}
    for key, limits in DEFAULT_BACKEND_THRESHOLDS.items():
        general = "quantized" if key.endswith("/quantized") else "default"
        if general not in arg:
            out[key] = limits
    for key, value in arg.items():
        if key not in ("default", "quantized"):
            base = quantized if str(key).endswith("/quantized") else default
            out[str(key)] = one(str(key), value, DEFAULT_BACKEND_THRESHOLDS.get(str(key), base))
    return out


def op_type(target: object) -> str:
    """Short op type of a node target: ``aten.linear.default`` → ``"linear"``."""
    name = getattr(target, "_opname", None) or getattr(target, "__name__", None) or str(target)
    return str(name).split(".")[0]


_MATMULS = frozenset({"linear", "mm", "bmm", "matmul", "addmm", "baddbmm"})
#: Ops whose every output element is a copy of an input element (or zero, which every grid with an
#: integer zero point holds: relu): a value on a quantization grid stays on it, so a row ending in one
#: after a dequantize is judged on that grid's step like the dequantize itself (``getitem`` of a
#: ``*_with_indices`` op's indices excepted: see numdiff.culprits._replay).
COPYING_OPS = frozenset({"view", "reshape", "_unsafe_view", "view_copy", "permute", "permute_copy", "transpose",
                         "t", "flatten", "squeeze", "squeeze_copy", "unsqueeze", "unsqueeze_copy", "expand",
                         "expand_copy", "slice", "slice_copy", "select", "select_copy", "cat", "stack", "split",
                         "split_with_sizes", "split_copy", "split_with_sizes_copy", "chunk", "unbind", "getitem",
                         "repeat", "repeat_interleave", "index_select", "narrow", "movedim", "roll", "flip", "clone",
                         "contiguous", "alias", "detach", "pixel_shuffle", "pixel_unshuffle", "upsample_nearest1d",
                         "upsample_nearest2d", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
                         "relu"})
_CONVS = frozenset({"conv1d", "conv2d", "conv3d", "convolution", "conv_transpose2d", "conv_transpose1d"})
_DIM_REDUCTIONS = frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax", "cumsum", "cumprod"})
_MULTI_DIM_REDUCTIONS = frozenset({"mean", "sum", "var", "var_mean", "std", "amax", "amin", "logsumexp"})
_NORMS = frozenset({"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm"})


def _shape(value: object) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def reduction_length(target: object, args: Sequence[object], kwargs: Mapping[str, object], output: object) -> int:
    """How many terms each output element of this op sums (1 for element-wise ops)."""
    kind = op_type(target)
    values = list(args) + list(kwargs.values())
    tensors = [_shape(v) for v in values if isinstance(v, torch.Tensor)]
    try:
        if kind in _MATMULS and tensors:
            first = 1 if kind in ("addmm", "baddbmm") and len(tensors) > 2 else 0
            shape = tensors[first]
            return max(1, int(shape[-1])) if shape else 1
        if kind in _CONVS and len(tensors) >= 2:
            weight = tensors[1]
            return max(1, math.prod(weight[1:])) if weight else 1
        if kind in _DIM_REDUCTIONS and tensors and tensors[0]:
            dim = int(cast(SupportsInt, kwargs.get("dim", args[1] if len(args) > 1 else -1)))
            return max(1, int(tensors[0][dim]))
        if kind in _MULTI_DIM_REDUCTIONS and tensors and tensors[0]:
            out_shape = _shape(output[0] if isinstance(output, (list, tuple)) and output else output) or ()
            return max(1, math.prod(tensors[0]) // max(1, math.prod(out_shape)))
        if kind in _NORMS and tensors and tensors[0]:
            normalized = args[1] if len(args) > 1 else kwargs.get("normalized_shape", [1])
            return max(1, math.prod(int(s) for s in normalized)) if isinstance(normalized, (list, tuple)) else 1
        if kind.startswith("avg_pool") and len(args) > 1 and isinstance(args[1], (list, tuple)):
            return max(1, math.prod(int(s) for s in args[1]))
    except (IndexError, TypeError, ValueError):
        return 1
    return 1


_EPS = {torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float64: 2.0**-52}


@dataclass(frozen=True, slots=True)
class Noise:
    """The noise model of one row: where its sigma comes from.

    Attributes:
        reduction: Summed reduction length ``K`` of the replayed nodes.
        quant_step: Quantization step of the output (a float, a per-channel tensor, or None).
        quant_axis: Channel axis of a per-channel step.
        zero_point: Zero point of a per-tensor dequantize (to dequantize an integer runtime value).
        rounding: Whether the replayed nodes round onto the quantization grid (a quantize op among
            them). A dequantize of values already on the grid (a constant's, or its producer's
            runtime integers) rounds nothing: its honest error is floating-point only, so
            ``quant_step`` then gives the layout but not the noise.
        tie: Where the elements of the row's one rounding lay before it, when the row replays
            exactly one rounding of values computed from the runtime's inputs (see
            :mod:`numdiff.culprits._rounding`); None otherwise.
        carried: Rounding noise (rms, in the output's units) the row's value carries from dynamic
            quantization inside it, whose grid the runtime computes its own way (see
            :func:`numdiff.culprits._rounding.carried`), or, where the replay computes the runtime's
            own grid (XNNPACK, :mod:`numdiff.culprits._qd8`), from the elements that lay within
            float error of a rounding tie; 0 when it has none.
        dynamic: How the row's dynamic quantizations were replayed, and how many elements of its
            requantizations XNNPACK computes in fixed point lay near a tie ("" when it has neither).
        bound: Per element (the output's shape), how far the device's value may lie from the replay's
            because an emulated dynamic quantization, or a requantization XNNPACK computes in fixed
            point, inside the row may round an element that lay within float error of a tie onto the
            neighbouring step (see :func:`numdiff.culprits._qd8.flips` and
            :func:`numdiff.culprits._rounding.requantize_flips`); None when no element may.
        graph_grid: Whether a dynamic quantization inside the row was replayed on the graph's grid (not
            as the device computes it): its noise is the first-order :attr:`carried` model.
        compounded: Whether the row carries the one-step flips of requantizations XNNPACK computes its
            own way (an int8 add, mean or activation) through several weighted layers (in
            :attr:`carried`); such a row keeps the general limits.
        input_dtype: The widest floating dtype among the paired node's tensor inputs, the precision an
            op computes in (None when it has none). A value wider than every input (a float64 scale
            ``choose_qparams`` computes from float32 values) carries their rounding: an honest kernel
            may compute it in their precision and widen it (PyTorch's own ``choose_qparams`` does), so
            its epsilon is the inputs'. An op mixing precisions (a float16 and a float32 input) computes
            in the wider one and is judged on it.
    """

    reduction: int = 1
    quant_step: float | torch.Tensor | None = None
    quant_axis: int | None = None
    zero_point: float | None = None
    rounding: bool = True
    tie: TieMargin | None = None
    carried: float = 0.0
    dynamic: str = ""
    bound: torch.Tensor | None = None
    graph_grid: bool = False
    compounded: bool = False
    input_dtype: torch.dtype | None = None

    @property
    def _step(self) -> float | torch.Tensor | None:
        return self.quant_step if self.rounding else None

    def quantized(self, runtime_dtype: torch.dtype) -> bool:
        """Whether the row is judged as quantized (it rounds onto a known step, or the output is an integer grid)."""
        return self._step is not None or not runtime_dtype.is_floating_point or self.carried > 0

    def describe(self) -> str:
        parts = [f"K={self.reduction}"]
        if isinstance(self.quant_step, torch.Tensor):
            parts.append(f"per-channel step (axis {self.quant_axis})")
        elif self.quant_step is not None:
            parts.append(f"step {self.quant_step:.4g}")
        if self.quant_step is not None and not self.rounding:
            parts.append("no rounding replayed: floating-point noise only")
        if self.carried:
            what = "carried" if self.compounded else "dynamic quantization's"
            parts.append(f"{what} rounding {self.carried:.3g} rms")
        if self.dynamic:
            parts.append(self.dynamic)
        if self.bound is not None:
            parts.append(f"a rounding flip may move {int((self.bound > 0).sum())} of {self.bound.numel()} elements")
        return ", ".join(parts)

    def sigma(self, reference: torch.Tensor, runtime_dtype: torch.dtype) -> torch.Tensor:
        """Per-element (broadcastable) sigma for a float64 ``reference``, with :attr:`bound` added
        element by element when it has the reference's shape."""
        base = self._sigma(reference, runtime_dtype)
        if self.bound is not None and tuple(self.bound.shape) == tuple(reference.shape):
            return torch.sqrt(base**2 + self.bound.double() ** 2)
        return base

    def _sigma(self, reference: torch.Tensor, runtime_dtype: torch.dtype) -> torch.Tensor:
        eps = _EPS.get(runtime_dtype, _EPS.get(reference.dtype, 2.0**-23))
        if runtime_dtype.is_floating_point and self.input_dtype is not None:
            eps = max(eps, _EPS.get(self.input_dtype, 0.0))  # computed in its inputs' precision, then widened
        if not runtime_dtype.is_floating_point and self._step is None:
            eps = 0.0
        peak = float(reference.abs().max()) if reference.numel() else 0.0
        sigma_f = eps * math.sqrt(self.reduction) * peak
        step = self._step
        if step is None and not runtime_dtype.is_floating_point:
            step = 1.0  # an integer tensor: one step of its own grid
        if isinstance(step, torch.Tensor) and self.quant_axis is not None and reference.dim() > 0:
            shape = [1] * reference.dim()
            axis = self.quant_axis % reference.dim()
            if step.numel() == reference.shape[axis]:
                shape[axis] = -1
                per_channel = step.double().reshape(shape) / math.sqrt(12)
                return torch.sqrt(per_channel**2 + sigma_f**2 + self.carried**2).clamp_min(_TINY)
        scalar = float(step.abs().max()) if isinstance(step, torch.Tensor) else step
        sigma_q = 0.0 if scalar is None else float(scalar) / math.sqrt(12)
        return torch.tensor(max(math.sqrt(sigma_q**2 + sigma_f**2 + self.carried**2), _TINY), dtype=torch.float64)


def widest_float(args: tuple[object, ...]) -> torch.dtype | None:
    """The floating dtype of most precision among the tensors in ``args`` (one level of lists), or None:
    the precision an op promoting its inputs computes in.

    Example:
        >>> widest_float((torch.zeros(2, dtype=torch.float16), [torch.zeros(1)], 3))
        torch.float32
    """
    tensors = [t for a in args for t in (a if isinstance(a, (list, tuple)) else (a,))
               if isinstance(t, torch.Tensor) and t.dtype.is_floating_point]
    return min((t.dtype for t in tensors), key=lambda d: torch.finfo(d).eps, default=None)


#: Floor of sigma: below this the reference is all zeros and any difference counts.
_TINY = 1e-30
