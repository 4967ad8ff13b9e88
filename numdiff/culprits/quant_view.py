"""The quantization view: which layers lose accuracy *because they were quantized*.

``find_culprits(float_program=...)`` runs the usual replay of the (quantized) reference graph on
the runtime's values and, in the same pass, runs every *layer* (a compute op of the quantized
graph that has a counterpart in the float program) a second time with the float program's op and
weights on the same dequantized runtime inputs. The layer's **quantization cost** is the SNR of
the *deployed* output (the runtime's value of the layer, or of the quantize/dequantize pair right
after it, dequantized) against that float output: weight quantization, output quantization and
kernel differences together, with the inherited error taken out (both see the same inputs).

Layers are matched between the two graphs by ``(innermost module path, op type, occurrence)``.

Suggested layers to keep in higher precision (rule, first order): the relative noise power
``1 / SNR`` of every layer is assumed to reach the model's output unchanged and to add up, so the
model's output SNR is estimated as ``-10 log10(sum of relative noise powers)``. Layers are taken
greedily, costliest first, until the estimate over the remaining layers meets ``target_snr_db``
(default 30 dB). The estimate is a ranking aid, not a prediction: amplification through later
layers (a softmax, a normalization) is not modelled.

``float_program`` is an ``ExportedProgram``, or the path of a second ETRecord (its
``exported_program`` is read with numdiff's hardened loader). A ``.pt2`` archive is refused:
``torch.export.load`` would have to unpickle or resolve parts of an untrusted file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from numdiff.comparators import snr_db
from numdiff.comparators.numerics import finite_difference_sums
from numdiff.culprits._inputs import LoggedInput
from numdiff.culprits._noise import DEFAULT_THRESHOLDS, op_type
from numdiff.culprits._replay import OnPaired, ReplayInterpreter
from numdiff.errors import MissingDataError, UsageError

if TYPE_CHECKING:
    import pandas as pd

#: The float model: its ``ExportedProgram``, a ``.pt2`` archive or the path of its ETRecord.
FloatProgram = torch.export.ExportedProgram | str | os.PathLike[str]

__all__ = ["DEFAULT_TARGET_SNR_DB", "QuantLayer", "QuantReplay", "QuantizationView", "layer_cost",
           "load_float_program", "rank"]

#: Output SNR (dB) the suggested keep-in-float list aims for.
DEFAULT_TARGET_SNR_DB = 30.0

_QDQ = frozenset({"quantize_per_tensor", "quantize_per_channel", "dequantize_per_tensor",
                  "dequantize_per_channel", "choose_qparams", "quantize_per_token", "dequantize_per_token"})
_SKIP = frozenset({"getitem", "_assert_tensor_metadata", "alloc", "sym_size"})


@dataclass(frozen=True, slots=True)
class QuantLayer:
    """One layer's quantization cost.

    Attributes:
        layer: ``module path / op type #occurrence`` (the key matched between the two graphs).
        node: The quantized graph's node.
        float_node: The float program's node.
        deployed_node: The node whose (runtime) value is the deployed output.
        module_path: Innermost module path.
        snr_db: SNR of the deployed output against the float op on the same inputs.
        rel_noise: ``noise power / signal power`` (``10 ** (-snr_db / 10)``).
        from_runtime: True when the deployed output is a value the runtime logged.
        keep_in_float: In the suggested list of layers to keep in higher precision.
        note: Why a figure is missing, or where a value came from.
    """

    layer: str
    node: str
    float_node: str
    deployed_node: str
    module_path: str
    snr_db: float
    rel_noise: float
    from_runtime: bool
    keep_in_float: bool = False
    note: str | None = None


@dataclass(frozen=True, slots=True)
class QuantizationView:
    """Layers ranked by quantization cost (costliest first), and the suggested keep list.

    Attributes:
        layers: Ranked layers (lowest SNR first; layers without a figure last).
        target_snr_db: The output SNR the suggestion aims for.
        estimated_snr_db: First-order output SNR with every layer quantized.
        suggested_snr_db: Likewise with the suggested layers in float.
        unmatched: Float-program compute nodes with no counterpart in the quantized graph.
        notes: Remarks.
    """

    layers: tuple[QuantLayer, ...]
    target_snr_db: float
    estimated_snr_db: float
    suggested_snr_db: float
    unmatched: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def suggested_keep(self) -> list[str]:
        """Layers suggested to stay in higher precision, costliest first."""
        return [layer.layer for layer in self.layers if layer.keep_in_float]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per layer, ranked (columns: the :class:`QuantLayer` fields plus ``rank``)."""
        import pandas as pd

        columns = ["rank", "layer", "module_path", "node", "float_node", "deployed_node", "snr_db", "rel_noise",
                   "from_runtime", "keep_in_float", "note"]
        return pd.DataFrame([{"rank": i, **{c: getattr(r, c) for c in columns[1:]}} for i, r in enumerate(self.layers)],
                            columns=columns)

    def __str__(self) -> str:
        lines = [f"quantization view: {len(self.layers)} layers, estimated output SNR "
                 f"{_fmt(self.estimated_snr_db)} dB (target {_fmt(self.target_snr_db)} dB)"]
        for i, layer in enumerate(self.layers[:5]):
            lines.append(f"  {i + 1}. {layer.layer}: {_fmt(layer.snr_db)} dB" + (" [keep]" if layer.keep_in_float else ""))
        keep = self.suggested_keep
        lines.append(("keep in higher precision: " + ", ".join(keep) + f" (estimate {_fmt(self.suggested_snr_db)} dB)")
                     if keep else "no layer needs to stay in higher precision for the target")
        return "\n".join(lines)


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.3g}"


def load_float_program(float_program: FloatProgram) -> torch.export.ExportedProgram:
    """The float program from an ``ExportedProgram``, a ``.pt2`` archive or an ETRecord path.

    A ``.pt2`` archive (``torch.export.save``) is read by :func:`numdiff.schema.pt2.load_pt2`, with
    the ETRecord reader's checks, never by ``torch.export.load``.

    Raises:
        UsageError: Another kind of object.
        MissingDataError: The ETRecord holds no ``exported_program``.
        ETRecordError, ProgramArchiveError: The file cannot be read.
    """
    if isinstance(float_program, torch.export.ExportedProgram):
        return float_program
    if not isinstance(float_program, (str, os.PathLike)):
        raise UsageError(f"float_program must be an ExportedProgram, a .pt2 archive or the path of an ETRecord, "
                         f"not {type(float_program).__name__}")
    path = os.fspath(float_program)
    if path.endswith(".pt2"):
        from numdiff.schema.pt2 import load_pt2

        return load_pt2(path)
    from numdiff.schema.etrecord import parse_etrecord

    program = parse_etrecord(path).exported_program
    if not isinstance(program, torch.export.ExportedProgram):
        raise MissingDataError(f"{path}: the ETRecord holds no exported_program, so it gives no float program\n"
                               "Write the float model's ETRecord from its torch.export program (generate_etrecord=True).")
    return program


def _short_path(path: str) -> str:
    return path.replace("L['self'].", "").replace("L__self___", "").replace("L['self']", "")


def _layers(graph_module: torch.fx.GraphModule) -> dict[str, torch.fx.Node]:
    """``{module path / op type #k: node}`` of the compute nodes (no quantize/dequantize)."""
    from numdiff.gap import module_paths

    paths = module_paths(graph_module)
    out: dict[str, torch.fx.Node] = {}
    counts: dict[tuple[str, str], int] = {}
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        kind = op_type(node.target)
        if kind in _QDQ or kind in _SKIP:
            continue
        path = _short_path(paths.get(node.name, ""))
        k = counts.get((path, kind), 0)
        counts[(path, kind)] = k + 1
        out[f"{path or '<root>'}/{kind}" + (f"#{k}" if k else "")] = node
    return out


def _float_constants(program: torch.export.ExportedProgram) -> dict[str, Any]:
    """``{placeholder name: value}`` of the float program's parameters, buffers and constants."""
    sig = program.graph_signature
    values: dict[str, Any] = {}
    for mapping in (sig.inputs_to_parameters, sig.inputs_to_buffers, sig.inputs_to_lifted_tensor_constants):
        for name, target in mapping.items():
            if target in program.state_dict:
                values[name] = program.state_dict[target]
            elif target in program.constants:
                values[name] = program.constants[target]
    return values


@dataclass(slots=True)
class _Pending:
    key: str
    node: str
    float_node: str
    value: Any


class QuantReplay(ReplayInterpreter):
    """The culprit replay, also running each matched layer's float op on the same inputs."""

    def __init__(self, module: torch.fx.GraphModule, paired: set[str], on_paired: OnPaired,
                 logged_inputs: Mapping[str, LoggedInput] | None, float_program: torch.export.ExportedProgram,
                 target_snr_db: float = DEFAULT_TARGET_SNR_DB, inputs_from_runtime: dict[str, str] | None = None,
                 xnnpack_nodes: frozenset[str] = frozenset(), tie_allowance: float = DEFAULT_THRESHOLDS.expected,
                 shared: Mapping[str, str] | None = None) -> None:
        super().__init__(module, paired, on_paired, logged_inputs, inputs_from_runtime, xnnpack_nodes, tie_allowance,
                         shared)
        self._target = target_snr_db
        quant_layers = _layers(module)
        float_layers = _layers(float_program.graph_module)
        self._float_values = _float_constants(float_program)
        self._float_of = {q.name: (key, float_layers[key]) for key, q in quant_layers.items() if key in float_layers}
        self._unmatched = tuple(k for k in float_layers if k not in quant_layers)
        self._deployed = {name: self._deployed_node(module.graph, name) for name in self._float_of}
        self._pending: dict[str, list[_Pending]] = {}
        self._results: list[QuantLayer] = []

    def _deployed_node(self, graph: torch.fx.Graph, name: str) -> str:
        node = next(n for n in graph.nodes if n.name == name)
        while node.name not in self._paired:
            users = list(node.users)
            if len(users) != 1 or op_type(users[0].target) not in _QDQ:
                break
            node = users[0]
        return str(node.name)

    def run_node(self, n: torch.fx.Node) -> object:
        pending = None
        if n.name in self._float_of:
            key, float_node = self._float_of[n.name]
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            value, why = self._float_op(float_node, n, args, kwargs)
            if value is None:
                self._results.append(QuantLayer(key, n.name, float_node.name, self._deployed[n.name], key.rsplit("/", 1)[0],
                                                math.nan, math.nan, False, note=why))
            else:
                pending = _Pending(key, n.name, float_node.name, value)
                self._pending.setdefault(self._deployed[n.name], []).append(pending)
        result = super().run_node(n)
        for item in self._pending.pop(n.name, []):
            self._score(item, n.name, result)
        return result

    def _float_op(self, float_node: torch.fx.Node, node: torch.fx.Node, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> tuple[Any, str | None]:
        """The float op on the quantized op's (substituted) activation inputs and the float weights."""
        def pick(float_arg: object, quant_arg: object, value: object) -> object:
            if isinstance(float_arg, torch.fx.Node):
                if float_arg.name in self._float_values:
                    return self._float_values[float_arg.name]
                if isinstance(quant_arg, torch.fx.Node):
                    return value
                raise LookupError(f"float input {float_arg.name} has no counterpart in {node.name}")
            if isinstance(float_arg, (list, tuple)) and isinstance(quant_arg, (list, tuple)) \
                    and len(float_arg) == len(quant_arg) and isinstance(value, (list, tuple)):
                return type(float_arg)(pick(f, q, v) for f, q, v in zip(float_arg, quant_arg, value, strict=True))
            return float_arg

        try:
            fargs = tuple(pick(f, node.args[i] if i < len(node.args) else None, args[i] if i < len(args) else None)
                          for i, f in enumerate(float_node.args))
            fkwargs = {k: pick(v, node.kwargs.get(k), kwargs.get(k)) for k, v in float_node.kwargs.items()}
            with torch.no_grad():
                return float_node.target(*fargs, **fkwargs), None  # type: ignore[operator]
        except Exception as e:  # the float op did not accept the quantized graph's inputs
            return None, f"float op not replayed: {type(e).__name__}: {e}"

    def _score(self, item: _Pending, deployed: str, value: object) -> None:
        note = None
        from_runtime = deployed in self._paired
        if not from_runtime:
            note = "the runtime logged no output here: the quantized graph's replay is the deployed value"
        snr, rel, why = layer_cost(item.value, value)
        note = why or note
        self._results.append(QuantLayer(item.key, item.node, item.float_node, deployed, item.key.rsplit("/", 1)[0],
                                        snr, rel, from_runtime, note=note))

    def view(self) -> QuantizationView:
        """The ranked layers and the suggestion (call after ``run``)."""
        return rank(self._results, self._target, self._unmatched)


def layer_cost(float_value: object, deployed: object) -> tuple[float, float, str | None]:
    """``(SNR dB, relative noise power, why-not)`` of the deployed output against the float op's.

    The SNR is :func:`numdiff.comparators.snr_db`, the gap table's. Identical outputs (zero noise)
    are handled here, explicitly: they cost nothing (``+inf`` dB, relative noise 0), all-zero
    ones included, where the SNR formula alone gives NaN (0/0) and would drop the layer from the
    ranking.
    """
    if not (isinstance(deployed, torch.Tensor) and isinstance(float_value, torch.Tensor)
            and deployed.shape == float_value.shape and deployed.is_floating_point()):
        return math.nan, math.nan, "deployed and float outputs differ in shape or dtype, or hold NaN/Inf"
    sums = finite_difference_sums(float_value, deployed, need_l1=False)
    if sums is None:
        return math.nan, math.nan, "deployed and float outputs differ in shape or dtype, or hold NaN/Inf"
    signal, noise, _, _ = sums
    if noise == 0:  # identical: no quantization cost, whatever the signal
        return math.inf, 0.0, None
    return snr_db(signal, noise), (noise / signal if signal > 0 else math.inf), None


def rank(layers: list[QuantLayer], target_snr_db: float, unmatched: tuple[str, ...] = ()) -> QuantizationView:
    """Rank ``layers`` by cost and mark the greedy keep-in-float list (see the module docstring)."""
    from dataclasses import replace

    scored = sorted((r for r in layers if not math.isnan(r.rel_noise)), key=lambda r: -r.rel_noise)
    rest = [r for r in layers if math.isnan(r.rel_noise)]

    def estimate(rels: list[float]) -> float:
        total = sum(rels)
        return math.inf if total == 0 else -10 * math.log10(total)

    rels = [r.rel_noise for r in scored]
    everything = estimate(rels)
    keep = 0
    while keep < len(rels) and estimate(rels[keep:]) < target_snr_db:
        keep += 1
    ranked = tuple([replace(r, keep_in_float=i < keep) for i, r in enumerate(scored)] + rest)
    notes = (f"{len(rest)} layer(s) without a figure (see note)",) if rest else ()
    return QuantizationView(ranked, target_snr_db, everything, estimate(rels[keep:]), unmatched, notes)
