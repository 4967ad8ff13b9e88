"""What ``find_culprits`` returns: one typed row per aligned pair, the culprits, roll-ups, matching."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from numdiff._core.advice import INPUTS_HINT
from numdiff._core.names import delegate_call, row_title
from numdiff._core.types import DebugHandle
from numdiff.culprits._noise import Verdict
from numdiff.gap.aliased import ALIASED
from numdiff.culprits.headline import headline, in_method, methods_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from numdiff.culprits.decode import DecodeView
    from numdiff.culprits.quant_view import QuantizationView
    from numdiff.culprits.taps import TapView

__all__ = ["CulpritReport", "CulpritRow", "MatchRecord", "NonFinite", "RunFigures", "headline"]


@dataclass(frozen=True, slots=True)
class CulpritRow:
    """One aligned AOT/runtime pair, in execution order.

    Attributes:
        index: Position in execution order.
        aot_handle: Handle the row is reported under (as in ``calculate_numeric_gap``).
        aot_ops: AOT op names, named as in ``calculate_numeric_gap``.
        runtime_ops: Runtime op names.
        runtime_handle: The runtime's (merged) handle.
        node: The AOT node whose output is compared (the last of its group).
        element: Element of a multi-output op, else None.
        op_type: Short op type of ``node`` (the key for per-op ``thresholds``).
        local_gap: The metric between the replay on the runtime's inputs and the runtime's output.
        accumulated_gap: The metric between the AOT run from the start and the runtime's output.
        local_noise_units: Local error in noise units (see :mod:`numdiff.culprits._noise`).
        accumulated_rel: ``rms(aot - runtime) / rms(aot)``.
        amplification: ``accumulated_rel`` over the worst ``accumulated_rel`` of its producers;
            NaN when it cannot be computed (``note`` says why).
        verdict: The local verdict.
        is_culprit: Local error beyond noise while no producer's is.
        noise: How sigma was made (reduction length, quantization step).
        input_source: ``runtime`` (all inputs are runtime values), ``aot`` (none are: graph inputs
            or producers that could not be substituted) or ``runtime+aot``.
        producers: Indices of the rows this row consumes.
        replayed_ops: Unlogged nodes replayed with this one (rest of its group or delegate).
        transform: How the runtime value was brought to the AOT layout (identity, reshape, ...).
        match: How alignment chose the runtime value.
        module_path: Innermost ``nn.Module`` path of ``node``; for a delegate call's row, the modules
            of the compute ops inside it (comma-separated, in graph order).
        source_line: The model's own source line of ``node``; for a delegate call's row, that of its
            only compute op (None when it holds several: ``delegate`` lists each with its line).
        stack_traces: ``{op: stack trace}`` for ``aot_ops``.
        latency: Average duration of the runtime events of this row (target time unit), or None.
        nonfinite: NaN/Inf count in the runtime output.
        note: Everything else worth knowing (fallbacks, why a metric is missing).
        input_sources: Where each replayed input came from, one entry per input: a producer's
            runtime output (and its row), a delegate call's logged argument, ``step_inputs``, or
            the representative input (``input_source`` counts these).
        delegate: For a delegate call's row: its backend, call index and the convolutions,
            matmuls and linears inside with module paths and source lines (``node`` is only the
            partition's last node, often a dequantize); else None.
        method: The method the row belongs to, in a program of several methods (``forward``,
            ``encode``, ...; see :mod:`numdiff.gap.methods`); None in a program of one.
    """

    index: int
    aot_handle: DebugHandle
    aot_ops: list[str]
    runtime_ops: list[str]
    runtime_handle: DebugHandle
    node: str
    element: int | None
    op_type: str
    local_gap: float
    accumulated_gap: float
    local_noise_units: float
    accumulated_rel: float
    amplification: float
    verdict: Verdict
    is_culprit: bool
    noise: str
    input_source: str
    producers: tuple[int, ...]
    replayed_ops: tuple[str, ...]
    transform: str
    match: str
    module_path: str | None
    source_line: str | None
    stack_traces: dict[str, str | None]
    latency: float | None
    nonfinite: int
    note: str | None
    input_sources: tuple[str, ...] = ()
    delegate: str | None = None
    method: str | None = None

    @property
    def delegate_call(self) -> str | None:
        """A delegate call's backend and call index (``XnnpackBackend #2``), else None."""
        return delegate_call(self.delegate)

    @property
    def title(self) -> str:
        """The row in one short line for tables and summaries (:func:`numdiff._core.names.row_title`;
        ``aot_ops`` keeps every name, ``delegate`` lists a delegate's compute ops)."""
        return row_title(self.aot_ops, self.delegate)


@dataclass(frozen=True, slots=True)
class NonFinite:
    """A row (the first in execution order) whose runtime output holds NaN or Inf."""

    row: int
    node: str
    count: int
    inputs_nonfinite: bool
    replay_nonfinite: int

    def __str__(self) -> str:
        where = "its inputs already did" if self.inputs_nonfinite else "its inputs were finite"
        replay = ("the replay on the same inputs has them too" if self.replay_nonfinite
                  else "the replay on the same inputs has none")
        return f"first non-finite runtime output: row {self.row} ({self.node}), {self.count} NaN/Inf; {where}; {replay}"

    def as_the_model_computes(self) -> str:
        """The line for NaN/Inf the replay holds at the same places (``CulpritReport.model_nonfinite``)."""
        return (f"NaN/Inf the model itself computes from row {self.row} ({self.node}), {self.count} there: the replay "
                "on the same inputs holds them at the same places (e.g. a -inf attention mask), so the device did "
                "not make them")


@dataclass(frozen=True, slots=True)
class MatchRecord:
    """How one AOT node or runtime output was accounted for (``method``: as in :class:`CulpritRow`)."""

    side: str
    name: str
    handle: DebugHandle | None
    status: str
    detail: str
    method: str | None = None


@dataclass(frozen=True, slots=True)
class RunFigures:
    """Local error of every row in one run (when runs logged different values).

    Attributes:
        run: Run index.
        local_gap: Per row (report order); NaN where the run cannot be replayed (see ``note``).
        local_noise_units: Per row, likewise.
        culprits: Row indices that are culprits in this run.
        note: Why some rows have no figure, if any.
    """

    run: int
    local_gap: tuple[float, ...]
    local_noise_units: tuple[float, ...]
    culprits: tuple[int, ...]
    note: str | None = None


#: How the notes about a whole method of a multi-method program begin (see ``CulpritReport.notes``).
METHOD_NOTE = "method '"
#: How the sentence of a row's note begins that names the known device deviation behind a culprit,
#: verified by a replay (:mod:`numdiff.culprits._deviations`); shown under the culprit.
DEVICE_DEVIATION = "device deviation, verified: "

_ROW_COLUMNS = ("aot_debug_handle", "aot_ops", "runtime_ops", "runtime_debug_handle", "local_gap",
                "accumulated_gap", "amplification", "verdict", "is_culprit", "local_noise_units", "noise",
                "input_source", "input_sources", "delegate", "replayed_ops", "transform", "match", "module_path", "source_line",
                "latency", "nonfinite", "note", "stack_traces")


def inputs_in_doubt_note(names: Sequence[str]) -> str:
    """The note of a run whose graph inputs ``names`` may not be the ETRecord's representative ones."""
    return (f"graph input(s) {', '.join(names)}: no op that reads them agrees with its replay on the ETRecord's "
            "representative inputs (one is unrelated to it, several disagree, or a slightly different input explains "
            "it), so this run may have used other "
            "inputs; those ops are not judged: " + INPUTS_HINT)


def inputs_assumed_note(names: Sequence[str]) -> str:
    """The note of a run whose verdicts rest on graph inputs ``names`` being the representative ones."""
    return (f"verdicts on the op reading graph input(s) {', '.join(names)} assume the run used the ETRecord's "
            "representative inputs (the runtime does not log graph inputs, and no other op that reads them "
            "confirms it; a slightly different input looks like a wrong op there): if the device ran other inputs, "
            "pass them (step_inputs=, CLI --step-inputs)")


def _why_not_a_culprit(row: CulpritRow, higher_is_better: bool) -> str:
    """Why the worst row of the plain gap table is not a culprit, in words that match its numbers: its
    replay is clearly better than the table's number (the error came from its inputs; or, when no row
    feeds it, from computing as the backend does: XNNPACK's int32 bias, say), or the two are about the
    same and within the op's expected noise (nothing was inherited: there is little error)."""
    local, accumulated = row.local_gap, row.accumulated_gap
    if row.verdict is Verdict.NOT_JUDGED:
        return "its graph inputs may not be the run's, so nothing is said about it (see its note)"
    if row.verdict is Verdict.REPLAY_MISMATCH:
        return "its replay disagrees with a runtime that matches the reference (see its note)"
    if math.isnan(local):
        return "not replayed (see its note)"
    better = local > accumulated if higher_is_better else local < accumulated
    if better and not math.isclose(local, accumulated, rel_tol=0.05):
        if not row.producers:  # nothing to inherit from: the reference computes it otherwise than the replay
            return ("no row feeds it: its replay on the run's inputs agrees with the runtime, the reference run "
                    "differs from that replay (other inputs, or ops the replay computes as the backend does)")
        return "its error is inherited from its inputs"
    return "its local error is within its expected noise"


@dataclass(frozen=True, slots=True)
class CulpritReport:
    """Local vs inherited error for every aligned pair (``Inspector.find_culprits``).

    Attributes:
        rows: One :class:`CulpritRow` per aligned pair, in execution order (in a program of several
            methods: each method's rows in turn, numbered on from the previous method's).
        metric: Comparator class name of ``local_gap`` / ``accumulated_gap``.
        graph_name: The reference graph (several methods: each one's, ``"graph (method), ..."``).
        first_nonfinite: The first runtime output holding NaN/Inf its replay on the same inputs does
            not hold at the same places (the device made them), or None.
        matching: How every AOT node and runtime output was accounted for.
        higher_is_better: How to read the metric.
        notes: Remarks from capture and alignment. Several methods: first one note per method of
            the ETRecord (``"method 'encode': ..."``: compared on which graph and inputs, or why not),
            then each method's own notes prefixed with ``[method]``.
        runs: Per-run figures when the runs logged different values (else empty).
        quantization: The quantization view (``find_culprits(float_program=...)``), else None.
        decode: The decode-step view (``find_culprits(step_inputs=... or decode_steps=True)``), else None.
        inside_delegates: Tapped ops inside delegates (``find_culprits(taps=..., tap_outputs=...)``), else None.
        inputs_in_doubt: Graph inputs this run may not have shared with the ETRecord's representative
            inputs (no op that reads them agrees with its replay, and some are unrelated to it): the
            ops reading them are ``not-judged``. Several methods: ``"name (method m)"``.
        model_nonfinite: The first runtime output whose NaN/Inf its replay holds too, at the same
            places (the model computes them, e.g. a -inf attention mask: no fault), or None.
        inputs_assumed: Graph inputs a verdict beyond noise rests on without confirmation: the one op
            that reads them disagrees with its replay but is related to it, which a wrong op and a
            slightly different input both explain (the verdict assumes the representative inputs).
        methods_in_doubt: In a program of several methods, those with inputs in doubt (empty in a
            program of one: then ``inputs_in_doubt`` concerns its only method).
    """

    rows: tuple[CulpritRow, ...]
    metric: str
    graph_name: str
    first_nonfinite: NonFinite | None = None
    matching: tuple[MatchRecord, ...] = ()
    higher_is_better: bool = False
    notes: tuple[str, ...] = field(default=())
    runs: tuple[RunFigures, ...] = field(default=())
    quantization: QuantizationView | None = None
    decode: DecodeView | None = None
    inside_delegates: TapView | None = None
    inputs_in_doubt: tuple[str, ...] = field(default=())
    inputs_assumed: tuple[str, ...] = field(default=())
    model_nonfinite: NonFinite | None = None
    methods_in_doubt: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        """True when no culprit was found."""
        return not self.culprits

    @property
    def culprits(self) -> list[CulpritRow]:
        """The culprit rows, in execution order."""
        return [r for r in self.rows if r.is_culprit]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per aligned pair in execution order (columns: see :class:`CulpritRow`; a ``method``
        column at the end in a program of several methods)."""
        import pandas as pd

        records = [{
            "aot_debug_handle": r.aot_handle, "aot_ops": r.aot_ops, "runtime_ops": r.runtime_ops,
            "runtime_debug_handle": r.runtime_handle, "local_gap": r.local_gap,
            "accumulated_gap": r.accumulated_gap, "amplification": r.amplification, "verdict": r.verdict.value,
            "is_culprit": r.is_culprit, "local_noise_units": r.local_noise_units, "noise": r.noise,
            "input_source": r.input_source,
            "input_sources": list(r.input_sources), "delegate": r.delegate, "replayed_ops": list(r.replayed_ops), "transform": r.transform,
            "match": r.match, "module_path": r.module_path, "source_line": r.source_line, "latency": r.latency,
            "nonfinite": r.nonfinite, "note": r.note, "stack_traces": r.stack_traces,
        } for r in self.rows]
        frame = pd.DataFrame(records, columns=list(_ROW_COLUMNS))
        if methods_of(self):
            frame["method"] = [r.method for r in self.rows]
        frame.attrs["metric"] = self.metric
        return frame

    def matching_dataframe(self) -> pd.DataFrame:
        """Every AOT node and runtime output: matched (and how) or unmatched (and why)."""
        import pandas as pd

        frame = pd.DataFrame([{"side": m.side, "name": m.name, "handle": m.handle, "status": m.status,
                               "detail": m.detail} for m in self.matching],
                             columns=["side", "name", "handle", "status", "detail"])
        if methods_of(self):
            frame["method"] = [m.method for m in self.matching]
        return frame

    def by_module(self) -> pd.DataFrame:
        """Roll-up per ``nn.Module`` path (and every enclosing path): rows, culprits, worst
        local and accumulated gap, worst noise units, summed latency, first source line."""
        import pandas as pd

        groups: dict[str, list[CulpritRow]] = {}
        for r in self.rows:
            if not r.module_path:
                continue
            parts = r.module_path.split(".")
            for depth in range(1, len(parts) + 1):
                groups.setdefault(".".join(parts[:depth]), []).append(r)
        worst = max if not self.higher_is_better else min
        records = []
        for path, rows in groups.items():
            local = [r.local_gap for r in rows if not math.isnan(r.local_gap)]
            acc = [r.accumulated_gap for r in rows if not math.isnan(r.accumulated_gap)]
            latency = [r.latency for r in rows if r.latency is not None]
            records.append({
                "module_path": path, "rows": len(rows), "culprits": sum(r.is_culprit for r in rows),
                "worst_local_gap": worst(local) if local else math.nan,
                "worst_accumulated_gap": worst(acc) if acc else math.nan,
                "worst_local_noise_units": max((r.local_noise_units for r in rows), default=math.nan),
                "latency": sum(latency) if latency else None,
                "source_line": next((r.source_line for r in rows if r.source_line), None),
            })
        return pd.DataFrame(records, columns=["module_path", "rows", "culprits", "worst_local_gap",
                                              "worst_accumulated_gap", "worst_local_noise_units", "latency",
                                              "source_line"])

    def per_run_dataframe(self) -> pd.DataFrame:
        """One row per (pair, run): ``aot_ops``, ``run``, ``local_gap``, ``local_noise_units``,
        ``is_culprit``; plus ``local_spread`` (max - min of the pair's finite local noise units)."""
        import pandas as pd

        records = []
        for index, row in enumerate(self.rows):
            units = [f.local_noise_units[index] for f in self.runs if index < len(f.local_noise_units)]
            finite = [u for u in units if not math.isnan(u) and not math.isinf(u)]
            spread = max(finite) - min(finite) if finite else math.nan
            for figures in self.runs:
                if index >= len(figures.local_gap):
                    continue
                records.append({"aot_ops": row.aot_ops, "run": figures.run, "local_gap": figures.local_gap[index],
                                "local_noise_units": figures.local_noise_units[index],
                                "is_culprit": index in figures.culprits, "local_spread": spread,
                                "note": figures.note})
        return pd.DataFrame(records, columns=["aot_ops", "run", "local_gap", "local_noise_units", "is_culprit",
                                              "local_spread", "note"])

    def worst_accumulated(self) -> CulpritRow | None:
        """The row with the worst accumulated gap (what a reader of the plain gap table would blame)."""
        rows = [r for r in self.rows if not math.isnan(r.accumulated_gap)]
        if not rows:
            return None
        key = (lambda r: r.accumulated_gap) if not self.higher_is_better else (lambda r: -r.accumulated_gap)
        return max(rows, key=key)

    def __str__(self) -> str:
        culprits = self.culprits
        lines = [headline(self)]
        if methods_of(self):  # what each method was compared on, and the methods left out
            lines += [n for n in self.notes if n.startswith(METHOD_NOTE)]
        if self.first_nonfinite is not None:
            lines.append(str(self.first_nonfinite))
        if self.model_nonfinite is not None:
            lines.append(self.model_nonfinite.as_the_model_computes())
        for r in culprits:
            deviations = [part for part in (r.note or "").split("; ") if part.startswith(DEVICE_DEVIATION)]
            if r.delegate is not None:
                lines.append(f"culprit: delegate {r.delegate} (handle {r.aot_handle}, {r.verdict.value})"
                             + in_method(r))
                if not deviations:  # a verified deviation already names the op inside
                    lines.append("  taps localize the op inside it: find_culprits(taps=...), README "
                                 "\"Find the culprit > Deeper localization\"")
            else:
                lines.append(f"culprit: {r.title} (handle {r.aot_handle}, {r.verdict.value}) "
                             f"module {r.module_path or '?'}" + in_method(r))
                lines.append(f"  at {r.source_line or 'unknown source line'}")
            lines.append(f"  local {_fmt(r.local_gap)} ({_fmt(r.local_noise_units)} noise units), "
                         f"accumulated {_fmt(r.accumulated_gap)}")
            lines += [f"  {part}" for part in deviations]
        if self.inputs_in_doubt:
            lines.append(inputs_in_doubt_note(self.inputs_in_doubt))
        if self.inputs_assumed:
            lines.append(inputs_assumed_note(self.inputs_assumed))
        replay = [r for r in self.rows if r.verdict is Verdict.REPLAY_MISMATCH]
        if replay:
            lines.append(f"{len(replay)} row{'s' if len(replay) != 1 else ''} with a replay problem, not judged "
                         f"(verdict {Verdict.REPLAY_MISMATCH.value}): " + ", ".join(r.node for r in replay))
        worst = self.worst_accumulated()
        if worst is not None and not worst.is_culprit:
            lines.append(f"worst accumulated row: {worst.title}{in_method(worst)} "
                         f"({_fmt(worst.accumulated_gap)}), "
                         f"verdict {worst.verdict.value}: {_why_not_a_culprit(worst, self.higher_is_better)}")
        if self.runs:
            per_run = sorted({i for f in self.runs for i in f.culprits})
            lines.append(f"{len(self.runs)} runs logged different values; culprit rows per run: "
                         + "; ".join(f"run {f.run}: {list(f.culprits)}" for f in self.runs)
                         + (" (see per_run_dataframe())" if per_run else ""))
        if self.quantization is not None:
            lines.append(str(self.quantization))
        if self.decode is not None:
            lines.append(str(self.decode))
        if self.inside_delegates is not None:
            lines.append(str(self.inside_delegates))
        aliased = [m for m in self.matching if m.status == ALIASED]
        if aliased:
            lines.append(f"{len(aliased)} op{'s' if len(aliased) != 1 else ''} {ALIASED} (the program aliases "
                         "their memory: no kernel, no runtime value; replayed inside the rows that read them): "
                         + ", ".join(f"{m.name} (handle {m.handle})" for m in aliased))
        unmatched = sum(1 for m in self.matching if m.status == "unmatched")
        if unmatched:
            lines.append(f"{unmatched} AOT nodes or runtime outputs unmatched (see matching_dataframe())")
        return "\n".join(lines)


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.4g}"


def jsonable(value: object) -> object:
    """A cell as JSON: tuples → lists, NaN/inf → strings, enums → values."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item):
        return jsonable(value.item())
    return value
