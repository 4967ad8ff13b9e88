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

Values live only as long as torch.fx's interpreter keeps them (``garbage_collect_values``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import SupportsInt, cast

import torch
from torch.fx import Interpreter

from numdiff._core.etrecord import ETRecordLike
from numdiff.culprits._inputs import LoggedInput
from numdiff.culprits._noise import Noise, op_type, reduction_length
from numdiff.culprits._rounding import TieMargin, carried, dynamic_rounding, tie_margin
from numdiff.errors import CaptureError, NumdiffError

__all__ = ["Lineage", "ReplayInterpreter", "graph_args", "lineage", "quant_noise"]

OnPaired = Callable[[torch.fx.Node, object, tuple[object, ...], dict[str, object], Noise], object]

_QUANTIZE = frozenset({"quantize_per_tensor", "quantize_per_channel"})
_DEQUANTIZE = frozenset({"dequantize_per_tensor", "dequantize_per_channel"})
#: Quantize and dequantize ops whose scale may be computed at run time (dynamic quantization).
_ANY_QUANTIZE = _QUANTIZE | {"quantize_per_token"}
_ANY_DEQUANTIZE = _DEQUANTIZE | {"dequantize_per_token"}


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a paired node's inputs come from, found by walking back through unlogged nodes.

    Attributes:
        producers: Paired nodes it consumes, as ``(node name, element index or None)``.
        graph_inputs: Graph inputs (placeholders) it consumes, directly or through unlogged nodes.
        replayed: Unlogged call nodes replayed with it (the rest of its group or delegate).
    """

    producers: tuple[tuple[str, int | None], ...] = ()
    graph_inputs: tuple[str, ...] = ()
    replayed: tuple[str, ...] = field(default=())


def lineage(graph: torch.fx.Graph, paired: set[str]) -> dict[str, Lineage]:
    """The :class:`Lineage` of every paired node of ``graph``."""
    out: dict[str, Lineage] = {}
    for node in graph.nodes:
        if node.name not in paired:
            continue
        producers: list[tuple[str, int | None]] = []
        inputs: list[str] = []
        replayed: list[str] = []
        seen: set[str] = set()
        stack: list[tuple[torch.fx.Node, int | None]] = [(a, None) for a in node.all_input_nodes]
        while stack:
            arg, element = stack.pop()
            key = f"{arg.name}/{element}"
            if key in seen:
                continue
            seen.add(key)
            if arg.name in paired:
                producers.append((arg.name, element))
            elif arg.op == "placeholder":
                inputs.append(arg.name)
            elif arg.op == "call_function":
                if "getitem" in str(getattr(arg.target, "__name__", arg.target)) and len(arg.args) == 2 \
                        and isinstance(arg.args[0], torch.fx.Node) and isinstance(arg.args[1], int):
                    stack.append((arg.args[0], arg.args[1]))
                    continue
                replayed.append(arg.name)
                stack.extend((a, None) for a in arg.all_input_nodes)
        out[node.name] = Lineage(tuple(dict.fromkeys(producers)), tuple(dict.fromkeys(inputs)),
                                 tuple(dict.fromkeys(replayed)))
    return out


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
    """

    def __init__(self, module: torch.fx.GraphModule, paired: set[str], on_paired: OnPaired,
                 logged_inputs: Mapping[str, LoggedInput] | None = None,
                 inputs_from_runtime: dict[str, str] | None = None) -> None:
        super().__init__(module, garbage_collect_values=True)
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
            return self._call(n)
        finally:
            for gone in self.user_to_last_uses.get(n, ()):
                self._since.pop(gone.name, None)
                self._ties.pop(gone.name, None)
                self._carried.pop(gone.name, None)
                self._dynamic.discard(gone.name)

    def _call(self, n: torch.fx.Node) -> object:
        try:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            result = self.call_function(n.target, args, kwargs)
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
        noise = self._carry(n, kind, args)
        if n.name not in self._paired:
            self._reduction[n.name] = length
            if rounds:
                self._rounded.add(n.name)
            if noise:
                self._carried[n.name] = noise
            return result
        self._since[n.name] = frozenset()  # its consumers read the runtime's value: nothing rounded since
        self._ties.pop(n.name, None)
        step, axis, zero_point = quant_noise(n.target, args, kwargs)
        tie = None if pending_tie is None else pending_tie()
        return self._on_paired(n, result, args, kwargs, Noise(length, step, axis, zero_point, rounds, tie, noise))

    def _carry(self, n: torch.fx.Node, kind: str, args: tuple[object, ...]) -> float:
        """The rounding noise ``n``'s value carries from dynamic quantization since the last paired values."""
        if kind in _ANY_QUANTIZE and len(n.args) > 1 and isinstance(n.args[1], torch.fx.Node) and n.name in self._since:
            self._dynamic.add(n.name)  # a run value rounded onto a grid computed at run time
        source = n.args[0] if n.args else None
        if kind in _ANY_DEQUANTIZE and isinstance(source, torch.fx.Node) and source.name in self._dynamic:
            return dynamic_rounding(self._carried.get(source.name, 0.0), args[1] if len(args) > 1 else None)
        sigmas = tuple(self._carried.get(a.name, 0.0) if isinstance(a, torch.fx.Node) else 0.0 for a in n.args)
        return carried(kind, args, sigmas)

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
        if len(since) == 1 and kind == "quantize_per_tensor" and args:
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
