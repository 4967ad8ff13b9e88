"""Replay the reference graph on the runtime's values: one pass, streaming.

:class:`ReplayInterpreter` is a ``torch.fx.Interpreter`` that overrides ``run_node``. Every node
runs on the *substituted* values of its arguments: a node the runtime logged (a *paired* node) is
replaced, after it has run, by the runtime's output; any other node keeps what it computed. So the
value a paired node computes is its own computation (together with the unlogged nodes between it
and its paired producers: the rest of its debug-handle group, or the whole delegate) on the
runtime's inputs — its *replay*. ``on_paired(node, replay, args, kwargs, noise)`` scores it and
returns the value to substitute. Weights and constants come from the graph; graph inputs are the
representative inputs, unless a delegate logged them: then the exact argument of that delegate call
(see :mod:`numdiff.culprits._inputs`), never a logged tensor that merely has the same shape.

Inside an XNNPACK delegate, a statically quantized convolution or fully connected layer adds its bias
on its int32 accumulator's grid (:func:`~numdiff.culprits._xnnpack.integer_bias`), and a dynamic
quantization (``choose_qparams → quantize → dequantize`` feeding a linear or a convolution) is
replayed on XNNPACK's own per-row grid (:mod:`numdiff.culprits._qd8`), not the graph's per-tensor
one; the elements it, or an int8 kernel's requantization (see ``fixed_point_rounding``), may flip are
carried per element to the row's noise (``Noise.bound``). Every other dynamic quantization keeps the
graph's grid and its first-order rounding noise (``Noise.carried``); the row's noise says which.

Values live only as long as torch.fx's interpreter keeps them (``garbage_collect_values``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import SupportsInt, cast

import torch
from torch.fx import Interpreter

from numdiff._core.etrecord import ETRecordLike
from numdiff.culprits._inputs import LoggedInput
from numdiff.culprits._noise import COPYING_OPS, DEFAULT_THRESHOLDS, Noise, widest_float, op_type, reduction_length
from numdiff.culprits._xnnpack import (COMPOUNDING_DEPTH, WEIGHTED_OPS, computed_own_way, dynamic_chain,
                                       fixed_point_rounding, fused_clamp, integer_bias)
from numdiff.culprits._qd8 import NO_BOUND, Qd8, flips, propagate, qd8_quantize
from numdiff.culprits._rounding import TieMargin, carried, dynamic_rounding, own_way_nsr, requantize_flips, tie_margin
from numdiff.errors import CaptureError, NumdiffError

__all__ = ["ReplayInterpreter", "graph_args", "quant_noise"]

OnPaired = Callable[[torch.fx.Node, object, tuple[object, ...], dict[str, object], Noise], object]

_QUANTIZE = frozenset({"quantize_per_tensor", "quantize_per_channel"})
_DEQUANTIZE = frozenset({"dequantize_per_tensor", "dequantize_per_channel"})
#: Quantize and dequantize ops whose scale may be computed at run time (dynamic quantization).
_ANY_QUANTIZE = _QUANTIZE | {"quantize_per_token"}
_ANY_DEQUANTIZE = _DEQUANTIZE | {"dequantize_per_token"}
_EPS32 = 2.0**-23
def _largest(bound: object) -> float:
    """The largest element of a per-element bound (or of a list of them)."""
    if isinstance(bound, torch.Tensor):
        return float(bound.max()) if bound.numel() else 0.0
    if isinstance(bound, (list, tuple)):
        return max((_largest(b) for b in bound), default=0.0)
    return 0.0


def quant_noise(target: object, args: tuple[object, ...], kwargs: Mapping[str, object]) -> tuple[float | torch.Tensor | None, int | None, float | None]:
    """``(step, axis, zero point)`` of a dequantize op's output (quantize outputs are integers: step 1).

    The zero point is given for per-tensor parameters only (it lets an integer runtime value be
    dequantized with the graph's parameters).
    """
    kind = op_type(target)
    if kind not in _DEQUANTIZE:
        return None, None, None
    scale = args[1] if len(args) > 1 else kwargs.get("scale", kwargs.get("scales"))
    zero = args[2] if len(args) > 2 else kwargs.get("zero_point", kwargs.get("zero_points"))
    zero_point = float(zero) if isinstance(zero, (int, float)) or (
        isinstance(zero, torch.Tensor) and zero.numel() == 1) else None
    if isinstance(scale, torch.Tensor):
        if scale.numel() == 1:
            return float(scale), None, zero_point
        axis = args[3] if len(args) > 3 else kwargs.get("axis", 0)
        return scale.detach(), int(cast(SupportsInt, axis)), None
    return (float(scale), None, zero_point) if isinstance(scale, (int, float)) else (None, None, None)


def graph_args(etrecord: ETRecordLike, step_input: tuple[object, ...] | None = None) -> list[object]:
    """The reference graph's run arguments: one decode step's own inputs, or the representative inputs."""
    if step_input is not None:
        return [[tuple(step_input)]]
    from numdiff.gap import representative_inputs

    return [representative_inputs(etrecord)]


class ReplayInterpreter(Interpreter):
    """Runs a reference graph with the runtime's values substituted at every paired node.

    Args:
        module: The reference graph module.
        paired: Names of the nodes the runtime logged.
        on_paired: ``on_paired(node, replay, args, kwargs, noise) -> value to substitute``.
        logged_inputs: The runtime value of each graph input a delegate call took as its argument.
        inputs_from_runtime: Where to record the graph inputs taken from the runtime, with their
            source (shared with the scorer, which reads it as the replay runs); names already in it
            count as runtime values (one decode step's own inputs).
        xnnpack_nodes: Nodes that run inside an XNNPACK delegate call: their dynamic quantization
            (see :func:`dynamic_chain`) is replayed as XNNPACK computes it (:mod:`numdiff.culprits._qd8`).
        tie_allowance: Floating-point noise units a kernel may make (the ``expected`` limit of
            floating-point rows): how close to a rounding tie an element of an emulated quantization
            must lie to be allowed to round the other way.
        shared: Unpaired nodes that compute what a paired node computes, each with that node (see
            :func:`~numdiff.culprits._same_values.same_values`): they take its substituted value.
    """

    def __init__(self, module: torch.fx.GraphModule, paired: set[str], on_paired: OnPaired,
                 logged_inputs: Mapping[str, LoggedInput] | None = None,
                 inputs_from_runtime: dict[str, str] | None = None, xnnpack_nodes: frozenset[str] = frozenset(),
                 tie_allowance: float = DEFAULT_THRESHOLDS.expected, shared: Mapping[str, str] | None = None) -> None:
        super().__init__(module, garbage_collect_values=True)
        self._shared = dict(shared or {})
        #: Substituted values of paired nodes that unpaired nodes share, while some of those are to run.
        self._sharing: dict[str, object] = {}
        self._readers: dict[str, int] = {}
        self.extra_traceback = False
        self._paired = paired
        self._on_paired = on_paired
        self._reduction: dict[str, int] = {}
        #: Unpaired nodes whose value went through a quantize op since the last paired values.
        self._rounded: set[str] = set()
        #: Nodes whose value depends on the run (graph inputs, paired nodes and what they feed), with
        #: up to two quantize ops that rounded such values since the last paired values.
        self._since: dict[str, frozenset[str]] = {}
        #: Tie margins of per-tensor quantize ops of run values, and of dequantize ops reading them.
        #: (Computed only when a paired node asks: most such roundings are inside a delegate's chain.)
        self._ties: dict[str, Callable[[], TieMargin | None]] = {}
        #: Rounding noise carried by unpaired values from dynamic quantization (see Noise.carried).
        self._carried: dict[str, float] = {}
        #: Quantize ops of run values onto a grid computed at run time.
        self._dynamic: set[str] = set()
        self._xnnpack = xnnpack_nodes
        self._tie_allowance = tie_allowance
        #: Quantize ops replayed as XNNPACK quantizes, with what they computed.
        self._qd8: dict[str, Qd8] = {}
        #: Per unpaired value, the quantizations behind it since the last paired values: ``(dynamic ones
        #: emulated as XNNPACK does, dynamic ones on the graph's grid, static requantizations XNNPACK computes
        #: its own way with elements within float error of a tie)``.
        self._dyn: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {}
        #: Quantizations' elements that may round the other way (see _flip_bound).
        self._flips: dict[str, int] = {}
        #: choose_qparams ops and the getitems of their outputs (the graph's dynamic grids).
        self._grids: set[str] = set()
        #: Steps of the per-tensor quantization grids values lie on: a dequantize's output and copies of
        #: its elements (:data:`~numdiff.culprits._noise.COPYING_OPS`).
        self._on_grid: dict[str, float] = {}
        #: Per unpaired value, the per-element bound of the deviation such flips may cause (see
        #: _qd8.propagate): a tensor shaped like the value, or a list of them for several outputs.
        self._bounds: dict[str, object] = {}
        #: Static quantize ops inside an XNNPACK delegate whose value an op XNNPACK computes its own way
        #: made; and per value since the last paired values: (weighted layers after the first such
        #: requantization, the noise-to-signal power ratio their rounding may add) — see _own_way_step.
        self._requantized: set[str] = set()
        #: A layer's value before a requantization XNNPACK skips (a clamp fused into the layer, see
        #: :func:`~numdiff.culprits._xnnpack.fused_clamp`), by the quantize op.
        self._unrounded: dict[str, torch.Tensor] = {}
        self._own_way: dict[str, tuple[int, float]] = {}
        self._scales: dict[str, object] = {}  # scales of per-channel dequantize ops inside XNNPACK delegates
        self._logged_inputs = logged_inputs or {}
        #: Graph inputs replaced by a value the runtime logged (a delegate logs its inputs), and where.
        self.inputs_from_runtime: dict[str, str] = {} if inputs_from_runtime is None else inputs_from_runtime
        #: Graph inputs a delegate logged but whose logged value could not be used, and why.
        self.input_problems: dict[str, str] = {}
        #: Graph inputs taken from what a delegate logged: whether the value equals the representative input.
        self.inputs_agree: dict[str, bool] = {}

    def run(self, *args: object, initial_env: dict[torch.fx.Node, object] | None = None,
            enable_io_processing: bool = True) -> object:
        """Run the graph on the representative inputs (see ``torch.fx.Interpreter.run``)."""
        self._reduction = {}
        self._rounded = set()
        self._since, self._ties, self._carried, self._dynamic = {}, {}, {}, set()
        self._qd8, self._dyn, self._flips, self._bounds, self._grids = {}, {}, {}, {}, set()
        self._on_grid = {}
        self._requantized, self._own_way, self._unrounded, self._scales = set(), {}, {}, {}
        self._sharing, self._readers = {}, {}
        for to in self._shared.values():
            self._readers[to] = self._readers.get(to, 0) + 1
        with torch.no_grad():
            return super().run(*args, initial_env=initial_env, enable_io_processing=enable_io_processing)

    def run_node(self, n: torch.fx.Node) -> object:
        """Run one node on substituted arguments; hand paired nodes to ``on_paired``."""
        if n.op == "placeholder":
            self._since[n.name] = frozenset()
            return self._graph_input(n, super().run_node(n))
        if n.op != "call_function":
            return super().run_node(n)
        try:
            return self._share(n) if self._shared.get(n.name) in self._sharing else self._call(n)
        finally:
            for gone in self.user_to_last_uses.get(n, ()):
                self._since.pop(gone.name, None)
                self._ties.pop(gone.name, None)
                self._carried.pop(gone.name, None)
                self._dynamic.discard(gone.name)
                self._qd8.pop(gone.name, None)
                self._dyn.pop(gone.name, None)
                self._bounds.pop(gone.name, None)
                self._grids.discard(gone.name)
                self._on_grid.pop(gone.name, None)
                self._requantized.discard(gone.name)
                self._own_way.pop(gone.name, None)
                self._scales.pop(gone.name, None)

    def _share(self, n: torch.fx.Node) -> object:
        """The substituted value of the paired node ``n`` computes the same as (see ``shared``)."""
        to = self._shared[n.name]
        value = self._sharing[to]
        self._readers[to] -= 1
        if not self._readers[to]:
            del self._sharing[to]
        self._since[n.name] = frozenset()  # its consumers read the runtime's value, as the paired node's
        return value

    def _call(self, n: torch.fx.Node) -> object:
        try:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            result = self._emulated(n, args)
            if result is None:
                biased = integer_bias(n, args, kwargs, lambda node: self._scales.get(node.name)) \
                    if n.name in self._xnnpack else None
                result = self.call_function(n.target, *((args, kwargs) if biased is None else biased))
            if n.name in self._xnnpack and op_type(n.target) == "dequantize_per_channel" and len(args) > 1:
                self._scales[n.name] = args[1]  # for the bias of the layer reading it (see integer_bias)
        except NumdiffError:
            raise
        except Exception as e:
            raise CaptureError(
                f"replaying node {n.name!r} (target {n.target}) on the runtime's values failed: "
                f"{type(e).__name__}: {e}\nThe runtime's outputs of its producers may have another shape or "
                "dtype than the graph expects; see find_culprits' matching table."
            ) from e
        inner = max((self._reduction.get(a.name, 0) for a in n.all_input_nodes), default=0)
        length = reduction_length(n.target, args, kwargs, result) + inner
        kind = op_type(n.target)
        rounds = kind in _QUANTIZE or any(a.name in self._rounded for a in n.all_input_nodes)
        pending_tie = self._track_rounding(n, kind, args, length)
        bound, unbounded = self._bound(n, kind, args, kwargs, result)
        noise = self._carry(n, kind, args, unbounded)
        own_way = self._own_way_step(n, kind, args, result)
        dyn = self._dynamic_kinds(n)
        grid = self._grid(n, kind, args, kwargs)
        if grid is not None:
            self._on_grid[n.name] = grid
        if n.name not in self._paired:
            if own_way != (0, 0.0):
                self._own_way[n.name] = own_way
            self._reduction[n.name] = length
            if rounds:
                self._rounded.add(n.name)
            if noise:
                self._carried[n.name] = noise
            if any(dyn):
                self._dyn[n.name] = dyn
            if bound is not None:
                self._bounds[n.name] = bound
            return result
        if bound is not None and not isinstance(bound, torch.Tensor):  # several outputs: one noise for all
            noise = math.sqrt(noise**2 + _largest(bound) ** 2)
        row_bound = bound if isinstance(bound, torch.Tensor) else None
        self._since[n.name] = frozenset()  # its consumers read the runtime's value: nothing rounded since
        self._ties.pop(n.name, None)
        step, axis, zero_point = quant_noise(n.target, args, kwargs)
        if step is None and grid is not None:  # a copy of a dequantized value: its grid's rounding
            step = grid
        tie = None if pending_tie is None else pending_tie()
        described = self._describe_dynamic(*dyn)
        depth, ratio = own_way
        compounded = depth >= COMPOUNDING_DEPTH and ratio > 0
        if compounded:
            noise = math.hypot(noise, math.sqrt(ratio) * _rms_of(result))
            row_bound = None  # per element, the flips' worst case compounded over the layers excuses anything
            described = "; ".join(x for x in (described, f"requantizations XNNPACK computes its own way (an int8 add, "
                                                         f"mean or activation) {depth} weighted layers deep: their "
                                                         "one-step flips compound, carried") if x)
        value = self._on_paired(n, result, args, kwargs, Noise(length, step, axis, zero_point, rounds, tie, noise, described,
                                                               row_bound, bool(dyn[1]), compounded, widest_float(args)))
        if self._readers.get(n.name):
            self._sharing[n.name] = value
        return value

    def _grid(self, n: torch.fx.Node, kind: str, args: tuple[object, ...],
              kwargs: Mapping[str, object]) -> float | None:
        """The step of the per-tensor grid ``n``'s value lies on: a per-tensor dequantize's (static
        parameters), kept by ops that only copy elements when every value they copy lies on that one
        grid. Only the step: the row's value stays the dequantized one (a zero point would make the
        local error read an integer runtime value as the accumulated error does not)."""
        if kind in _DEQUANTIZE:  # a dynamic grid may be the device's own, per row
            if len(n.args) > 1 and isinstance(n.args[1], torch.fx.Node):
                return None
            step, _, _ = quant_noise(n.target, args, kwargs)
            return step if isinstance(step, float) else None
        if kind not in COPYING_OPS or not n.args:
            return None
        first = n.args[0]
        if kind == "getitem" and isinstance(first, torch.fx.Node) and op_type(first.target).endswith("_with_indices") \
                and len(n.args) > 1 and n.args[1] != 0:
            return None  # the indices of a max pool: integers, on no grid
        sources = first if isinstance(first, (list, tuple)) else (first,)
        grids = {self._on_grid.get(s.name) if isinstance(s, torch.fx.Node) else None for s in sources}
        return grids.pop() if len(grids) == 1 else None

    def _bound(self, n: torch.fx.Node, kind: str, args: tuple[object, ...], kwargs: Mapping[str, object],
               result: object) -> tuple[object, dict[str, float]]:
        """``(n's per-element flip bound or None, the inputs' bounds given up as scalar noise)``."""
        source = n.args[0] if n.args else None
        before = held if isinstance(held := self._bounds.get(getattr(source, "name", "")), torch.Tensor) else None
        static = kind == "quantize_per_tensor" and len(n.args) > 1 and isinstance(n.args[1], float) \
            and isinstance(args[0], torch.Tensor)
        if n.name in self._qd8 or static:  # a rounding the device may do otherwise near a tie: bounded per element
            count, flipped = self._flip_bound(n, args, before)
            self._flips[n.name] = count
            return flipped, {}
        if kind.startswith("choose_qparams") or (n.args and isinstance(n.args[0], torch.fx.Node)
                                                 and n.args[0].name in self._grids):
            self._grids.add(n.name)
            return None, {}  # the graph's grid: unused where emulated, else covered by the rounding model
        if kind == "dequantize_per_tensor" and isinstance(source, torch.fx.Node) and source.name in self._qd8:
            return self._bounds.get(source.name), {}
        if kind == "dequantize_per_tensor" and before is not None and len(n.args) > 1 and isinstance(n.args[1], float):
            return before * n.args[1], {}  # a static quantize's bound is in its steps
        held = [self._arg_bound(a) for a in n.args]
        if not any(b is not None for b in held):
            return None, {}
        bound = propagate(kind, cast(Callable[..., object], n.target), args, kwargs, held, result)
        if bound is not NO_BOUND:
            return bound, {}
        # No per-element rule: the bounds become rounding noise on every element (first-order model).
        return None, {a.name: _largest(self._bounds[a.name]) for a in n.all_input_nodes if a.name in self._bounds}

    def _arg_bound(self, arg: object) -> object:
        if isinstance(arg, torch.fx.Node):
            return self._bounds.get(arg.name)
        if isinstance(arg, (list, tuple)) and any(isinstance(a, torch.fx.Node) and a.name in self._bounds for a in arg):
            return [self._bounds.get(a.name) if isinstance(a, torch.fx.Node) else None for a in arg]
        return None

    def _emulated(self, n: torch.fx.Node, args: tuple[object, ...]) -> object | None:
        """XNNPACK's own dynamic quantization of ``n`` (a quantize op of :func:`dynamic_chain` inside an
        XNNPACK delegate, or the dequantize reading one), or its fused clamp (:func:`fused_clamp`: the
        dequantize before it gives the convolution's value unrounded); None when ``n`` is neither."""
        source = n.args[0] if n.args else None
        if n.name in self._xnnpack and n.name not in self._paired and len(n.users) == 1 \
                and fused_clamp(next(iter(n.users))) and args and isinstance(args[0], torch.Tensor):
            self._unrounded[n.name] = args[0]  # the layer's value, for the dequantize after this quantize
        if isinstance(source, torch.fx.Node) and source.name in self._unrounded and n.name not in self._paired:
            return self._unrounded.pop(source.name)
        if n.name in self._xnnpack and args and isinstance(args[0], torch.Tensor) and args[0].is_floating_point() \
                and args[0].dim() >= 1:
            rows = dynamic_chain(n, lambda node: self.env.get(node))
            if rows is not False and (rows is None or isinstance(rows, int)) \
                    and (rows is None or rows == -1 or args[0].dim() > rows):
                quantized = qd8_quantize(args[0], rows)
                self._qd8[n.name] = quantized
                return quantized.q
        if op_type(n.target) == "dequantize_per_tensor" and isinstance(source, torch.fx.Node) and source.name in self._qd8:
            out_dtype = n.kwargs.get("out_dtype")
            value = self._qd8[source.name].dequantize()
            return value.to(out_dtype) if isinstance(out_dtype, torch.dtype) else value
        return None

    def _dynamic_kinds(self, n: torch.fx.Node) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """``(emulated, on the graph's grid, own way)``: the dynamic quantizations behind ``n``'s value, and
        the static requantizations XNNPACK computes its own way with elements near a tie (see _flip_bound)."""
        none: tuple[frozenset[str], ...] = (frozenset(), frozenset(), frozenset())
        emulated, graph_grid, own_way = (frozenset[str]().union(*(self._dyn.get(a.name, none)[i] for a in n.all_input_nodes))
                                         for i in range(3))
        if n.name in self._qd8:
            emulated |= {n.name}
        elif n.name in self._dynamic:
            graph_grid |= {n.name}
        elif n.name in self._requantized and self._flips.get(n.name):
            own_way |= {n.name}
        return emulated, graph_grid, own_way

    def _describe_dynamic(self, emulated: frozenset[str], graph_grid: frozenset[str], own_way: frozenset[str]) -> str:
        """What the row's noise model says about its dynamic and own-way quantizations ("" when it has none)."""
        parts = []
        if emulated:
            near = sum(self._flips.get(q, 0) for q in emulated)
            parts.append(f"{len(emulated)} dynamic quantization(s) replayed as XNNPACK computes them"
                         + (f", {near} element(s) within float error of a rounding tie" if near else ""))
        if own_way:
            near = sum(self._flips.get(q, 0) for q in own_way)
            parts.append(f"{len(own_way)} requantization(s) XNNPACK computes its own way (an int8 add, mean or "
                         f"activation) with {near} element(s) within float error, or an earlier flip's reach, of a "
                         "rounding tie, which it may round the other way: bounded per element")
        if graph_grid:
            why = "not inside an XNNPACK delegate" if not self._xnnpack.intersection(graph_grid) else \
                "not a choose_qparams → quantize → dequantize chain feeding only linears or convolutions"
            parts.append(f"{len(graph_grid)} dynamic quantization(s) replayed on the graph's per-tensor grid ({why}): "
                         "the runtime's own grid is covered by the carried rounding noise")
        return "; ".join(parts)

    def _own_way_step(self, n: torch.fx.Node, kind: str, args: tuple[object, ...], result: object) -> tuple[int, float]:
        """``(weighted layers since the first requantization XNNPACK computes its own way, noise-to-signal
        power ratio)`` for ``n``'s value, since the last paired values. Each such requantization inside an
        XNNPACK delegate adds ``(step**2 / 12) / mean(value**2)`` (first order: every element may round
        the other way); the ratio, not an absolute error, is what a network that keeps its activations'
        scale carries on (the largest of an op's inputs)."""
        depth, ratio = max((self._own_way.get(a.name, (0, 0.0)) for a in n.all_input_nodes), default=(0, 0.0))
        if ratio > 0 and kind in WEIGHTED_OPS:
            depth += 1
        source = n.args[0] if n.args else None
        if kind in _QUANTIZE and n.name in self._xnnpack and n.name not in self._paired \
                and not (len(n.args) > 1 and isinstance(n.args[1], torch.fx.Node)) and computed_own_way(n) is not None:
            self._requantized.add(n.name)
        if n.name in self._qd8 and self._flips.get(n.name, 0) and n.name not in self._paired:
            self._requantized.add(n.name)  # emulated, but elements within float error of a tie may flip
        if kind in _ANY_DEQUANTIZE and isinstance(source, torch.fx.Node) and source.name in self._requantized:
            ratio += own_way_nsr(args[1] if len(args) > 1 else None, result)
        return depth, ratio

    def _carry(self, n: torch.fx.Node, kind: str, args: tuple[object, ...], unbounded: Mapping[str, float]) -> float:
        """The rounding noise ``n``'s value carries from dynamic quantization since the last paired values."""
        if kind in _ANY_QUANTIZE and len(n.args) > 1 and isinstance(n.args[1], torch.fx.Node) and n.name in self._since:
            self._dynamic.add(n.name)  # a run value rounded onto a grid computed at run time
        source = n.args[0] if n.args else None
        if (kind in _ANY_QUANTIZE and n.name in self._qd8) or (kind in _ANY_DEQUANTIZE and isinstance(source, torch.fx.Node)
                                                              and source.name in self._qd8):
            # Emulated: the grid is the device's; only what the values carried goes on (flips: per element).
            return self._carried.get(source.name, 0.0) if isinstance(source, torch.fx.Node) else 0.0
        if kind in _ANY_DEQUANTIZE and isinstance(source, torch.fx.Node) and source.name in self._dynamic:
            return dynamic_rounding(self._carried.get(source.name, 0.0), args[1] if len(args) > 1 else None)
        sigmas = tuple(math.hypot(self._carried.get(a.name, 0.0), unbounded.get(a.name, 0.0))
                       if isinstance(a, torch.fx.Node) else 0.0 for a in n.args)
        return carried(kind, args, sigmas)

    def _flip_bound(self, quantize: torch.fx.Node, args: tuple[object, ...],
                    before: torch.Tensor | None) -> tuple[int, torch.Tensor | None]:
        """``(elements, per-element bound)`` of the steps a quantization may land away from the replay's:
        those within the bound earlier flips left on them (``before``) of a tie, and, where the device rounds
        a value computed since the last paired values its own way, those within the float error of that
        computation (``eps * sqrt(K) * max|x|``) of a tie: an emulated dynamic quantization (K since the
        last paired values), or a static requantization XNNPACK computes in fixed point (K of the op that
        computed it, see :func:`fixed_point_rounding`: its inputs are on grids, the same on both sides)."""
        if quantize.name not in self._qd8:  # a static per-tensor quantize (see _bound)
            x = cast(torch.Tensor, args[0])
            op = fixed_point_rounding(quantize) if quantize.name in self._xnnpack and quantize.name not in self._paired else None
            length = None if op is None or op.name not in self._reduction or not x.numel() else \
                self._reduction[op.name] - max((self._reduction.get(a.name, 0) for a in op.all_input_nodes), default=0)
            sigma = 0.0 if length is None else _EPS32 * math.sqrt(max(1, length)) * float(x.detach().abs().max())
            return requantize_flips(x, cast(float, quantize.args[1]), sigma, self._tie_allowance, before)
        value = quantize.args[0] if quantize.args else None
        if not isinstance(value, torch.fx.Node) or value.name not in self._reduction:
            return 0, None  # the runtime's own value (or a graph input): quantized bit for bit as the device does
        quantized = self._qd8[quantize.name]
        peak = float((quantized.steps.abs() / quantized.inv_scale).max()) if quantized.steps.numel() else 0.0
        sigma = _EPS32 * math.sqrt(max(1, self._reduction[value.name])) * peak
        if before is not None and before.shape != quantized.q.shape:
            before = None
        return flips(quantized, sigma, self._tie_allowance, before)

    def _track_rounding(self, n: torch.fx.Node, kind: str, args: tuple[object, ...],
                        length: int) -> Callable[[], TieMargin | None] | None:
        """Record the run-dependent roundings behind ``n``; what gives its tie margin if it ends the only one."""
        varying = [self._since[a.name] for a in n.all_input_nodes if a.name in self._since]
        if not varying:
            return None  # computed from constants only: the same on every kernel
        since = frozenset().union(*varying)
        if kind in _QUANTIZE:
            since |= {n.name}
        self._since[n.name] = frozenset(sorted(since)[:2])
        tie: Callable[[], TieMargin | None] | None = None
        if n.name in self._qd8:
            pass  # rounded onto XNNPACK's grid, not the graph's: no tie margin on the graph's grid
        elif len(since) == 1 and kind == "quantize_per_tensor" and args:
            tie = functools.partial(tie_margin, args[0], args[1] if len(args) > 1 else None, length)
        elif len(since) == 1 and kind == "dequantize_per_tensor" and isinstance(n.args[0], torch.fx.Node):
            tie = self._ties.get(n.args[0].name)
        if tie is not None:
            self._ties[n.name] = tie
        return tie

    def _graph_input(self, n: torch.fx.Node, value: object) -> object:
        """The argument a delegate call logged for this graph input, else the representative input."""
        logged = self._logged_inputs.get(n.name)
        if logged is None or not isinstance(value, torch.Tensor) or n.name in self.inputs_from_runtime:
            return value
        got = logged.value
        if not isinstance(got, torch.Tensor) or got.shape != value.shape or got.dtype != value.dtype:
            what = f"{tuple(got.shape)} {got.dtype}" if isinstance(got, torch.Tensor) else type(got).__name__
            self.input_problems[n.name] = (f"{logged.source} is {what}, the graph input {tuple(value.shape)} "
                                           f"{value.dtype}: representative input used")
            return value
        self.inputs_from_runtime[n.name] = logged.source
        self.inputs_agree[n.name] = bool(torch.equal(got, value))
        return got.clone()


def _rms_of(value: object) -> float:
    if isinstance(value, torch.Tensor) and value.numel() and value.is_floating_point():
        return float(value.detach().double().pow(2).mean().sqrt())
    return 0.0
