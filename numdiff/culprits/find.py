"""``find_culprits``: which op is wrong by itself, and which only inherits its inputs' error.

Stages, reusing the gap's: :func:`numdiff.gap.gather` (reference graph run from the start, the
runtime's outputs) → :func:`numdiff.align.align_intermediate_outputs` (pairs, notes) → one replay
pass (:class:`~numdiff.culprits._replay.ReplayInterpreter`) that, node by node, scores the replay
on the runtime's inputs (*local*) and the AOT output (*accumulated*) against the runtime's output
with the chosen comparator, judges the local error against its noise model, and lets go of both
values once the row is written. Culprit: local error beyond noise while no producer's is.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import torch

from numdiff._numerics import finite_difference_sums
from numdiff._types import DebugHandle
from numdiff.align import (
    AlignedPair,
    AlignmentReport,
    EventLike,
    MatchKind,
    RuntimeOutput,
    ShapeRelation,
    align_intermediate_outputs,
    find_op_names,
)
from numdiff.comparators import NumericalComparatorBase, SNRComparator
from numdiff.comparators.snr import _db as snr_db
from numdiff.culprits._matching import explain_matching
from numdiff.culprits._measure import any_nonfinite, as_runtime_layout, noise_units, relative_error
from numdiff.culprits._noise import Noise, Thresholds, ThresholdsArg, Verdict, op_type, resolve_thresholds
from numdiff.culprits._replay import Lineage, ReplayInterpreter, lineage
from numdiff.culprits.report import CulpritReport, CulpritRow, NonFinite
from numdiff.errors import UsageError
from numdiff.gap import gather, stack_traces_for
from numdiff.present.gap_table import HIGHER_IS_BETTER, user_frame

__all__ = ["find_culprits"]


@dataclass(slots=True)
class _Planned:
    """One aligned pair waiting for its node to run."""

    pair: AlignedPair
    element: int | None
    accumulated: float = math.nan
    acc_rel: float = math.nan
    acc_notes: list[str] = field(default_factory=list)


def find_culprits(
    etrecord: Any,
    events: Iterable[EventLike],
    comparator: NumericalComparatorBase,
    *,
    reference_graph: str | None = None,
    thresholds: ThresholdsArg = None,
    disable_debug_handle_validation: bool = False,
    etdump_path: str | None = None,
    release: Callable[[Any], None] | None = None,
    float_program: Any = None,
    target_snr_db: float | None = None,
    decode_steps: bool | None = None,
    step_inputs: Any = None,
    taps: str | os.PathLike[str] | None = None,
    tap_outputs: Any = None,
) -> CulpritReport:
    """Local vs accumulated error for every aligned pair, verdicts and culprits.

    Args:
        etrecord: The parsed ETRecord.
        events: The Inspector's events (all blocks).
        comparator: The metric for ``local_gap`` and ``accumulated_gap``.
        reference_graph: As in ``calculate_numeric_gap``.
        thresholds: A :class:`Thresholds` or ``{op type: Thresholds | dict}`` (see
            :func:`~numdiff.culprits._noise.resolve_thresholds`).
        disable_debug_handle_validation: As in ``calculate_numeric_gap``.
        etdump_path: For messages.
        release: Called with each runtime output once its row is written.
        float_program: The float model's ``ExportedProgram`` or ETRecord path: adds the
            quantization view (``report.quantization``, see :mod:`numdiff.culprits.quant_view`).
        target_snr_db: Output SNR the quantization view's keep-in-float suggestion aims for.
        decode_steps: The runs are the decode steps of one generation: adds ``report.decode``
            (see :mod:`numdiff.culprits.decode`). Implied by ``step_inputs``.
        step_inputs: Each run's input tuple (a list, or a ``torch.save`` file of it): every step
            is analysed on its own inputs.
        taps: Tap sidecar (``numdiff.export_helpers.taps``): adds ``report.inside_delegates``,
            the tapped ops inside delegates replayed on the tapped values (see
            :mod:`numdiff.culprits.taps`); needs ``tap_outputs``.
        tap_outputs: The tapped method's flat outputs (a list, or a ``torch.save`` file of it).

    Raises:
        MissingDataError, MismatchedArtifactsError, UsageError: as ``calculate_numeric_gap``.
        CaptureError: The graph failed on the runtime's values.
    """
    from numdiff.culprits._runs import per_run_figures, run_count

    events = list(events)
    if (taps is None) != (tap_outputs is None):
        raise UsageError("taps and tap_outputs go together: the sidecar says where each tapped value is in the "
                         "method's outputs\nPass both (CLI: --taps and --tap-outputs).")
    quant = None
    if float_program is not None:
        from numdiff.culprits.quant_view import DEFAULT_TARGET_SNR_DB, load_float_program

        quant = (load_float_program(float_program),
                 DEFAULT_TARGET_SNR_DB if target_snr_db is None else float(target_snr_db))

    steps = None
    if step_inputs is not None:
        from numdiff.culprits.decode import load_step_inputs

        steps = load_step_inputs(step_inputs)
        if len(steps) != run_count(events):
            raise UsageError(f"step_inputs has {len(steps)} entries but the ETDump holds {run_count(events)} runs "
                             "of the method\nPass one input tuple per run, in run order (prefill included).")

    def analyse(view: list[EventLike]) -> CulpritReport:
        return _analyse(etrecord, view, comparator, reference_graph, thresholds, disable_debug_handle_validation,
                        etdump_path, release)

    report = _analyse(etrecord, events, comparator, reference_graph, thresholds, disable_debug_handle_validation,
                      etdump_path, release, quant, None if not steps else steps[0])
    if taps is not None:
        from numdiff.culprits.taps import inside_delegates

        report = replace(report, inside_delegates=inside_delegates(etrecord, taps, tap_outputs,
                                                                   resolve_thresholds(thresholds)))
    runs = run_count(events)
    if steps is not None or decode_steps:
        from numdiff.culprits._runs import _RunView, _figures
        from numdiff.culprits.decode import decode_view, output_node

        def analyse_step(run: int, inputs: tuple[Any, ...] | None) -> CulpritReport:
            view = [cast(EventLike, _RunView(ev, run)) for ev in events]
            return _analyse(etrecord, view, comparator, reference_graph, thresholds,
                            disable_debug_handle_validation, etdump_path, release, None, inputs)

        decoded = decode_view(runs, steps, analyse_step, report, output_node(etrecord, report.graph_name))
        figures = tuple(_figures(r, rep, report) for r, rep in enumerate(decoded.per_step)) if runs > 1 else ()
        return replace(report, decode=decoded, runs=figures)
    if runs > 1:
        report = replace(report, runs=per_run_figures(events, runs, report, analyse))
    return report


def _analyse(etrecord: Any, events: list[EventLike], comparator: NumericalComparatorBase,
             reference_graph: str | None, thresholds: ThresholdsArg, disable_debug_handle_validation: bool,
             etdump_path: str | None, release: Callable[[Any], None] | None,
             quant: tuple[Any, float] | None = None, step_input: tuple[Any, ...] | None = None) -> CulpritReport:
    """One run's report (``events`` show that run's values); ``quant`` = (float program, target
    SNR) also runs the quantization view in the same replay."""
    from numdiff.capture import handle_key, is_captured_node, resolve_reference_graph
    from numdiff.capture.nodes import DEBUG_HANDLE_KEY

    limits = resolve_thresholds(thresholds)
    if step_input is not None:  # one decode step's own graph inputs instead of the representative ones
        from numdiff.culprits.decode import WithInputs

        etrecord = WithInputs(etrecord, step_input)
    inputs = gather(etrecord, events, reference_graph=reference_graph,
                    disable_debug_handle_validation=disable_debug_handle_validation, etdump_path=etdump_path)
    alignment = align_intermediate_outputs(inputs.aot_outputs, inputs.runtime_outputs)
    by_handle = _plan_by_handle(inputs.aot_outputs, alignment)
    notes, paired_runtime = alignment.notes, [p.runtime_handle for p in alignment.pairs]
    unreliable = _unreliable_positions(alignment, inputs.runtime_outputs)
    del alignment
    scorer = _Scorer(comparator, inputs.aot_op_names, inputs.runtime_op_names, limits, {},
                     inputs.stack_traces, inputs.module_paths, _latencies(events), {}, release)
    # Accumulated error first, as the gap does, letting go of each AOT output once scored: the
    # replay then holds only the values torch.fx keeps alive (peak memory = the gap's).
    inputs.aot_outputs.clear()
    scorer.score_accumulated([item for items in by_handle.values() for item in items])
    graph_module, _ = resolve_reference_graph(etrecord, inputs.graph_name if reference_graph is None else reference_graph,
                                              disable_debug_handle_validation)
    keeper = {handle_key(n.meta[DEBUG_HANDLE_KEY]): n.name for n in graph_module.graph.nodes if is_captured_node(n)}
    plan: dict[str, list[_Planned]] = {}
    for handle, items in by_handle.items():
        if handle in keeper:
            plan.setdefault(keeper[handle], []).extend(items)
    scorer.plan, scorer.lineages = plan, lineage(graph_module.graph, set(plan))
    scorer.unreliable = unreliable
    logged = _logged_inputs(plan, scorer.lineages, inputs.runtime_outputs)
    replay: ReplayInterpreter
    if quant is None:
        replay = ReplayInterpreter(graph_module, set(plan), scorer.on_paired, logged)
    else:
        from numdiff.culprits.quant_view import QuantReplay

        replay = QuantReplay(graph_module, set(plan), scorer.on_paired, logged, quant[0], quant[1])
    if step_input is not None:
        scorer.supplied = {n.name for n in graph_module.graph.nodes if n.op == "placeholder"}
        replay.inputs_from_runtime.update(scorer.supplied)
    scorer.inputs_from_runtime = replay.inputs_from_runtime
    replay.run(*_as_args(etrecord))
    matching = explain_matching(graph_module.graph, notes, paired_runtime, inputs.runtime_outputs, keeper,
                                {r.node: r.index for r in scorer.rows}, scorer.transforms)
    return CulpritReport(tuple(scorer.rows), type(comparator).__name__, inputs.graph_name, scorer.first_nonfinite,
                         matching, HIGHER_IS_BETTER.get(type(comparator).__name__, False),
                         inputs.notes + tuple(n.detail for n in notes),
                         quantization=getattr(replay, "view", lambda: None)())


def _plan_by_handle(aot_outputs: Mapping[DebugHandle, Any], alignment: AlignmentReport) -> dict[DebugHandle, list[_Planned]]:
    """Aligned pairs by the AOT handle (and element) whose captured output they compare."""
    owner: dict[int, tuple[DebugHandle, int | None]] = {}
    for handle, value in aot_outputs.items():
        if isinstance(value, (list, tuple)):
            owner.update({id(v): (handle, k) for k, v in enumerate(value)})
        owner[id(value)] = (handle, None)
    plan: dict[DebugHandle, list[_Planned]] = {}
    for pair in alignment.pairs:
        found = owner.get(id(pair.aot_output))
        if found is not None:
            plan.setdefault(found[0], []).append(_Planned(pair, found[1]))
    return plan


def _unreliable_positions(alignment: AlignmentReport,
                          runtime_outputs: Mapping[DebugHandle, RuntimeOutput]) -> dict[DebugHandle, str]:
    """Multi-output runtime instructions whose outputs were paired by position and some pair holds a
    different number of elements: the positions do not line up, so none of its pairs is trusted."""
    out: dict[DebugHandle, str] = {}
    for pair in alignment.pairs:
        logged = runtime_outputs.get(pair.runtime_handle)
        if logged is None or logged.num_outputs < 2 or pair.runtime_handle in out:
            continue
        if pair.shape_relation is ShapeRelation.MISMATCH:
            out[pair.runtime_handle] = (
                f"not compared: outputs of this {logged.num_outputs}-output instruction were paired by position "
                "and at least one pair holds a different number of elements, so the positions do not line up")
    return out


def _logged_inputs(plan: Mapping[str, list[_Planned]], lineages: Mapping[str, Lineage],
                   runtime_outputs: Mapping[DebugHandle, RuntimeOutput]) -> dict[str, list[Any]]:
    """Candidate runtime values of each graph input: what delegates that consume it logged as inputs."""
    out: dict[str, list[Any]] = {}
    for name, items in plan.items():
        graph_inputs = lineages[name].graph_inputs if name in lineages else ()
        for item in items if graph_inputs else ():
            logged = runtime_outputs.get(item.pair.runtime_handle)
            data = None if logged is None else logged.data
            if not isinstance(data, (list, tuple)) or logged is None or len(data) <= logged.num_outputs:
                continue
            for placeholder in graph_inputs:
                out.setdefault(placeholder, []).extend(data[: len(data) - logged.num_outputs])
    return out


def _as_args(etrecord: Any) -> list[Any]:
    from numdiff.gap import _representative_inputs

    return [_representative_inputs(etrecord)]


def _latencies(events: list[EventLike]) -> dict[int, list[tuple[frozenset[int], float, int]]]:
    """Event durations indexed by debug-handle id: ``id -> [(handle ids, avg, event id)]``."""
    out: dict[int, list[tuple[frozenset[int], float, int]]] = {}
    for ev in events:
        perf = getattr(ev, "perf_data", None)
        handles = ev.debug_handles
        if perf is None or handles is None or ev.name == "OPERATOR_CALL":
            continue
        ids = frozenset([handles] if isinstance(handles, int) else handles)
        for item in ids:
            out.setdefault(item, []).append((ids, float(perf.avg), id(ev)))
    return out


class _Scorer:
    """Scores each paired node as the replay reaches it and decides what to substitute."""

    def __init__(self, comparator: NumericalComparatorBase, aot_names: Mapping[DebugHandle, list[str]],
                 runtime_names: Mapping[DebugHandle, list[str]], limits: dict[str, Thresholds],
                 lineages: dict[str, Lineage], stack_traces: Mapping[DebugHandle, Mapping[str, str | None]],
                 module_paths: Mapping[str, str], latencies: dict[int, list[tuple[frozenset[int], float, int]]],
                 plan: dict[str, list[_Planned]], release: Callable[[Any], None] | None) -> None:
        self.comparator, self.aot_names, self.runtime_names = comparator, aot_names, runtime_names
        self.limits, self.lineages, self.stack_traces = limits, lineages, stack_traces
        self.module_paths, self.latencies, self.plan, self.release = module_paths, latencies, plan, release
        self.rows: list[CulpritRow] = []
        self.by_node: dict[tuple[str, int | None], list[int]] = {}
        self.substituted: dict[tuple[str, int | None], bool] = {}
        self.transforms: dict[str, str] = {}
        self.acc_rel: dict[int, float] = {}
        self.runtime_nonfinite: set[str] = set()
        self.inputs_from_runtime: set[str] = set()
        self.supplied: set[str] = set()
        self.unreliable: dict[DebugHandle, str] = {}
        self.first_nonfinite: NonFinite | None = None

    def score_accumulated(self, items: list[_Planned]) -> None:
        """Score every planned pair's AOT output against the runtime's, then drop the AOT output."""
        for item in items:
            pair = item.pair
            runtime, _ = as_runtime_layout(pair.runtime_output, pair.aot_output)
            item.accumulated, sums = self._measure(pair, pair.aot_output,
                                                   pair.runtime_output if runtime is None else runtime,
                                                   item.acc_notes, "accumulated")
            if runtime is not None:
                item.acc_rel = relative_error(pair.aot_output, runtime, sums)
            item.pair = replace(pair, aot_output=None)
            if self.release is not None:
                self.release(pair.runtime_output)

    def on_paired(self, node: torch.fx.Node, replay: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  noise: Noise) -> Any:
        planned = self.plan.pop(node.name)
        out = list(replay) if isinstance(replay, (list, tuple)) else None
        for item in planned:
            element = item.element
            value = replay if out is None or element is None else out[element]
            runtime_value, transform = as_runtime_layout(item.pair.runtime_output, value, noise)
            if item.pair.runtime_handle in self.unreliable:
                runtime_value, transform = None, self.unreliable[item.pair.runtime_handle]
            self.transforms[f"{node.name}/{element}"] = transform
            self._row(node, item, value, runtime_value, transform, noise, args, kwargs)
            ok = runtime_value is not None
            if ok and self.release is not None:
                runtime_value = runtime_value.clone()  # a private copy: the buffer's pages can go now
            self.substituted[(node.name, element)] = ok
            if ok and out is not None and element is not None:
                out[element] = runtime_value
            elif ok and out is None:
                replay = runtime_value
            if self.release is not None:
                self.release(item.pair.runtime_output)
        if out is not None:
            return type(replay)(out) if isinstance(replay, tuple) else out
        return replay

    def _producer_rows(self, lin: Lineage) -> list[int]:
        rows: list[int] = []
        for name, element in lin.producers:
            rows += self.by_node.get((name, element), []) or (
                [i for (n, _), idx in self.by_node.items() if n == name for i in idx] if element is None else [])
        return sorted(set(rows))

    def _row(self, node: torch.fx.Node, item: _Planned, replay: Any, runtime: Any, transform: str, noise: Noise,
             args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        pair, index = item.pair, len(self.rows)
        notes: list[str] = []
        lin = self.lineages.get(node.name, Lineage())
        compare_runtime = runtime if runtime is not None else pair.runtime_output
        local, sums = self._measure(pair, replay, compare_runtime, notes, "local")
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
        verdict = self.limits.get(kind, self.limits["quantized" if quantized else "default"]).verdict(units)
        if nonfinite and not replay_nonfinite:
            verdict = Verdict.BROKEN
        producers = self._producer_rows(lin)
        culprit = verdict.beyond_noise and not any(self.rows[p].verdict.beyond_noise for p in producers)
        unknown = [self.rows[p].node for p in producers if self.rows[p].verdict is Verdict.UNMATCHED]
        if culprit and unknown:
            culprit = False
            notes.append(f"not called a culprit: producer(s) {', '.join(unknown)} could not be compared, so "
                         "local and inherited error cannot be told apart")
        amplification = self._amplification(acc_rel, producers, notes)
        source = self._source(lin, node, notes)
        if nonfinite and self.first_nonfinite is None:
            self.first_nonfinite = NonFinite(index, node.name, nonfinite, any_nonfinite(args, kwargs), replay_nonfinite)
        aot_ops = find_op_names(pair.aot_handle, self.aot_names)
        traces = stack_traces_for(aot_ops, self.stack_traces)
        self.acc_rel[index] = acc_rel
        self.by_node.setdefault((node.name, item.element), []).append(index)
        self.rows.append(CulpritRow(
            index=index, aot_handle=pair.aot_handle, aot_ops=aot_ops,
            runtime_ops=find_op_names(pair.runtime_handle, self.runtime_names), runtime_handle=pair.runtime_handle,
            node=node.name, element=item.element, op_type=kind, local_gap=local, accumulated_gap=accumulated,
            local_noise_units=units, accumulated_rel=acc_rel, amplification=amplification, verdict=verdict,
            is_culprit=culprit, noise=noise.describe(), input_source=source, producers=tuple(producers),
            replayed_ops=lin.replayed, transform=transform, match=pair.match.value,
            module_path=self.module_paths.get(node.name),
            source_line=user_frame(traces.get(node.name)) or next((user_frame(t) for t in traces.values() if t), None),
            stack_traces=traces, latency=self._latency(pair.runtime_handle), nonfinite=nonfinite,
            note="; ".join(notes) or None))

    def _measure(self, pair: AlignedPair, aot: Any, runtime: Any, notes: list[str],
                 what: str) -> tuple[float, tuple[float, float, float, int] | None]:
        """The comparator's gap and, when all values are finite, the float64 sums behind it.

        The built-in SNR comparator's number is made from the same sums (one pass, not two).
        """
        sums = finite_difference_sums(aot, runtime, need_l1=False) \
            if isinstance(aot, torch.Tensor) and isinstance(runtime, torch.Tensor) and aot.shape == runtime.shape \
            else None
        if sums is not None and type(self.comparator) is SNRComparator:
            signal, noise, _, count = sums
            return snr_db(signal / count, noise / count), sums
        return self._gap(pair, aot, runtime, notes, what), sums

    def _gap(self, pair: AlignedPair, aot: Any, runtime: Any, notes: list[str], what: str) -> float:
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

    def _source(self, lin: Lineage, node: torch.fx.Node, notes: list[str]) -> str:
        from_runtime = [p for p in lin.producers if self.substituted.get(p, self.substituted.get((p[0], None), False))]
        logged = [g for g in lin.graph_inputs if g in self.inputs_from_runtime and g not in self.supplied]
        supplied = [g for g in lin.graph_inputs if g in self.supplied]
        representative = [g for g in lin.graph_inputs if g not in self.inputs_from_runtime]
        from_aot = [f"{p[0]}" for p in lin.producers if p not in from_runtime] + representative
        from_runtime += [(g, None) for g in logged + supplied]
        if supplied:
            notes.append(f"graph inputs {', '.join(supplied)} taken from step_inputs")
        if logged:
            notes.append(f"graph inputs {', '.join(logged)} taken from what the delegate logged as its inputs")
        if representative:
            notes.append(f"graph inputs {', '.join(representative)} taken from the representative inputs "
                         "(the runtime does not log them)")
        missing = [p[0] for p in lin.producers if p not in from_runtime]
        if missing:
            notes.append(f"producers {', '.join(missing)} not substituted: replayed values used")
        if not from_aot:
            return "runtime"
        return "runtime+aot" if from_runtime else "aot"

    def _latency(self, handle: DebugHandle) -> float | None:
        ids = set(handle)
        seen: dict[int, float] = {}
        for item in ids:
            for ev_ids, avg, key in self.latencies.get(item, ()):
                if ev_ids <= ids:
                    seen[key] = avg
        return sum(seen.values()) if seen else None
