"""The one pipeline that builds the parts of an analysis from an Inspector: profile, gap, culprits.

A thin layer: every number comes from the Inspector's profile view and from ``numdiff.gap``. Each
stage's result is a record of :mod:`numdiff.analysis.records` (:class:`ProfilePart`,
:class:`GapPart`, :class:`CulpritSection`); :func:`build_parts` runs them in order, and
:meth:`Analysis.from_parts <numdiff.analysis.models.Analysis.from_parts>` puts them together. The
service runs each stage as its own job through :mod:`numdiff.analysis.stages`.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from numdiff._core.etrecord import ETRecordLike
from numdiff._core.names import group_modules, lookup_order
from numdiff.analysis.signature import program_signature
from numdiff.errors import (InternalError, MismatchedArtifactsError, MissingDataError, MissingDependencyError, NumdiffError,
                            UsageError)
from numdiff.analysis.records import (
    ArtifactInfo,
    CulpritRow,
    CulpritSection,
    DecodeSection,
    DecodeStepModel,
    EventStats,
    GapPart,
    GapRowModel,
    GapSection,
    Histogram,
    ProfileBlock,
    ProfilePart,
    ProfileSummary,
    QuantizationSection,
    QuantLayerModel,
    TapRowModel,
    TensorStats,
)

if TYPE_CHECKING:
    from numdiff.culprits.decode import DecodeView
    from numdiff.culprits.quant_view import QuantizationView
    from numdiff.culprits.taps import TapView
    from numdiff.gap import GapInputs
    from numdiff.gap.methods import MethodPlan
    from numdiff.inspector import Inspector
    from numdiff.profile.events import EventBlock

__all__ = ["MATCH_EXPLANATIONS", "NOT_ASKED", "Progress", "build_parts", "culprit_part", "file_info", "gap_part",
           "profile_part"]

#: One sentence per ``MatchKind`` value: how the runtime value of a pair was chosen.
MATCH_EXPLANATIONS = {
    "direct": "the runtime logged a single value for this debug handle; it is compared as is",
    "sole": "the runtime logged a one-element list for this debug handle; its element is compared",
    "position": "the runtime instruction has several outputs; the one at the same position from the end is compared",
    "shape": "among the runtime's values for this handle, the only one with the reference output's shape",
    "shape_dtype": "several runtime values had the reference shape; the only one with its dtype too",
    "fallback_last": "no unique shape/dtype match: the last runtime value was taken, as ExecuTorch does",
    "sequence": "a reference output sequence paired with the runtime's sequence as a whole, as ExecuTorch does",
    "element_position": "one element of a multi-output op, paired by position with the runtime's element",
    "element_shape_dtype": "one element of a multi-output op, paired with the only runtime element of its shape and dtype",
    "delegate_output": "one output of a delegate call, paired with the graph node that produces it (the partition's outputs in graph order)",
}
METRICS = ("SNR", "MSE", "L1")
HISTOGRAM_BINS = 24


Role = Literal["etdump", "etrecord", "debug_buffer"]


def file_info(role: str, path: object) -> ArtifactInfo:
    """SHA-256 and size of one artifact (read in 1 MiB chunks)."""
    name = os.fspath(cast("str | os.PathLike[str]", path))
    digest = hashlib.sha256()
    size = 0
    with open(name, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return ArtifactInfo(role=cast(Role, role), name=os.path.basename(name), sha256=digest.hexdigest(), size=size)


#: ``progress(step, done, total)``: called as the analysis advances (the CLI draws a bar; the
#: library passes None and stays silent).
Progress = Callable[[str, int, int], None]


def _step(progress: Progress | None, step: str, done: int, total: int) -> None:
    if progress is not None:
        progress(step, done, total)


#: The reason a section gives when the caller did not ask for it (``culprits=False``, ``gap=False``).
NOT_ASKED = "not asked"


def profile_part(inspector: Inspector, artifact_paths: Mapping[str, object]) -> ProfilePart:
    """Hash the artifacts and summarise the Inspector's profile view."""
    return ProfilePart(artifacts=[file_info(role, path) for role, path in artifact_paths.items() if path is not None],
                       profile=profile_summary(inspector.event_blocks), notes=list(inspector.notes),
                       program=program_signature(inspector.etrecord))


def gap_part(inspector: Inspector, etdump_path: object = None, progress: Progress | None = None,
             options: Mapping[str, Any] | None = None) -> GapPart:
    """The numerical gap with every metric, or the reason it is not available (no debug buffer ...).

    With the run's own inputs among ``options`` (``step_inputs``, as for the culprit stage), the
    reference graph runs on the first run's inputs, not the ETRecord's representative ones: the
    gap then compares the device with the model on what the device computed.
    """
    steps = _read_given_files({"step_inputs": (options or {}).get("step_inputs")}, inspector.etrecord).get("step_inputs")
    gap, unavailable = gap_section(inspector, etdump_path, progress, steps[0] if steps else None)
    return GapPart(gap=gap, gap_unavailable=unavailable)


def culprit_part(inspector: Inspector, gap: GapPart, options: Mapping[str, Any] | None = None) -> CulpritSection:
    """Culprit localization; not available (with the gap's reason) when there is no gap.

    Raises:
        MismatchedArtifactsError: the files do not belong together (the culprit finder's replay
            check): bad input is an error, never a section that says "not available".
    """
    if gap.gap is None:
        return CulpritSection(available=False, reason="not available: no numerical gap (" + (gap.gap_unavailable or "") + ")")
    return culprit_section(inspector, options or {})


def build_parts(inspector: Inspector, artifact_paths: Mapping[str, object], progress: Progress | None = None,
                culprit_options: Mapping[str, Any] | None = None, *, gap: bool = True,
                culprits: bool = True) -> tuple[ProfilePart, GapPart, CulpritSection]:
    """Run the stages in order: the profile, then the gap (unless ``gap=False``), then culprits (unless
    ``culprits=False`` or there is no gap). A stage not asked for says :data:`NOT_ASKED`."""
    _step(progress, "hashing the artifacts", 0, 1)
    profile = profile_part(inspector, artifact_paths)
    if not gap:
        gap_result = GapPart(gap=None, gap_unavailable=NOT_ASKED)
        return profile, gap_result, CulpritSection(available=False, reason=NOT_ASKED)
    options = _read_given_files(culprit_options or {}, inspector.etrecord)  # each file the user gave read once
    gap_result = gap_part(inspector, artifact_paths.get("etdump"), progress, options)
    if not culprits:
        return profile, gap_result, CulpritSection(available=False, reason=NOT_ASKED)
    if gap_result.gap is not None:
        _step(progress, "finding culprits", 0, 1)
    return profile, gap_result, culprit_part(inspector, gap_result, options)


def _innermost_module(hierarchy: Mapping[str, Any]) -> str | None:
    for stack in hierarchy.values():
        if isinstance(stack, Mapping) and stack:
            last = list(stack.values())[-1]
            if isinstance(last, (tuple, list)) and len(last) >= 2:
                return str(last[0]) or str(last[1]).rsplit(".", 1)[-1] or None
    return None


def _handles(value: int | Sequence[int] | None) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def profile_summary(blocks: Sequence[EventBlock]) -> ProfileSummary:
    """Per-event latency statistics of every block, durations in the blocks' target unit."""
    from numdiff.profile.timescale import TimeScale, time_scale_factor

    unit = blocks[0].target_time_scale.value if blocks else "ms"
    out = []
    for block in blocks:
        src = block.source_time_scale
        to_us = None if src == TimeScale.CYCLES else 1.0 / time_scale_factor(src, TimeScale.US)
        events = []
        runs = 0
        for index, ev in enumerate(block.events):
            perf = ev.perf_data
            durations = [float(d) for d in perf.raw] if perf is not None else []
            runs = max(runs, len(durations))
            starts = [float(s) * to_us for s in (ev.start_time or [])] if to_us is not None else []
            ident = ev.delegate_debug_identifier
            events.append(EventStats(
                index=index, name=ev.name, runs=len(durations),
                p10=_finite_or_none(perf.p10) if perf else None, p50=_finite_or_none(perf.p50) if perf else None,
                p90=_finite_or_none(perf.p90) if perf else None, avg=_finite_or_none(perf.avg) if perf else None,
                min=_finite_or_none(perf.min) if perf else None, max=_finite_or_none(perf.max) if perf else None,
                durations=durations, start_us=starts, op_types=[str(o) for o in ev.op_types],
                debug_handles=_handles(ev.debug_handles), module=_innermost_module(ev.module_hierarchy),
                is_delegated_op=ev.is_delegated_op, delegate_backend=ev.delegate_backend_name,
                delegate_debug_identifier=None if ident is None else str(ident)))
        out.append(ProfileBlock(name=block.name, runs=runs, events=events))
    return ProfileSummary(time_unit=unit, blocks=out)


# --- gap ----------------------------------------------------------------------------------------

def gap_section(inspector: Inspector, etdump_path: object, progress: Progress | None = None,
                own_inputs: tuple[object, ...] | None = None) -> tuple[GapSection | None, str | None]:
    """The gap under every metric; a program of several methods has each method's rows in turn,
    each on its own graph and inputs (:mod:`numdiff.gap.methods`), tagged with the method.
    ``own_inputs``: the (first) run's inputs, on which a one-method program's reference graph runs
    instead of the ETRecord's representative inputs (the section's notes say so)."""
    from numdiff.gap import gather
    from numdiff.gap.methods import compared_note, gather_methods, graph_names, nothing_compared, plan_methods

    path = None if etdump_path is None else os.fspath(etdump_path)  # type: ignore[call-overload]
    etrecord = inspector.etrecord
    rows: list[GapRowModel] = []
    counts: dict[str, int] = {}
    notes: list[str] = []
    method_notes: list[str] = []
    graphs: list[tuple[str, str]] = []
    try:
        _step(progress, "running the reference graph", 0, 1)
        plans = None if etrecord is None else plan_methods(etrecord, inspector.event_blocks, method_notes)
        if etrecord is None or plans is None:
            events = [ev for block in inspector.event_blocks for ev in block.events]
            parts: Iterator[tuple[MethodPlan | None, GapInputs]] = iter(
                [(None, gather(etrecord, events, reference_graph=None, disable_debug_handle_validation=False,
                               etdump_path=path, inputs=own_inputs))])
            if own_inputs is not None:
                notes.append("the reference graph ran on the run's own inputs (step_inputs), not the ETRecord's "
                             "representative inputs")
        else:
            parts = gather_methods(etrecord, plans, None, False, path, method_notes)
            if own_inputs is not None:
                notes.append("the run's own inputs (step_inputs) were not used: a program of several methods runs "
                             "each method on the ETRecord's representative inputs for it")
        graph_name = ""
        for plan, inputs in parts:
            before, graph_name = len(rows), inputs.graph_name
            own_notes = _gap_rows(inputs, None if plan is None else plan.method, rows, counts, progress)
            if plan is not None:
                method_notes.append(compared_note(plan, len(rows) - before, graph_name))
                graphs.append((plan.method, graph_name))
                own_notes = [f"[{plan.method}] {n}" for n in own_notes]
            notes += own_notes
        if plans is not None and not graphs:
            raise nothing_compared(method_notes)
    except MissingDataError as e:
        return None, " — ".join(str(e).splitlines())
    used = {k: v for k, v in MATCH_EXPLANATIONS.items() if k in counts}
    return GapSection(graph_name=graph_names(graphs) if graphs else graph_name, rows=rows,
                      notes=method_notes + notes, match_counts=counts, match_explanation=used,
                      reference_inputs="own" if own_inputs is not None and plans is None else "representative"), None


def _gap_rows(inputs: GapInputs, method: str | None, rows: list[GapRowModel], counts: dict[str, int],
              progress: Progress | None) -> list[str]:
    """Append one method's rows (numbered on from ``rows``) under every metric; its notes."""
    from numdiff._core.stack import user_frame
    from numdiff.comparators import get_comparator
    from numdiff.gap import numeric_gap_report

    reports = []
    for k, m in enumerate(METRICS):
        _step(progress, f"comparing ({m})", k, len(METRICS))
        reports.append(numeric_gap_report(inputs, get_comparator(m)))
    base = reports[0]
    for other in reports[1:]:
        if [r.aot_handle for r in other.table.rows] != [r.aot_handle for r in base.table.rows]:
            raise InternalError("gap rows differ between metrics on the same inputs\nPlease report this with the files.")
    total, first = len(base.table.rows), len(rows)
    for index, (snr, mse, l1) in enumerate(zip(*(r.table.rows for r in reports))):
        if index % 16 == 0:
            _step(progress, "tensor statistics", index, total)
        match = None if snr.match is None else snr.match.value
        if match is not None:
            counts[match] = counts.get(match, 0) + 1
        # a delegate's dequantizes belong to the model's root module: its linears name it
        trace = next((t for op in lookup_order(snr.aot_ops) if (t := _trace(op, base.stack_traces))), None)
        aot_stats, rt_stats, hist, max_abs = _value_stats(snr.aot_output, snr.runtime_output)
        rows.append(GapRowModel(
            index=first + index, aot_debug_handle=list(snr.aot_handle), aot_ops=list(snr.aot_ops),
            runtime_ops=list(snr.runtime_ops), runtime_debug_handle=list(snr.runtime_handle),
            snr=[float(v) for v in snr.gap], mse=[float(v) for v in mse.gap], l1=[float(v) for v in l1.gap],
            matched=snr.matched, match=match, match_explanation=MATCH_EXPLANATIONS.get(match or ""),
            note=snr.note, module=group_modules(snr.aot_ops, base.module_paths), source_line=user_frame(trace),
            stack_trace=trace, max_abs_error=max_abs, aot_stats=aot_stats, runtime_stats=rt_stats,
            error_histogram=hist, method=method))
    return list(base.notes) + [str(getattr(n, "detail", n)) for n in base.alignment.notes] \
        + [f"{n.kind.value}: {n.detail}" for n in base.table.notes]


def _trace(op: str, by_handle: Mapping[Any, Mapping[str, str | None]]) -> str | None:
    for traces in by_handle.values():
        if op in traces:
            return traces[op]
    return None


def _arrays(value: object) -> list[np.ndarray[Any, Any]]:
    import torch

    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _arrays(v)]
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        if t.is_quantized:
            t = t.dequantize()
        return [t.double().numpy() if t.dtype.is_floating_point or not t.dtype.is_complex else t.numpy()]
    if isinstance(value, (int, float, bool, np.ndarray, np.generic)):
        return [np.asarray(value, dtype=np.float64)]
    return []


def _dtype(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(sorted({_dtype(v) for v in value})) or "none"
    return str(getattr(value, "dtype", type(value).__name__)).replace("torch.", "")


def _stats(value: object) -> TensorStats | None:
    arrays = _arrays(value)
    if not arrays:
        return None
    flat = np.concatenate([a.reshape(-1).astype(np.float64) for a in arrays])
    finite = flat[np.isfinite(flat)]
    has = finite.size > 0
    return TensorStats(dtype=_dtype(value), shape=[list(a.shape) for a in arrays], numel=int(flat.size),
                       min=float(finite.min()) if has else None, max=float(finite.max()) if has else None,
                       mean=float(finite.mean()) if has else None, std=float(finite.std()) if has else None,
                       nonfinite=int(flat.size - finite.size))


def _value_stats(aot: object, runtime: object) -> tuple[TensorStats | None, TensorStats | None, Histogram | None, float | None]:
    a_stats, r_stats = _stats(aot), _stats(runtime)
    a, r = _arrays(aot), _arrays(runtime)
    if not a or len(a) != len(r) or any(x.size != y.size for x, y in zip(a, r)):
        return a_stats, r_stats, None, None
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: left out below, counted in nonfinite
        err = np.concatenate([(y.reshape(-1) - x.reshape(-1)) for x, y in zip(a, r)])
    err = err[np.isfinite(err)]
    if err.size == 0:
        return a_stats, r_stats, None, None
    lo, hi = float(err.min()), float(err.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(err, bins=HISTOGRAM_BINS, range=(lo, hi))
    return a_stats, r_stats, Histogram(edges=[float(e) for e in edges], counts=[int(c) for c in counts]), \
        float(np.abs(err).max())


# --- culprits (issue 9; optional) ---------------------------------------------------------------

def _read_given_files(options: Mapping[str, Any], etrecord: ETRecordLike | None) -> dict[str, Any]:
    """``options`` with the files the user named in them (step inputs, float program) read now, so that
    a wrong one fails the analysis with its own error (naming it) instead of leaving culprits "not
    available" or failing inside the reference graph."""
    given = dict(options)
    if given.get("step_inputs") is not None:
        from numdiff.culprits.decode import load_step_inputs

        given["step_inputs"] = load_step_inputs(given["step_inputs"], etrecord)
    if isinstance(given.get("float_program"), (str, os.PathLike)):
        from numdiff.culprits.quant_view import load_float_program

        given["float_program"] = load_float_program(given["float_program"])
    return given


def culprit_section(inspector: Inspector, options: Mapping[str, Any]) -> CulpritSection:
    """The saved form of ``inspector.find_culprits(**options)``; not available (with the reason) when
    it cannot be computed. Files that do not belong together raise ``MismatchedArtifactsError``."""
    try:
        importlib.import_module("numdiff.culprits")
    except ImportError as e:
        return CulpritSection(available=False, reason=f"not available: {e}")
    options = _read_given_files(options, inspector.etrecord)  # a wrong file the user gave is an error
    try:
        report = inspector.find_culprits(**options)
        frame = report.to_dataframe()
    except (MismatchedArtifactsError, UsageError) as e:  # bad input or a wrong option: an error, not a section
        if not isinstance(e, MissingDependencyError):  # (a missing extra is a UsageError too: not available)
            raise
        return CulpritSection(available=False, reason="not available: " + " — ".join(str(e).splitlines()))
    except NumdiffError as e:
        return CulpritSection(available=False, reason="not available: " + " — ".join(str(e).splitlines()))
    from numdiff._core.stack import user_frame
    from numdiff.culprits.report import headline, inputs_assumed_note, inputs_in_doubt_note

    rows = []
    for rec, row in zip(frame.to_dict(orient="records"), report.rows):
        traces = rec.get("stack_traces") or {}
        trace = next((t for t in reversed(list(traces.values())) if t), None) if isinstance(traces, Mapping) else None
        rows.append(CulpritRow(
            aot_ops=[str(o) for o in rec.get("aot_ops") or []], runtime_ops=[str(o) for o in rec.get("runtime_ops") or []],
            local_gap=_num(rec.get("local_gap")), accumulated_gap=_num(rec.get("accumulated_gap")),
            amplification=_num(rec.get("amplification")),
            verdict=None if rec.get("verdict") is None else str(rec.get("verdict")),
            is_culprit=bool(rec.get("is_culprit", False)), local_noise_units=_num(rec.get("local_noise_units")),
            noise=None if rec.get("noise") is None else str(rec.get("noise")), source_line=user_frame(trace),
            input_sources=list(row.input_sources), delegate=row.delegate, method=row.method))
    verdicts = [r.verdict for r in report.rows]
    return CulpritSection(available=True, rows=rows, headline=headline(report),
                          broken=sum(v.value == "broken" for v in verdicts),
                          replay_mismatches=sum(v.value == "replay-mismatch" for v in verdicts),
                          not_judged=sum(v.value == "not-judged" for v in verdicts),
                          inputs_in_doubt=list(report.inputs_in_doubt), methods_in_doubt=list(report.methods_in_doubt),
                          inputs_note=" ".join(
                              [*([inputs_in_doubt_note(report.inputs_in_doubt) + "."] if report.inputs_in_doubt else []),
                               *([inputs_assumed_note(report.inputs_assumed) + "."] if report.inputs_assumed else [])])
                          or None,
                          quantization=_quantization(report.quantization),
                          decode=_decode(report.decode), inside_delegates=_taps(report.inside_delegates))


def _taps(view: TapView | None) -> list[TapRowModel] | None:
    """The saved form of a ``TapView`` (None when there is none)."""
    if view is None:
        return None
    return [TapRowModel(node=r.node, module_path=r.module_path, local_gap=_num(r.local_gap),
                        local_noise_units=_num(r.local_noise_units), verdict=r.verdict.value, is_culprit=r.is_culprit)
            for r in view.rows]


def _decode(view: DecodeView | None) -> DecodeSection | None:
    """The saved form of a ``DecodeView`` (None when there is none)."""
    if view is None:
        return None
    first = view.first_divergent_step
    return DecodeSection(
        with_step_inputs=view.with_step_inputs, first_divergent_step=None if first is None else first.step,
        steps=[DecodeStepModel(step=s.step, output_gap=_num(s.output_gap), diverges=s.diverges,
                               culprit_ops=[list(o) for o in s.culprit_ops], note=s.note) for s in view.steps],
        notes=list(view.notes))


def _quantization(view: QuantizationView | None) -> QuantizationSection | None:
    """The saved form of a ``QuantizationView`` (None when there is none)."""
    if view is None:
        return None
    return QuantizationSection(
        target_snr_db=view.target_snr_db, estimated_snr_db=_num(view.estimated_snr_db),
        suggested_snr_db=_num(view.suggested_snr_db), suggested_keep=list(view.suggested_keep),
        layers=[QuantLayerModel(layer=r.layer, module_path=r.module_path, snr_db=_num(r.snr_db),
                                keep_in_float=r.keep_in_float, from_runtime=r.from_runtime, note=r.note)
                for r in view.layers])


def _num(value: object) -> float | None:
    """A figure of a culprit record as a float (the lowest of several); None when it is not a number."""
    if isinstance(value, (list, tuple)):
        value = min((float(v) for v in value), default=None)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return None
