"""Scoring for :func:`~numdiff.culprits.find.find_culprits`: one row per replayed pair.

The accumulated error (AOT from the start vs runtime), the local error (the op replayed on the
runtime's inputs vs runtime) in noise units, the verdict, the amplification over the producers,
the user's source line and the op's latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from typing import cast

import torch

from numdiff._core.stack import user_frame
from numdiff._core.types import DebugHandle
from numdiff.comparators.numerics import finite_difference_sums
from numdiff.align import (
    AlignedPair,
    AlignmentReport,
    MatchKind,
    OpNameIndex,
    find_op_names,
)
from numdiff.comparators import NumericalComparatorBase, SNRComparator, snr_db
from numdiff.culprits._checks import accumulated_units, replay_problem
from numdiff.culprits._delegates import delegate_location, describe_delegate
from numdiff.culprits._input_fit import FitCase
from numdiff.culprits._measure import Sums, any_nonfinite, as_runtime_layout, noise_units, relative_error
from numdiff.culprits._noise import Noise, Thresholds, Verdict, op_type
from numdiff.culprits._lineage import Lineage
from numdiff.culprits._rounding import judged_off, off_tie
from numdiff.culprits.report import CulpritRow, NonFinite
from numdiff.gap import stack_traces_for

#: Op types whose output depends on an input's shape only: agreeing, they confirm nothing about its values.
_SHAPE_ONLY = frozenset({"zeros_like", "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full",
                         "new_empty", "sym_size", "sym_numel", "scalar_tensor"})


def _culprit(verdict: Verdict, producers: list[CulpritRow]) -> tuple[bool, list[str]]:
    """Whether a row is a culprit: beyond noise while none of the rows it consumes is, and every one of
    them compared. Also the producers that could not be compared when they alone decide it is not."""
    if not verdict.beyond_noise or any(r.verdict.beyond_noise for r in producers):
        return False, []
    unknown = [r.node for r in producers if r.verdict is Verdict.UNMATCHED]
    return not unknown, unknown


def _units(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3g}"


#: Called with each runtime output once its row is written (lets a memory-mapped buffer go).
Release = Callable[[object], None]
#: Event durations by debug-handle id: ``id -> [(handle ids, avg, event id)]``.
Latencies = Mapping[int, list[tuple[frozenset[int], float, int]]]


@dataclass(slots=True)
class Planned:
    """One aligned pair waiting for its node to run."""

    pair: AlignedPair
    element: int | None
    accumulated: float = math.nan
    acc_rel: float = math.nan
    acc_rms: float = math.nan
    acc_notes: list[str] = field(default_factory=list)


#: ``Meter.measure``'s ``sums`` when they are still to be computed.
_NOT_YET = object()


class Meter:
    """The chosen metric over one pair: the comparator's gap, from shared float64 sums when it is SNR."""

    def __init__(self, comparator: NumericalComparatorBase, aot_names: Mapping[DebugHandle, list[str]],
                 runtime_names: Mapping[DebugHandle, list[str]]) -> None:
        # indexed: every row is named from them (a scan of every handle per row was quadratic)
        self.comparator = comparator
        self.aot_names = aot_names if isinstance(aot_names, OpNameIndex) else OpNameIndex(aot_names)
        self.runtime_names = runtime_names if isinstance(runtime_names, OpNameIndex) else OpNameIndex(runtime_names)

    @property
    def sums_alone(self) -> bool:
        """Whether :meth:`measure` reads nothing but the float64 sums when they exist (the built-in SNR):
        other metrics read both tensors again."""
        return type(self.comparator) is SNRComparator

    @staticmethod
    def sums_of(aot: object, runtime: object) -> Sums | None:
        """The float64 sums of a pair of tensors of one shape (None: not such a pair, or not all finite)."""
        return finite_difference_sums(aot, runtime, need_l1=False) \
            if isinstance(aot, torch.Tensor) and isinstance(runtime, torch.Tensor) and aot.shape == runtime.shape \
            else None

    def measure(self, pair: AlignedPair, aot: object, runtime: object, notes: list[str],
                what: str, sums: Sums | None | object = _NOT_YET) -> tuple[float, Sums | None]:
        """The comparator's gap and, when all values are finite, the float64 sums behind it.

        The built-in SNR comparator's number is made from the same sums (one pass, not two).
        ``sums``: the pair's :meth:`sums_of`, when already computed.
        """
        known = self.sums_of(aot, runtime) if sums is _NOT_YET else cast("Sums | None", sums)
        if known is not None and self.sums_alone:
            signal, noise, _, count = known
            return snr_db(signal / count, noise / count), known
        return self._gap(pair, aot, runtime, notes, what), known

    def _gap(self, pair: AlignedPair, aot: object, runtime: object, notes: list[str], what: str) -> float:
        single = AlignmentReport((AlignedPair(pair.aot_handle, aot, pair.runtime_handle, runtime,
                                              pair.match if pair.match is not None else MatchKind.DIRECT),))
        table = self.comparator.compare_aligned(single, self.aot_names, self.runtime_names)
        if not table.rows:
            notes.append(f"{what} gap not computed: " + "; ".join(n.detail for n in table.notes))
            return math.nan
        row = table.rows[0]
        if row.note:
            notes.append(f"{what}: {row.note}")
        value = float(row.gap[0]) if row.gap else math.nan
        return value


def dequantize_params(graph: torch.fx.Graph) -> dict[DebugHandle, Noise]:
    """``{handle: its scale and zero point}`` for the captured per-tensor dequantize nodes with literal parameters."""
    from numdiff.capture import handle_key, is_captured_node
    from numdiff.capture.nodes import DEBUG_HANDLE_KEY

    out: dict[DebugHandle, Noise] = {}
    for node in graph.nodes:
        if not is_captured_node(node) or op_type(node.target) != "dequantize_per_tensor" or len(node.args) < 3:
            continue
        scale, zero_point = node.args[1], node.args[2]
        if isinstance(scale, float) and isinstance(zero_point, int) and not isinstance(zero_point, bool):
            out[handle_key(node.meta[DEBUG_HANDLE_KEY])] = Noise(quant_step=scale, zero_point=float(zero_point))
    return out


def score_accumulated(items: list[Planned], meter: Meter, release: Release | None,
                      dequantize: Mapping[DebugHandle, Noise] | None = None) -> None:
    """Score every planned pair's AOT output against the runtime's, then drop the AOT output.

    ``dequantize`` gives the scale and zero point of the per-tensor dequantize each AOT handle keeps:
    a delegate that hands its quantized output to the next delegate logs integers where the AOT
    value is the dequantized one, and is compared dequantized, as the local error is.
    """
    for item in items:
        pair = item.pair
        runtime, _ = as_runtime_layout(pair.runtime_output, pair.aot_output,
                                       None if dequantize is None else dequantize.get(pair.aot_handle))
        item.accumulated, sums = meter.measure(pair, pair.aot_output,
                                               pair.runtime_output if runtime is None else runtime,
                                               item.acc_notes, "accumulated")
        if runtime is not None:
            item.acc_rel = relative_error(pair.aot_output, runtime, sums)
        if sums is not None and sums[3]:
            item.acc_rms = math.sqrt(sums[1] / sums[3])
        item.pair = replace(pair, aot_output=None)
        if release is not None:
            release(pair.runtime_output)


class Scorer:
    """Scores each paired node as the replay reaches it and decides what to substitute.

    Args:
        meter: The metric.
        limits: Thresholds by op type (``"default"`` and ``"quantized"`` included).
        lineages: Each paired node's :class:`Lineage`.
        stack_traces: ``{handle: {op: stack trace}}``.
        module_paths: ``{node name: module path}``.
        latencies: Event durations by debug-handle id.
        plan: The aligned pairs waiting for each paired node.
        release: Called with each runtime output once its row is written.
        unreliable: Runtime handles not to substitute, with the reason.
        supplied: Graph inputs given as the step's own inputs.
        inputs_from_runtime: Graph inputs the replay takes from the runtime, with their source (the
            replay's own mapping, filled as it runs).
        inputs_unknown: This run's graph inputs are unknown (a later run without step inputs): a
            row that reads a graph input the runtime did not log gets no verdict.
        delegates: Backend and call index of each delegate call, by its handle ids.
        first_index: The first row's index (a method's rows are numbered on from the previous method's).
        aot_inputs: Where graph inputs the runtime did not log come from, when not the ETRecord's
            representative inputs (a method's example inputs, see :mod:`numdiff.gap.methods`).
        sums_pool: A one-thread pool for the local error's float64 sums: a node's sums are then
            taken there while the replay computes the next node, and its rows are written when the
            replay reaches the next paired node (call :meth:`flush` after the run). Only for graphs
            that change no value in place (a later node could change the replayed value meanwhile).
    """

    def __init__(self, meter: Meter, limits: Mapping[str, Thresholds], lineages: Mapping[str, Lineage],
                 stack_traces: Mapping[DebugHandle, Mapping[str, str | None]], module_paths: Mapping[str, str],
                 latencies: Latencies, plan: dict[str, list[Planned]], release: Release | None, *,
                 unreliable: Mapping[DebugHandle, str], supplied: frozenset[str],
                 inputs_from_runtime: dict[str, str], inputs_unknown: bool = False,
                 delegates: Mapping[frozenset[int], tuple[str, int]] | None = None, first_index: int = 0,
                 aot_inputs: str | None = None, sums_pool: Executor | None = None) -> None:
        self.meter, self.limits, self.lineages, self.stack_traces = meter, limits, lineages, stack_traces
        self.module_paths, self.latencies, self.plan, self.release = module_paths, latencies, plan, release
        self.unreliable, self.supplied, self.inputs_from_runtime = unreliable, supplied, inputs_from_runtime
        self.inputs_unknown = inputs_unknown
        self.delegates = delegates or {}
        self.first_index, self.aot_inputs = first_index, aot_inputs
        self.sums_pool = sums_pool
        #: Rows of the last paired node, written when the replay reaches the next one (or at :meth:`flush`).
        self._waiting: list[Callable[[], None]] = []
        self.rows: list[CulpritRow] = []
        self.by_node: dict[tuple[str, int | None], list[int]] = {}
        self.substituted: dict[tuple[str, int | None], bool] = {}
        self.transforms: dict[str, str] = {}
        self.acc_rel: dict[int, float] = {}
        #: ``rms(replay - runtime) / rms(replay)`` per row (NaN when not compared).
        self.local_rel: dict[int, float] = {}
        #: Rows whose runtime tensor holds another number of elements than the replay's, and the shapes.
        self.unsized: dict[int, str] = {}
        self.first_nonfinite: NonFinite | None = None
        self.model_nonfinite: NonFinite | None = None
        #: Graph inputs a delegate logged whose value could not be used, and why (set by the replay).
        self.input_problems: Mapping[str, str] = {}
        self._targets: dict[str, str] | None = None
        #: Rows that read graph inputs from the representative inputs (not logged, not supplied): which.
        self.representative_reads: dict[int, tuple[str, ...]] = {}
        #: Graph inputs a judged row's verdict rests on without confirmation (see :meth:`settle_inputs`).
        self.assumed: list[str] = []
        #: Rows reading representative inputs whose output is quantized: their agreement confirms an
        #: input only to within a quantization step (see :meth:`settle_inputs`).
        self.coarse_readers: set[int] = set()
        #: Rows beyond noise that read a representative input directly: can an input change explain them?
        self.fit_cases: dict[int, FitCase] = {}

    def on_paired(self, node: torch.fx.Node, replay: object, args: tuple[object, ...], kwargs: dict[str, object],
                  noise: Noise) -> object:
        self.flush()  # the node before's rows first: rows stay in graph order
        planned = self.plan.pop(node.name)
        out = list(replay) if isinstance(replay, (list, tuple)) else None
        replayed_out = tuple(out) if out is not None else ()
        replayed = replay
        for item in planned:
            element = item.element
            # Each runtime value the node is paired with (a delegate may return one value twice: as
            # int8 for the next delegate and dequantized for a portable op) is judged against the
            # node's replay, never against what an earlier pair substituted.
            value = replayed if out is None or element is None else replayed_out[element]
            runtime_value, transform = as_runtime_layout(item.pair.runtime_output, value, noise)
            if item.pair.runtime_handle in self.unreliable:
                runtime_value, transform = None, self.unreliable[item.pair.runtime_handle]
            self.transforms[f"{node.name}/{element}"] = transform
            self._write(node, item, value, runtime_value, transform, noise, args, kwargs)
            ok = runtime_value is not None
            if runtime_value is not None and self.release is not None:
                runtime_value = runtime_value.clone()  # a private copy: the buffer's pages can go now
            self.substituted[(node.name, element)] = ok
            if ok and out is not None and element is not None:
                out[element] = runtime_value
            elif ok and out is None:
                replay = runtime_value
            if self.release is not None and self.sums_pool is None:  # with a pool: once its sums are taken
                self.release(item.pair.runtime_output)
        if out is not None:
            return type(replay)(out) if isinstance(replay, tuple) else out
        return replay

    def _write(self, node: torch.fx.Node, item: Planned, value: object, runtime: torch.Tensor | None, transform: str,
               noise: Noise, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        """Write the pair's row now, or, with a sums pool, once its sums are taken there (see ``sums_pool``)."""
        if self.sums_pool is None:
            self._row(node, item, value, runtime, transform, noise, args, kwargs, _NOT_YET)
            return
        compare = runtime if runtime is not None else item.pair.runtime_output  # as _row compares
        future: Future[Sums | None] = self.sums_pool.submit(Meter.sums_of, value, compare)

        def write() -> None:
            self._row(node, item, value, runtime, transform, noise, args, kwargs, future.result())
            if self.release is not None:
                self.release(item.pair.runtime_output)

        self._waiting.append(write)

    def flush(self) -> None:
        """Write the rows still waiting for their sums (see ``sums_pool``)."""
        waiting, self._waiting = self._waiting, []
        for write in waiting:
            write()

    def _producer_rows(self, lin: Lineage) -> list[int]:
        rows: list[int] = []
        for name, element in lin.producers:
            rows += self.by_node.get((name, element), []) or (
                [i for (n, _), idx in self.by_node.items() if n == name for i in idx] if element is None else [])
        return sorted(set(rows))

    def _row(self, node: torch.fx.Node, item: Planned, replay: object, runtime: torch.Tensor | None, transform: str,
             noise: Noise, args: tuple[object, ...], kwargs: dict[str, object], sums: Sums | None | object) -> None:
        pair, index = item.pair, self.first_index + len(self.rows)
        notes: list[str] = []
        logged = pair.runtime_output
        if isinstance(logged, torch.Tensor) and isinstance(replay, torch.Tensor) and logged.numel() != replay.numel():
            self.unsized[index] = f"runtime shape {tuple(logged.shape)} vs AOT {tuple(replay.shape)}"
        lin = self.lineages.get(node.name, Lineage())
        compare_runtime = runtime if runtime is not None else pair.runtime_output
        local, sums = self.meter.measure(pair, replay, compare_runtime, notes, "local", sums)
        notes += item.acc_notes
        accumulated, acc_rel = item.accumulated, item.acc_rel
        units, nonfinite, replay_nonfinite = math.nan, 0, 0
        if runtime is None:
            notes.append(transform)
        else:
            units, nonfinite, replay_nonfinite, why = noise_units(replay, runtime, noise, sums)
            if why:
                notes.append(why)
        kind = op_type(node.target)
        quantized = isinstance(runtime, torch.Tensor) and noise.quantized(runtime.dtype)
        call = self.delegates.get(frozenset(pair.runtime_handle))
        general = "quantized" if quantized else "default"
        backend = None if call is None or self._dynamic(node, lin, noise) else call[0] + ("/quantized" if quantized else "")
        key = kind if kind in self.limits else backend if backend is not None and backend in self.limits else general
        limits = self.limits[key]
        verdict = limits.verdict(units)
        if nonfinite and not replay_nonfinite:
            verdict = Verdict.BROKEN
        source, sources = self._source(lin, notes)
        representative = tuple(g for g in lin.graph_inputs if g not in self.supplied and g not in self.inputs_from_runtime)
        if representative:
            self.representative_reads[self.first_index + len(self.rows)] = representative
            if quantized:
                self.coarse_readers.add(self.first_index + len(self.rows))
            elif verdict.beyond_noise and call is None and not lin.replayed and isinstance(runtime, torch.Tensor):
                positions = tuple(i for i, a in enumerate(node.args) if isinstance(a, torch.fx.Node)
                                  and a.op == "placeholder" and a.name in representative)
                if positions and callable(node.target):
                    self.fit_cases[self.first_index + len(self.rows)] = FitCase(
                        node.target, args, kwargs, positions, runtime, noise, limits)
        off_grid = False
        if verdict in (Verdict.OK, Verdict.EXPECTED_NOISE) and call is None and source == "runtime" \
                and runtime is not None and isinstance(replay, torch.Tensor):
            why = self._rounding_check(replay, runtime, noise)
            if why is not None:
                verdict, off_grid = Verdict.SUSPICIOUS, True
                notes.append(why)
        unknown_inputs = [g for g in lin.graph_inputs if g not in self.inputs_from_runtime] \
            if self.inputs_unknown else []
        if unknown_inputs:
            local, units, verdict = math.nan, math.nan, Verdict.NOT_JUDGED
            notes.append(f"not judged: graph input(s) {', '.join(unknown_inputs)} of this run were not logged and "
                         "the representative input is another run's; pass step_inputs to judge this op")
        if verdict.beyond_noise and not nonfinite:
            acc_units = accumulated_units(units, sums, item.acc_rms)
            # Off-grid rows are within the noise units by definition: their replay is doubted only when
            # the runtime is much closer to the reference run from the start than to its own replay.
            within = acc_units < units / 2 if off_grid else not limits.verdict(acc_units).beyond_noise
            if replay_nonfinite or (within and not math.isnan(acc_units)):
                verdict = Verdict.REPLAY_MISMATCH
                notes.append(replay_problem(units, acc_units, sources, replay_nonfinite))
        self.local_rel[index] = math.nan if runtime is None or unknown_inputs else relative_error(replay, runtime, sums)
        if replay_nonfinite and not nonfinite and not unknown_inputs:
            self.local_rel[index] = math.inf  # NaN/Inf the runtime's finite output does not have: unrelated
        producers = self._producer_rows(lin)
        own = [self.rows[p - self.first_index] for p in producers]
        culprit, unknown = _culprit(verdict, own)
        if unknown:
            notes.append(f"not called a culprit: producer(s) {', '.join(unknown)} could not be compared, so "
                         "local and inherited error cannot be told apart")
        amplification = self._amplification(acc_rel, producers, notes)
        if nonfinite:
            found = NonFinite(index, node.name, nonfinite, any_nonfinite(args, kwargs), replay_nonfinite)
            # The replay on the same inputs holds the same NaN/Inf at the same places (noise_units is then
            # finite): the model computes them (a -inf attention mask), the device did not make them.
            if math.isfinite(units):  # (after a device-made NaN, its heirs are not the model's own)
                if self.first_nonfinite is None:
                    self.model_nonfinite = self.model_nonfinite or found
            elif self.first_nonfinite is None:
                self.first_nonfinite = found
        aot_ops = find_op_names(pair.aot_handle, self.meter.aot_names)
        traces = stack_traces_for(aot_ops, self.stack_traces)
        inner = traces if call is None else {**stack_traces_for(list(lin.replayed), self.stack_traces), **traces}
        delegate = None if call is None else describe_delegate(call[0], call[1], node, lin.replayed,
                                                               self.module_paths, inner)
        module_path = self.module_paths.get(node.name)
        source_line = user_frame(traces.get(node.name)) or next((user_frame(t) for t in traces.values() if t), None)
        if call is not None:  # the compute ops may be replayed nodes, not the row's own ops: their traces too
            module_path, source_line = delegate_location(node, lin.replayed, self.module_paths, inner)
        self.acc_rel[index] = acc_rel
        self.by_node.setdefault((node.name, item.element), []).append(index)
        self.rows.append(CulpritRow(
            index=index, aot_handle=pair.aot_handle, aot_ops=aot_ops,
            runtime_ops=find_op_names(pair.runtime_handle, self.meter.runtime_names), runtime_handle=pair.runtime_handle,
            node=node.name, element=item.element, op_type=kind, local_gap=local, accumulated_gap=accumulated,
            local_noise_units=units, accumulated_rel=acc_rel, amplification=amplification, verdict=verdict,
            is_culprit=culprit, noise=noise.describe() + (f", {key} limits" if key == backend else ""), input_source=source, producers=tuple(producers),
            replayed_ops=lin.replayed, transform=transform, match=pair.match.value,
            module_path=module_path, source_line=source_line,
            stack_traces=traces, latency=self._latency(pair.runtime_handle), nonfinite=nonfinite,
            note="; ".join(notes) or None, input_sources=sources, delegate=delegate))

    def _dynamic(self, node: torch.fx.Node, lin: Lineage, noise: Noise) -> bool:
        """Whether the row quantizes dynamically (a ``choose_qparams`` op among its nodes) on a grid the
        replay does not compute as the device does: the backends' own limits were measured on static
        quantization and floating point only, so such rows keep the general ones. A row whose every
        dynamic quantization is replayed as XNNPACK computes it (``noise.graph_grid`` False) leaves
        floating-point arithmetic and per-element rounding flips (``noise.bound``): the backend's."""
        if self._targets is None:
            self._targets = {n.name: op_type(n.target) for n in node.graph.nodes if n.op == "call_function"}
        dynamic = any(self._targets.get(name, "").startswith("choose_qparams") for name in (node.name, *lin.replayed))
        return (dynamic and (noise.graph_grid or not noise.dynamic)) or noise.compounded

    def _rounding_check(self, replay: torch.Tensor, runtime: torch.Tensor, noise: Noise) -> str | None:
        """Why the row's one rounding is not an honest one (see :mod:`~numdiff.culprits._rounding`), or None."""
        if noise.tie is None:
            return None
        tolerance = noise.tie.tolerance(self.limits["default"].expected)
        found = off_tie(replay, runtime, noise.quant_step, noise.quant_axis, noise.tie, tolerance)
        if found is None or not judged_off(found[0], found[1]):
            return None
        count, elements, closest = found
        return (f"not rounding: {count} of {elements} elements are a step or more from the replay where the value "
                f"before rounding lay {closest:.3g} steps or more from a rounding tie; a kernel that computes the same "
                f"value and rounds it differently moves only values within {tolerance:.2g} steps of a tie, so this op "
                "computes another value")

    def _amplification(self, acc_rel: float, producers: list[int], notes: list[str]) -> float:
        upstream = [self.acc_rel[p] for p in producers if not math.isnan(self.acc_rel[p])]
        if math.isnan(acc_rel):
            return math.nan
        if not upstream:
            notes.append("amplification: no producer row (inputs are graph inputs)")
            return math.nan
        worst = max(upstream)
        if worst == 0:
            if acc_rel:
                notes.append("amplification: producers carry no accumulated error, this row creates it")
            return math.nan if acc_rel else 1.0
        return acc_rel / worst

    def _source(self, lin: Lineage, notes: list[str]) -> tuple[str, tuple[str, ...]]:
        """``(input_source, one description per input)``; the notes say where graph inputs came from."""
        sources: list[str] = []
        runtime = aot = 0
        for name, element in lin.producers:
            label = name if element is None else f"{name}[{element}]"
            rows = self.by_node.get((name, element)) or self.by_node.get((name, None)) or []
            where = f"row {rows[0]}" if rows else "its row"
            if self.substituted.get((name, element), self.substituted.get((name, None), False)):
                runtime += 1
                sources.append(f"{label}: runtime output ({where})")
            else:
                aot += 1
                sources.append(f"{label}: replayed value ({where} could not be substituted)")
        supplied, logged, representative = [], [], []
        for name in lin.graph_inputs:
            if name in self.supplied:
                runtime += 1
                supplied.append(name)
                sources.append(f"{name}: step_inputs")
            elif name in self.inputs_from_runtime:
                runtime += 1
                logged.append(name)
                sources.append(f"{name}: {self.inputs_from_runtime[name]}")
            else:
                aot += 1
                representative.append(name)
                why = self.input_problems.get(name)
                sources.append(f"{name}: {self.aot_inputs or 'representative input'}" + (f" ({why})" if why else ""))
        if supplied:
            notes.append(f"graph inputs {', '.join(supplied)} taken from step_inputs")
        if logged:
            notes.append(f"graph inputs {', '.join(logged)} taken from what the delegate logged as its inputs ("
                         + "; ".join(f"{g}: {self.inputs_from_runtime[g]}" for g in logged) + ")")
        if representative:
            notes.append(f"graph inputs {', '.join(representative)} taken from "
                         f"{self.aot_inputs or 'the representative inputs'} "
                         "(input_source=aot: the runtime does not log graph inputs)")
        missing = [s.split(":")[0] for s in sources[: len(lin.producers)] if "replayed value" in s]
        if missing:
            notes.append(f"producers {', '.join(missing)} not substituted: replayed values used")
        if not aot:
            return "runtime", tuple(sources)
        return ("runtime+aot" if runtime else "aot"), tuple(sources)

    def _latency(self, handle: DebugHandle) -> float | None:
        ids = set(handle)
        seen: dict[int, float] = {}
        for item in ids:
            for ev_ids, avg, key in self.latencies.get(item, ()):
                if ev_ids <= ids:
                    seen[key] = avg
        return sum(seen.values()) if seen else None
