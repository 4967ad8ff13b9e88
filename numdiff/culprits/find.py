"""``find_culprits``: which op is wrong by itself, and which only inherits its inputs' error.

Stages, reusing the gap's: :func:`numdiff.gap.gather` (reference graph run from the start, the
runtime's outputs) → :func:`numdiff.align.align_intermediate_outputs` (pairs, notes) → one replay
pass (:class:`~numdiff.culprits._replay.ReplayInterpreter`) that, node by node, scores the replay
on the runtime's inputs (*local*) and the AOT output (*accumulated*) against the runtime's output
with the chosen comparator, judges the local error against its noise model, and lets go of both
values once the row is written. Culprit: local error beyond noise while no producer's is.

A program of several methods (``forward`` and ``encode``, ...) is compared as
``calculate_numeric_gap`` compares it (:func:`numdiff.gap.methods.plan_methods`): each method the
ETDump ran is replayed on its own reference graph and the inputs that fit it, its rows numbered on
from the previous method's and tagged with it; a method left out gets a note.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from numdiff._core.etrecord import ETRecordLike
from numdiff._core.types import DebugHandle
from numdiff._core.names import quantity
from numdiff._core.gc_pause import gc_paused
from numdiff.align import AlignmentReport, EventLike, RuntimeOutput, ShapeRelation, align_intermediate_outputs
from numdiff.capture import graph_threads
from numdiff.comparators import NumericalComparatorBase
from numdiff.culprits._checks import mismatched_artifacts, nothing_comparable
from numdiff.culprits._delegates import XNNPACK, delegate_calls
from numdiff.culprits._deviations import explain_deviations
from numdiff.culprits._precision import delegate_precision_mismatch
from numdiff.culprits._inputs import delegate_inputs
from numdiff.culprits._matching import explain_matching
from numdiff.culprits._noise import ThresholdsArg, Verdict, resolve_thresholds
from numdiff.culprits._lineage import Lineage, lineage
from numdiff.culprits._replay import ReplayInterpreter, graph_args
from numdiff.culprits._same_values import same_values
from numdiff.culprits._settle import settle_inputs
from numdiff.culprits._scorer import Meter, Planned, Release, Scorer, dequantize_params, score_accumulated
from numdiff.culprits.report import CulpritReport, RunFigures, inputs_in_doubt_note
from numdiff.errors import MismatchedArtifactsError, UsageError
from numdiff.gap import gather
from numdiff.gap.presum import presumming, worker_threads

if TYPE_CHECKING:
    import torch.fx
    from torch.export import ExportedProgram

    from numdiff.gap.methods import MethodBlock, MethodPlan

    from numdiff.culprits._runs import RunEvent
    from numdiff.culprits.decode import StepInputs
    from numdiff.culprits.quant_view import FloatProgram, QuantizationView, QuantReplay
    from numdiff.culprits.taps import TapOutputs

__all__ = ["find_culprits"]


def find_culprits(
    etrecord: ETRecordLike,
    events: Iterable[RunEvent],
    comparator: NumericalComparatorBase,
    *,
    reference_graph: str | None = None,
    thresholds: ThresholdsArg = None,
    disable_debug_handle_validation: bool = False,
    etdump_path: str | None = None,
    debug_buffer_path: str | None = None,
    release: Release | None = None,
    float_program: FloatProgram | None = None,
    target_snr_db: float | None = None,
    decode_steps: bool | None = None,
    step_inputs: StepInputs | None = None,
    taps: str | os.PathLike[str] | None = None,
    tap_outputs: TapOutputs | None = None,
    run_outputs: Sequence[object] | None = None,
    inputs_are_representative: bool = False,
    blocks: Iterable[MethodBlock] | None = None,
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
        debug_buffer_path: For messages (the file to check when the files do not belong together).
        release: Called with each runtime output once its row is written.
        float_program: The float model's ``ExportedProgram`` or ETRecord path: adds the
            quantization view (``report.quantization``, see :mod:`numdiff.culprits.quant_view`).
        target_snr_db: Output SNR the quantization view's keep-in-float suggestion aims for.
        decode_steps: The runs are the decode steps of one generation: adds ``report.decode``
            (see :mod:`numdiff.culprits.decode`). Implied by ``step_inputs`` of several runs.
        step_inputs: Each run's input tuple (a list, or a ``torch.save`` file of it): every step
            is analysed on its own inputs. For a single run (``[inputs]``) that is all: the run is
            judged on the inputs it used, with no decode view unless ``decode_steps=True``.
        taps: Tap sidecar (``numdiff.export_helpers.taps``): adds ``report.inside_delegates``,
            the tapped ops inside delegates replayed on the tapped values (see
            :mod:`numdiff.culprits.taps`).
        tap_outputs: The tapped method's flat outputs (a list, or a ``torch.save`` file of it).
            Defaults to ``run_outputs``.
        run_outputs: The method's outputs as the ETDump logged them (``EventBlock.run_output``
            of its first run), the tapped values when ``tap_outputs`` is not given.
        inputs_are_representative: The (first) run used the ETRecord's representative inputs: every
            op that reads a graph input the runtime did not log is judged on them. Without it, such
            ops are judged when some op that reads the same input agrees with its replay, and are
            ``not-judged`` when every one is unrelated to its replay (the run may have used other
            inputs).
        blocks: The Inspector's event blocks (``events`` are theirs). With an ETRecord of several
            methods, each method the ETDump ran is replayed on its own graph and inputs (see the
            module docstring); None: ``events`` are one method's.

    Raises:
        MissingDataError, MismatchedArtifactsError, UsageError: as ``calculate_numeric_gap``;
            UsageError too for a view (``float_program``, decode steps, ``taps``) on a program
            of several methods.
        CaptureError: The graph failed on the runtime's values.
    """
    from numdiff.culprits._runs import per_run_figures, run_count

    events = list(events)
    if blocks is not None:
        from numdiff.gap.methods import plan_methods

        method_notes: list[str] = []
        plans = plan_methods(etrecord, blocks, method_notes)
        if plans is not None:
            _refuse_views(plans, {"the quantization view (float_program=, CLI --float-program)": float_program,
                                  "decode steps (decode_steps=, CLI --decode-steps)": decode_steps,
                                  "the run's own inputs (step_inputs=, CLI --step-inputs; declare "
                                  "inputs_are_representative=True instead if it used the representative ones)":
                                      step_inputs, "taps (taps=, CLI --taps)": taps or tap_outputs})
            return _every_method(etrecord, events, plans, method_notes, comparator, reference_graph, thresholds,
                                 disable_debug_handle_validation, etdump_path, release, debug_buffer_path,
                                 inputs_are_representative)
    if taps is None and tap_outputs is not None:
        raise UsageError("tap_outputs needs taps: the sidecar says where each tapped value is in the method's "
                         "outputs\nPass the sidecar too (CLI: --taps).")
    tap_source = "tap_outputs"
    if taps is not None and tap_outputs is None:
        if not run_outputs:
            raise UsageError("taps need the tapped values, and the ETDump holds no program outputs for the method "
                             "(the runtime logs them at debug level kProgramOutputs or kIntermediateOutputs)\n"
                             "Pass the outputs the tapped method returned as tap_outputs (CLI: --tap-outputs), or "
                             "run with program outputs logged.")
        tap_outputs, tap_source = list(run_outputs), "the ETDump's logged program outputs (first run)"
    tapped: TapOutputs = [] if tap_outputs is None else tap_outputs
    quant = None
    if float_program is not None:
        from numdiff.culprits.quant_view import DEFAULT_TARGET_SNR_DB, load_float_program

        quant = (load_float_program(float_program),
                 DEFAULT_TARGET_SNR_DB if target_snr_db is None else float(target_snr_db))

    steps = None
    if step_inputs is not None:
        from numdiff.culprits.decode import load_step_inputs

        steps = load_step_inputs(step_inputs, etrecord)
        if len(steps) != run_count(events):
            raise UsageError(f"step_inputs has {quantity(len(steps), 'entry', 'entries')} but the ETDump holds "
                             f"{quantity(run_count(events), 'run')} of the method\nPass one input tuple per run, in run order.")

    def analyse(view: list[EventLike]) -> CulpritReport:
        return _analyse(etrecord, view, comparator, reference_graph, thresholds, disable_debug_handle_validation,
                        etdump_path, release, later_run=True, debug_buffer_path=debug_buffer_path)

    report = _analyse(etrecord, events, comparator, reference_graph, thresholds, disable_debug_handle_validation,
                      etdump_path, release, quant, None if not steps else steps[0],
                      debug_buffer_path=debug_buffer_path, inputs_are_representative=inputs_are_representative)
    if taps is not None:
        from numdiff.culprits.taps import inside_delegates

        report = replace(report, inside_delegates=inside_delegates(etrecord, taps, tapped,
                                                                   resolve_thresholds(thresholds),
                                                                   source=tap_source))
    runs = run_count(events)
    if (steps is not None and runs > 1) or decode_steps:  # one run on its own inputs is no generation
        from numdiff.culprits._runs import figures, in_run
        from numdiff.culprits.decode import decode_view, output_node

        def analyse_step(run: int, inputs: tuple[object, ...] | None) -> CulpritReport:
            return _analyse(etrecord, in_run(events, run), comparator, reference_graph, thresholds,
                            disable_debug_handle_validation, etdump_path, release, None, inputs, later_run=run > 0,
                            debug_buffer_path=debug_buffer_path)

        decoded = decode_view(runs, steps, analyse_step, report, output_node(etrecord, report.graph_name))
        per_run = tuple(figures(r, rep, report) for r, rep in enumerate(decoded.per_step)) if runs > 1 else ()
        return replace(report, decode=decoded, runs=per_run)
    if runs > 1:
        report = replace(report, runs=per_run_figures(events, runs, report, analyse))
    return report


@graph_threads()  # the capture and the replay: one intra-op thread (numdiff.capture.threads)
@gc_paused()  # the replay and scoring make no cycles: full collections walking torch's objects cost 0.1 s
def _analyse(etrecord: ETRecordLike, events: Sequence[EventLike], comparator: NumericalComparatorBase,
             reference_graph: str | None, thresholds: ThresholdsArg, disable_debug_handle_validation: bool,
             etdump_path: str | None, release: Release | None,
             quant: tuple[ExportedProgram, float] | None = None,
             step_input: tuple[object, ...] | None = None, *, later_run: bool = False,
             debug_buffer_path: str | None = None, method: _Method | None = None,
             first_index: int = 0, inputs_are_representative: bool = False) -> CulpritReport:
    """One run's report (``events`` show that run's values); ``quant`` = (float program, target
    SNR) also runs the quantization view in the same replay. ``later_run``: a run after the first,
    whose graph inputs are not the representative ones (rows that read one unlogged get no verdict
    unless ``step_input`` gives them). ``method``: one method of a multi-method program, replayed
    on its own graph and inputs, its rows numbered from ``first_index``."""
    from numdiff.capture import handle_key, is_captured_node, resolve_reference_graph, runs_without_side_effects
    from numdiff.capture.nodes import DEBUG_HANDLE_KEY

    limits = resolve_thresholds(thresholds)
    run_inputs = method.plan.inputs if method is not None else None if step_input is None else tuple(step_input)
    # the accumulated sums are taken as the graph runs, on the gap's worker when it has one (numdiff.gap.presum)
    with presumming(False, release) as presum:
        inputs = gather(etrecord, events, reference_graph=reference_graph,
                        disable_debug_handle_validation=disable_debug_handle_validation, etdump_path=etdump_path,
                        graph=None if method is None else method.graph(), inputs=run_inputs, split_delegates=True,
                        method="forward" if method is None else method.plan.method, on_pair=presum.on_pair)
        # Each output of a multi-output delegate call is paired with the node that gives it (the
        # partition's outputs in graph order), never by the reference's position rule: two outputs of
        # one shape would otherwise swap silently (the zoo's XNNPACK attention blocks did).
        alignment = align_intermediate_outputs(inputs.aot_outputs, inputs.runtime_outputs,
                                               delegate_outputs=inputs.delegate_outputs)
        by_handle = _plan_by_handle(inputs.aot_outputs, alignment)
        notes, paired_runtime = alignment.notes, [p.runtime_handle for p in alignment.pairs]
        unreliable = _unreliable_positions(alignment, inputs.runtime_outputs)
        del alignment
        meter = Meter(comparator, inputs.aot_op_names, inputs.runtime_op_names)
        # Accumulated error first, as the gap does, letting go of each AOT output once scored: the
        # replay then holds only the values torch.fx keeps alive (peak memory = the gap's).
        inputs.aot_outputs.clear()
        # The capture's graph module serves the replay too, unless running it changes it (a buffer
        # written in place): then the replay builds a fresh one, as the capture had.
        graph_module, _ = inputs.reusable_graph or (method.graph() if method is not None else resolve_reference_graph(
            etrecord, inputs.graph_name if reference_graph is None else reference_graph, disable_debug_handle_validation))
        keeper = {handle_key(n.meta[DEBUG_HANDLE_KEY]): n.name for n in graph_module.graph.nodes
                  if is_captured_node(n)}
        # The nodes of a handle that compute the same value (PT2E's one dequantize per consumer) share the
        # runtime's value: the first is paired, the others read what it substituted.
        keeper, shared = same_values(graph_module.graph, keeper, lambda n: handle_key(n.meta[DEBUG_HANDLE_KEY])
                                     if is_captured_node(n) else None)
        score_accumulated([item for items in by_handle.values() for item in items], meter,
                          presum.release if meter.sums_alone else release,  # another metric reads the pages again
                          dequantize_params(graph_module.graph))
    plan: dict[str, list[Planned]] = {}
    for handle, items in by_handle.items():
        if handle in keeper:
            plan.setdefault(keeper[handle], []).extend(items)
    shared = {name: to for name, to in shared.items() if to in plan}
    lineages = lineage(graph_module.graph, set(plan), shared)
    logged, input_notes = delegate_inputs(graph_module.graph, inputs.runtime_outputs, inputs.runtime_op_names)
    # One decode step's own graph inputs are runtime values (the step's inputs), not representative ones.
    supplied = frozenset(n.name for n in graph_module.graph.nodes if n.op == "placeholder" and step_input is not None)
    calls = delegate_calls(events)
    xnnpack = _xnnpack_nodes(plan, lineages, calls)
    # The values an emulated quantization rounds were computed by XNNPACK's float kernels: its limits.
    tie_allowance = limits.get(XNNPACK, limits["default"]).expected
    spare = {name: list(items) for name, items in plan.items()}  # the scorer takes each node's pairs once

    def replay_on(module: torch.fx.GraphModule, plan: dict[str, list[Planned]],
                  quant: tuple[ExportedProgram, float] | None = None) -> tuple[Scorer, ReplayInterpreter]:
        from_runtime = dict.fromkeys(supplied, "step_inputs")
        # the local sums on a second thread while the replay goes on, when the caller allows one (see Scorer)
        pool = ThreadPoolExecutor(1, thread_name_prefix="numdiff-replay-sums") \
            if quant is None and worker_threads() and runs_without_side_effects(module) else None
        scorer = Scorer(meter, limits, lineages, inputs.stack_traces, inputs.module_paths, _latencies(events), plan,
                        release, unreliable=unreliable, supplied=supplied, inputs_from_runtime=from_runtime,
                        inputs_unknown=later_run and step_input is None, delegates=calls, sums_pool=pool,
                        first_index=first_index, aot_inputs=None if method is None else method.plan.inputs_source)
        args = (module, set(plan), scorer.on_paired, logged)
        if quant is None:
            replay = ReplayInterpreter(*args, from_runtime, xnnpack_nodes=xnnpack, tie_allowance=tie_allowance, shared=shared)
        else:
            from numdiff.culprits.quant_view import QuantReplay

            replay = QuantReplay(*args, quant[0], quant[1], from_runtime, xnnpack_nodes=xnnpack,
                                 tie_allowance=tie_allowance, shared=shared)
        scorer.input_problems = replay.input_problems
        try:
            replay.run(*graph_args(etrecord, run_inputs))
            scorer.flush()
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        return scorer, replay

    scorer, replay = replay_on(graph_module, plan, quant)
    view: Callable[[], QuantizationView] | None = None if quant is None else cast("QuantReplay", replay).view
    doubtful, readers = ([], set()) if inputs_are_representative else settle_inputs(scorer)
    confirmed = step_input is None and not later_run and bool(replay.inputs_agree) and all(replay.inputs_agree.values())
    mismatch = mismatched_artifacts(scorer.rows, scorer.local_rel, inputs_confirmed=confirmed, input_readers=readers)
    precision = delegate_precision_mismatch(graph_module.graph, events)
    if precision is not None:
        raise MismatchedArtifactsError(
            f"{etdump_path or 'the ETDump'}: {precision}\nPass the ETRecord written when this exact program (.pte) was "
            "exported and lowered: one from before or after quantizing pairs with the run by instruction, but its "
            "replay computes in another precision and every delegate would look wrong.")
    unsized = nothing_comparable(scorer.rows, scorer.local_rel, scorer.unsized) if step_input is None and not later_run else None
    if unsized is not None:
        raise MismatchedArtifactsError(
            f"{etdump_path or 'the ETDump'}: {unsized}\nCheck that the ETRecord was generated for the program that "
            "ran (another program's ETRecord can share its instruction ids). If it was, the run used inputs of "
            "other sizes than the ETRecord's representative inputs: pass the run's own inputs (step_inputs=, CLI "
            "--step-inputs) or regenerate the ETRecord with them.")
    if doubtful and all(r.verdict in (Verdict.NOT_JUDGED, Verdict.UNMATCHED) or not r.input_sources
                        for r in scorer.rows):
        raise MismatchedArtifactsError(
            f"{etdump_path or 'the ETDump'}: no op could be judged: every op that computes from its inputs reads graph "
            f"input(s) {', '.join(doubtful)}, which the runtime did not log, and is unrelated to its replay on the "
            "ETRecord's representative inputs\nThe run used other inputs than the representative ones (pass the run's "
            "own inputs: step_inputs=[inputs], CLI --step-inputs), or the debug buffer"
            f"{f' {debug_buffer_path!r}' if debug_buffer_path else ''} is not the one the runtime wrote with this ETDump, "
            "or every op is badly wrong (calculate_numeric_gap still shows each op's gap).")
    if mismatch is not None:
        raise MismatchedArtifactsError(
            f"{etdump_path or 'the ETDump'}: {mismatch}\nCheck that the debug buffer"
            f"{f' {debug_buffer_path!r}' if debug_buffer_path else ''} is the one the runtime wrote "
            "with this ETDump (not another model's or another run's buffer: files of other formats are refused when "
            "opened) and that the ETRecord was generated for the program that ran. If they are the right files, "
            "nearly every op computes something unrelated on the device: calculate_numeric_gap still shows each "
            "op's gap.")
    matching = explain_matching(graph_module.graph, notes, paired_runtime, inputs.runtime_outputs, keeper,
                                {r.node: r.index for r in scorer.rows}, scorer.transforms,
                                frozenset(a.node for a in inputs.aliased))
    # A culprit that a known device deviation explains says so (one more replay, only then; the first run's).
    rows = scorer.rows if later_run else explain_deviations(scorer.rows, graph_module,
                                                            lambda module: replay_on(module, spare)[0].rows)
    return CulpritReport(tuple(rows), type(comparator).__name__, inputs.graph_name, scorer.first_nonfinite,
                         matching, comparator.higher_is_better,
                         inputs.notes + tuple(n.detail for n in notes) + tuple(input_notes)
                         + ((inputs_in_doubt_note(doubtful),) if doubtful else ()),
                         inputs_in_doubt=tuple(doubtful), inputs_assumed=tuple(scorer.assumed),
                         model_nonfinite=scorer.model_nonfinite,
                         quantization=None if view is None else view())


def _xnnpack_nodes(plan: Mapping[str, list[Planned]], lineages: Mapping[str, Lineage],
                   calls: Mapping[frozenset[int], tuple[str, int]]) -> frozenset[str]:
    """The nodes an XNNPACK delegate call runs: each such call's row node and the nodes replayed with it."""
    out: set[str] = set()
    for name, items in plan.items():
        if any(calls.get(frozenset(item.pair.runtime_handle), ("", 0))[0] == XNNPACK for item in items):
            out.add(name)
            out.update(lineages[name].replayed if name in lineages else ())
    return frozenset(out)


def _refuse_views(plans: Sequence[MethodPlan], views: Mapping[str, object]) -> None:
    """A UsageError naming the views asked for (``{view: its option}``, asked when the option is not
    None or False): they work on a program of one method."""
    asked = [view for view, option in views.items() if option is not None and option is not False]
    if asked:
        raise UsageError(
            f"{' and '.join(asked)}: supported on a program of one method only, and this ETRecord holds several "
            f"(the ETDump ran {', '.join(sorted({p.method for p in plans}))})\nLeave that option out to compare "
            "every method, or export the method to examine as a program of its own and pass its ETRecord, ETDump "
            "and debug buffer.")


@dataclass(frozen=True, slots=True)
class _Method:
    """One method of a multi-method program: its plan and what builds its reference graph afresh."""

    plan: MethodPlan
    graph: Callable[[], tuple[torch.fx.GraphModule, str]]


def _every_method(etrecord: ETRecordLike, events: list[RunEvent], plans: list[MethodPlan], notes: list[str],
                  comparator: NumericalComparatorBase, reference_graph: str | None, thresholds: ThresholdsArg,
                  disable_debug_handle_validation: bool, etdump_path: str | None, release: Release | None,
                  debug_buffer_path: str | None, inputs_are_representative: bool = False) -> CulpritReport:
    """One report over every method the ETDump ran (``notes``: :func:`~numdiff.gap.methods.plan_methods`'s)."""
    from numdiff.culprits._runs import per_run_figures, run_count
    from numdiff.gap.methods import compared_note, graph_names, method_graph, nothing_compared

    parts: list[tuple[str, CulpritReport]] = []
    first = 0
    for plan in plans:
        build = method_graph(etrecord, plan, reference_graph, disable_debug_handle_validation, notes)
        if build is None:
            continue
        mine = {id(ev) for ev in plan.events}
        own = [ev for ev in events if id(ev) in mine]  # the method's events, typed as the caller's
        method = _Method(plan, build)

        def analyse(view: list[EventLike], method: _Method = method, first: int = first) -> CulpritReport:
            return _analyse(etrecord, view, comparator, reference_graph, thresholds, disable_debug_handle_validation,
                            etdump_path, release, later_run=True, debug_buffer_path=debug_buffer_path,
                            method=method, first_index=first)

        report = _analyse(etrecord, own, comparator, reference_graph, thresholds, disable_debug_handle_validation,
                          etdump_path, release, debug_buffer_path=debug_buffer_path, method=method, first_index=first,
                          inputs_are_representative=inputs_are_representative)
        runs = run_count(own)
        if runs > 1:
            report = replace(report, runs=per_run_figures(own, runs, report, analyse))
        notes.append(compared_note(plan, len(report.rows), report.graph_name))
        parts.append((plan.method, report))
        first += len(report.rows)
    if not parts:
        raise nothing_compared(notes)
    head = parts[0][1]
    return CulpritReport(
        rows=tuple(replace(r, method=m) for m, rep in parts for r in rep.rows), metric=head.metric,
        graph_name=graph_names((m, rep.graph_name) for m, rep in parts),
        first_nonfinite=next((rep.first_nonfinite for _, rep in parts if rep.first_nonfinite is not None), None),
        model_nonfinite=next((rep.model_nonfinite for _, rep in parts if rep.model_nonfinite is not None), None),
        matching=tuple(replace(x, method=m) for m, rep in parts for x in rep.matching),
        higher_is_better=head.higher_is_better,
        notes=tuple(notes) + tuple(f"[{m}] {n}" for m, rep in parts for n in rep.notes),
        inputs_in_doubt=tuple(f"{name} (method {m})" for m, rep in parts for name in rep.inputs_in_doubt),
        methods_in_doubt=tuple(m for m, rep in parts if rep.inputs_in_doubt),
        inputs_assumed=tuple(f"{name} (method {m})" for m, rep in parts for name in rep.inputs_assumed),
        runs=_runs_of_every_method(parts))


def _runs_of_every_method(parts: list[tuple[str, CulpritReport]]) -> tuple[RunFigures, ...]:
    """Per-run figures over every method's rows, when some method ran more than once with its own
    values: run ``i`` of each method; NaN for the rows of a method that has no run ``i`` (noted)."""
    from numdiff.culprits._runs import figures

    count = max(len(rep.runs) for _, rep in parts)
    if count < 2:
        return ()
    out: list[RunFigures] = []
    for run in range(count):
        local: list[float] = []
        units: list[float] = []
        culprits: list[int] = []
        why: list[str] = []
        for method, rep in parts:
            size = len(rep.rows)
            fig = rep.runs[run] if run < len(rep.runs) else figures(0, rep, rep) if run == 0 else None
            if fig is None:
                local += [math.nan] * size
                units += [math.nan] * size
                why.append(f"method {method!r} logged no values of its own in run {run}")
                continue
            local += (list(fig.local_gap) + [math.nan] * size)[:size]
            units += (list(fig.local_noise_units) + [math.nan] * size)[:size]
            culprits += fig.culprits
            if fig.note:
                why.append(f"method {method!r}: {fig.note}")
        out.append(RunFigures(run, tuple(local), tuple(units), tuple(culprits), "; ".join(why) or None))
    return tuple(out)


def _plan_by_handle(aot_outputs: Mapping[DebugHandle, Any], alignment: AlignmentReport) -> dict[DebugHandle, list[Planned]]:
    """Aligned pairs by the AOT handle (and element) whose captured output they compare."""
    owner: dict[int, tuple[DebugHandle, int | None]] = {}
    for handle, value in aot_outputs.items():
        if isinstance(value, (list, tuple)):
            owner.update({id(v): (handle, k) for k, v in enumerate(value)})
        owner[id(value)] = (handle, None)
    plan: dict[DebugHandle, list[Planned]] = {}
    for pair in alignment.pairs:
        found = owner.get(id(pair.aot_output))
        if found is not None:
            plan.setdefault(found[0], []).append(Planned(pair, found[1]))
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


def _latencies(events: Sequence[EventLike]) -> dict[int, list[tuple[frozenset[int], float, int]]]:
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
