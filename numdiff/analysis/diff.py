"""Compare two analyses (a base build and a new one): per-op deltas, roll-ups and a CI verdict.

Rows are matched by op: gap rows by their reference ops (the n-th row with the same ops in
one file with the n-th in the other), runtime events by block, name and occurrence. Error is
the row's lowest SNR, capped at ``snr_cap_db`` on both sides (beyond it differences are float
rounding: an identical output has an infinite SNR). Latency is the event's p50.

A regression is an op whose SNR fell by more than ``max_snr_drop_db``, or an op (or the whole
run) whose p50 grew by more than ``max_latency_increase_pct`` percent *and* by at least
``min_latency_increase_us`` (so that a 1 µs op taking 2 µs is not a 100 % regression).

Before anything is compared, the two analyses must be of one program: when both carry a program
signature (:mod:`numdiff.analysis.signature`) and they differ, :func:`diff_analyses` raises
:class:`DifferentProgramsError` (``numdiff diff`` exits 3, the service answers 409). An analysis
without a signature (written before format version 3, or without an ETRecord) is compared with a
warning that its program could not be checked.

Error rows are not compared when either run may have used other graph inputs than the ETRecord's
representative ones (:func:`inputs_doubt`; in a program of several methods, only the rows of the
methods in doubt): the report fails with the reason, since a gap against a reference run on other
inputs hides any regression.

A gate passes only what it compared: for each kind the base has (error rows, timed ops), at least
``min_matched_share`` (default 50 %) of the base's ops must be found in the new analysis, and the
base must have something to compare at all; otherwise the report fails (``numdiff diff`` exits 1)
with :attr:`DiffReport.coverage_failures` saying what was not matched.

Latencies are compared in microseconds. A profile timed in ``cycles`` has no fixed duration:
when either analysis is in cycles (or in a unit numdiff does not know), its latencies are not
compared at all and :attr:`DiffReport.notes` says why; the error rows still are.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from collections.abc import Callable, KeysView
from dataclasses import dataclass, field
from typing import Any, TypeVar

from numdiff._core.advice import INPUTS_HINT
from numdiff._core.events import DELEGATE_CALL, OPERATOR_CALL, is_runtime_step, is_wrapper
from numdiff._core.time_units import unit_factor
from numdiff.analysis.doubt import doubted_methods, is_clear
from numdiff.analysis.models import Analysis
from numdiff.analysis.records import EventStats, GapRowModel
from numdiff.analysis.signature import same_program
from numdiff.errors import MismatchedArtifactsError

__all__ = ["CATEGORIES", "DiffReport", "DifferentProgramsError", "GateThresholds", "OpDelta", "categorize",
           "check_same_program", "diff_analyses", "inputs_doubt", "program_note", "reference_inputs_note"]

#: Op categories and the words that put an op in them. Names are split into lower-case words
#: ("aten.native_layer_norm.default" -> native, layer, norm, default; XNNPACK's "Fully Connected
#: (NC, QS8) GEMM #1" -> fully, connected, nc, qs8, gemm, 1); the first category, in this order,
#: that any word of any of the op's names belongs to wins, so a fused group holding a linear
#: counts as matmul/GEMM.
CATEGORIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("convolution", frozenset({"convolution", "deconvolution", "conv", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                               "conv_transpose2d", "depthwise"})),
    ("matmul/GEMM", frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "gemm", "einsum", "fully", "matrix"})),
    ("normalization", frozenset({"norm", "batchnorm", "layernorm", "groupnorm", "rmsnorm", "rms", "softmax",
                                 "normalize"})),
    ("elementwise", frozenset({"add", "sub", "mul", "div", "relu", "gelu", "sigmoid", "tanh", "exp", "log", "sqrt",
                               "rsqrt", "pow", "clamp", "hardtanh", "silu", "where", "neg", "abs", "quantize",
                               "dequantize", "maximum", "minimum", "erf", "sin", "cos", "floor", "ceil", "round", "elu",
                               "hardswish", "hardsigmoid", "leaky", "prelu", "multiply", "subtract", "divide", "square",
                               "negate", "convert", "reciprocal"})),
    ("data movement", frozenset({"permute", "transpose", "view", "reshape", "cat", "concatenate", "slice", "select",
                                 "expand", "clone", "copy", "squeeze", "unsqueeze", "split", "chunk", "gather", "index",
                                 "pad", "flatten", "stack", "repeat", "unbind", "narrow", "contiguous"})),
)


def categorize(names: list[str] | tuple[str, ...] | str) -> str:
    """The category of an op from its name(s) (see :data:`CATEGORIES`), else "other"."""
    items = [names] if isinstance(names, str) else list(names)
    words = {w for name in items for w in re.split(r"[^a-z0-9]+", name.lower()) if w}
    for category, members in CATEGORIES:
        if words & members:
            return category
    return "other"


@dataclass(frozen=True, slots=True)
class GateThresholds:
    """When a change between two analyses is a regression, for the CI gate (defaults documented in the
    module docstring). Not :class:`numdiff.culprits.Thresholds`, which sets culprit localization's noise."""

    max_snr_drop_db: float = 3.0
    max_latency_increase_pct: float = 10.0
    min_latency_increase_us: float = 5.0
    snr_cap_db: float = 140.0
    min_matched_share: float = 0.5


class DifferentProgramsError(MismatchedArtifactsError):
    """Two analyses of different programs (their program signatures differ): there is nothing to compare.

    ``numdiff diff`` exits 3 (bad input); ``POST /api/v1/compare`` answers 409.
    """


def _who(analysis: Analysis) -> str:
    labels = ", ".join(f"{k}={v}" for k, v in analysis.labels.items()) or "(no labels)"
    program = analysis.program
    if program is None:
        return labels
    ops = ", ".join(f"{m}: {n} ops" for m, n in program.methods.items())
    return f"{labels} [program {program.sha256[:12]}, {ops}]"


def check_same_program(base: Analysis, new: Analysis) -> str | None:
    """None when both analyses are of one program; the warning line when that could not be checked.

    Raises:
        DifferentProgramsError: Their program signatures differ.
    """
    if base.program is not None and new.program is not None:
        if not same_program(base.program, new.program):
            raise DifferentProgramsError(
                f"base {_who(base)} and new {_who(new)} are analyses of different programs: their ops cannot be "
                "compared\nCompare two analyses of one program (the same ETRecord's graph); if the model was "
                "changed on purpose, analyse the old build again or make the new run the baseline.")
        return None
    return program_note(base, new)


def inputs_doubt(base: Analysis, new: Analysis) -> str | None:
    """Why (some of) the error rows cannot be compared when either run may have used other graph inputs
    than the ETRecord's representative ones (``culprits.inputs_in_doubt``), else None. Such a run's gaps
    compare the device with a reference run on other inputs: an op's regression drowns in that difference."""
    methods = doubted_methods((base, new))
    if methods is None:
        return None
    which = " and ".join(f"the {side} run's graph input(s) {', '.join(a.culprits.inputs_in_doubt)}"
                         for side, a in (("base", base), ("new", new)) if a.culprits.inputs_in_doubt)
    what = f"error of method(s) {', '.join(sorted(methods))}" if methods else "error"
    return (f"{what} not compared: {which} may not be the ETRecord's representative inputs (no op that reads them "
            "agrees with its replay on those, or those ops are badly wrong), so the gaps compare the device with a "
            "reference run on other inputs; analyse (or submit) it again saying which inputs it used: " + INPUTS_HINT)


_REFERENCE_INPUTS = {"own": "the run's own inputs (step_inputs)", "representative": "the ETRecord's representative inputs"}


def reference_inputs_note(base: Analysis, new: Analysis) -> str | None:
    """The line saying the two gaps' reference runs took different inputs, else None. Each gap is then its
    device's distance from the model on the inputs named, so they compare only if those declarations are
    true (a run said to use the representative inputs that did not is wrong at every layer)."""
    if base.gap is None or new.gap is None or base.gap.reference_inputs == new.gap.reference_inputs:
        return None
    return (f"the base's gap ran the reference graph on {_REFERENCE_INPUTS[base.gap.reference_inputs]}, the new's "
            f"on {_REFERENCE_INPUTS[new.gap.reference_inputs]}: each layer's error is its device's distance from "
            "the model on the inputs named, which holds only if the run did use them")


def program_note(base: Analysis, new: Analysis) -> str | None:
    """The warning line for analyses whose programs cannot be checked (one has no signature), else None."""
    missing = [side for side, a in (("base", base), ("new", new)) if a.program is None]
    if not missing:
        return None
    return (f"program not checked: the {' and '.join(missing)} analysis has no program signature (written by numdiff "
            f"before format version 3, or without an ETRecord); write it again with 'numdiff analyze' to have it checked")

@dataclass(frozen=True, slots=True)
class OpDelta:
    """One op seen in both analyses (error from the gap rows, latency from the events)."""

    kind: str  # "error" or "latency"
    key: str
    category: str
    base: float | None
    new: float | None
    delta: float | None
    delta_pct: float | None
    regression: bool


@dataclass(frozen=True, slots=True)
class DiffReport:
    """Everything ``numdiff diff`` prints; ``regressions`` decides the exit status."""

    thresholds: GateThresholds
    ops: list[OpDelta]
    categories: list[dict[str, Any]]
    delegates: list[dict[str, Any]]
    totals: dict[str, Any]
    only_in_base: list[str] = field(default_factory=list)
    only_in_new: list[str] = field(default_factory=list)
    labels: tuple[dict[str, str], dict[str, str]] = ({}, {})
    notes: list[str] = field(default_factory=list)
    #: ``{kind: (base ops matched in new, base ops)}`` for "error" (gap rows) and "latency" (timed ops).
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Why the gate fails although no op regressed: too few of the base's ops were matched.
    coverage_failures: list[str] = field(default_factory=list)
    #: "same" (both signatures equal) or "not checked" (one has none).
    program_check: str = "same"
    #: Why layers' error was not compared (every layer's, or a doubted method's: :func:`inputs_doubt`), which
    #: fails the gate; else None.
    error_not_compared: str | None = None

    @property
    def regressions(self) -> list[OpDelta]:
        return [d for d in self.ops if d.regression] + (
            [OpDelta("latency", "total (top-level events)", "all", self.totals["base_us"], self.totals["new_us"],
                     self.totals["delta_us"], self.totals["delta_pct"], True)] if self.totals["regression"] else [])

    @property
    def passed(self) -> bool:
        """The gate: no regression, and enough of the base's ops were compared."""
        return not self.regressions and not self.coverage_failures and self.error_not_compared is None

    def __bool__(self) -> bool:
        """True when the gate passes (as a check result): see :attr:`passed`."""
        return self.passed


def _snr(row: GapRowModel, cap: float) -> float | None:
    finite = [v for v in row.snr if not math.isnan(v)]
    return min(min(finite), cap) if finite else None


T = TypeVar("T")


def _keyed(items: list[T], key: Callable[[T], str]) -> dict[str, T]:
    seen: Counter[str] = Counter()
    out: dict[str, T] = {}
    for item in items:
        k = key(item)
        seen[k] += 1
        out[k if seen[k] == 1 else f"{k} [{seen[k]}]"] = item
    return out


def _row_key(row: GapRowModel) -> str:
    """A gap row's ops; in a program of several methods, prefixed with its method (each can have a ``linear``)."""
    return (f"{row.method}: " if row.method else "") + " + ".join(row.aot_ops)


def _us_per_unit(analysis: Analysis) -> float | None:
    """Microseconds in one of the analysis's time units; None for cycles (or an unknown unit)."""
    return unit_factor(analysis.profile.time_unit, "us")


def _top_level(e: EventStats) -> bool:
    """An event timing ops at the top level: not inside a delegate, not a runtime step or OPERATOR_CALL
    (a delegate call is top-level: its time is the delegate's)."""
    return not e.is_delegated_op and not is_runtime_step(e.name) and e.name != OPERATOR_CALL


def _op_events(analysis: Analysis, scale: float) -> dict[str, tuple[EventStats, float]]:
    """Op-level events (not wrappers, not framework steps) keyed by block/name/occurrence, with p50 in µs."""
    out: dict[str, tuple[EventStats, float]] = {}
    for block in analysis.profile.blocks:
        events = [e for e in block.events if e.p50 is not None and not is_wrapper(e.name)]
        for k, e in _keyed(events, lambda e: f"{block.name}/{e.name}").items():
            out[k] = (e, float(e.p50 or 0.0) * scale)
    return out


def _top_level_us(analysis: Analysis, scale: float) -> float:
    return sum(float(e.p50 or 0.0) * scale for b in analysis.profile.blocks for e in b.events if _top_level(e))


def _delegates(analysis: Analysis, scale: float | None) -> dict[str, dict[str, float]]:
    """Per delegate: top-level ops and calls inside it, and (when ``scale`` converts to µs) its time and shares."""
    total_ops = total_us = 0.0
    per: dict[str, dict[str, float]] = {}
    for block in analysis.profile.blocks:
        for e in block.events:
            if not _top_level(e):
                continue
            ops = float(len(e.op_types) or 1)
            us = float(e.p50 or 0.0) * (scale or 0.0)
            total_ops += ops
            total_us += us
            if e.name == DELEGATE_CALL:
                d = per.setdefault(e.delegate_backend or "unknown delegate", {"ops": 0.0, "us": 0.0, "calls": 0.0})
                d["ops"] += ops
                d["us"] += us
                d["calls"] += 1
    for d in per.values():
        d["op_share"] = d["ops"] / total_ops if total_ops else 0.0
        d["time_share"] = d["us"] / total_us if total_us else 0.0
        if scale is None:  # no time to share out: leave the time figures out (None below)
            del d["us"], d["time_share"]
    return per


def _lowest(deltas: list[OpDelta], side: str) -> float | None:
    values = [v for d in deltas for v in [getattr(d, side)] if v is not None]
    return min(values) if values else None


def _pct(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return (new - base) / base * 100.0


def diff_analyses(base: Analysis, new: Analysis, thresholds: GateThresholds | None = None) -> DiffReport:
    """Per-op deltas of error and latency between two analyses, with roll-ups and regressions.

    Latencies are compared only when both analyses are timed in a unit of time (not cycles).
    """
    t = thresholds or GateThresholds()
    unchecked = check_same_program(base, new)
    notes: list[str] = []
    if unchecked is not None:
        warnings.warn(unchecked, stacklevel=2)
        notes.append(unchecked)
    if (note := reference_inputs_note(base, new)) is not None:
        notes.append(note)
    b_scale, n_scale = _us_per_unit(base), _us_per_unit(new)
    if b_scale is None or n_scale is None:
        units = f"base in {base.profile.time_unit}, new in {new.profile.time_unit}"
        notes.append(f"latencies not compared ({units}): cycles have no fixed duration, so they cannot be "
                     "compared with each other or with the thresholds in µs")
    ops: list[OpDelta] = []
    base_rows = _keyed(base.gap.rows if base.gap else [], _row_key)
    new_rows = _keyed(new.gap.rows if new.gap else [], _row_key)
    doubt, doubted = inputs_doubt(base, new), doubted_methods((base, new))
    # the rows of the methods in doubt (every row in a program of one method) are not compared
    base_rows = {k: r for k, r in base_rows.items() if is_clear(r, doubted)}
    new_rows = {k: r for k, r in new_rows.items() if is_clear(r, doubted)}
    compared_rows = base_rows.keys() & new_rows.keys()
    for key in compared_rows:
        b, n = _snr(base_rows[key], t.snr_cap_db), _snr(new_rows[key], t.snr_cap_db)
        delta = None if b is None or n is None else n - b
        ops.append(OpDelta("error", key, categorize(base_rows[key].aot_ops), b, n, delta, None,
                           delta is not None and -delta > t.max_snr_drop_db))
    timed = b_scale is not None and n_scale is not None
    base_ev = _op_events(base, b_scale) if b_scale is not None and timed else {}
    new_ev = _op_events(new, n_scale) if n_scale is not None and timed else {}
    for key in base_ev.keys() & new_ev.keys():
        (e, b_us), (_, n_us) = base_ev[key], new_ev[key]
        pct = _pct(b_us, n_us)
        grew = n_us - b_us
        regression = grew >= t.min_latency_increase_us and (pct is None or pct > t.max_latency_increase_pct)
        ops.append(OpDelta("latency", key, categorize([*e.op_types, e.name]), b_us, n_us, grew, pct, regression))
    ops.sort(key=lambda d: (not d.regression, d.kind, d.key))

    categories = []
    for name in [c for c, _ in CATEGORIES] + ["other"]:
        lat = [d for d in ops if d.kind == "latency" and d.category == name]
        err = [d for d in ops if d.kind == "error" and d.category == name]
        if not lat and not err:
            continue
        b_us = sum(d.base or 0.0 for d in lat)
        n_us = sum(d.new or 0.0 for d in lat)
        categories.append({"category": name, "ops": len(lat), "layers": len(err), "base_us": b_us, "new_us": n_us,
                           "delta_pct": _pct(b_us, n_us), "worst_snr_base": _lowest(err, "base"),
                           "worst_snr_new": _lowest(err, "new"),
                           "regressions": sum(d.regression for d in lat + err)})
    b_del, n_del = _delegates(base, b_scale if timed else None), _delegates(new, n_scale if timed else None)
    delegates = [{"delegate": name, "base_op_share": b_del.get(name, {}).get("op_share"),
                  "new_op_share": n_del.get(name, {}).get("op_share"),
                  "base_time_share": b_del.get(name, {}).get("time_share"),
                  "new_time_share": n_del.get(name, {}).get("time_share"),
                  "base_us": b_del.get(name, {}).get("us"), "new_us": n_del.get(name, {}).get("us")}
                 for name in sorted(b_del.keys() | n_del.keys())]
    if b_scale is not None and n_scale is not None:
        b_total, n_total = _top_level_us(base, b_scale), _top_level_us(new, n_scale)
        total_pct = _pct(b_total, n_total)
        totals: dict[str, Any] = {
            "base_us": b_total, "new_us": n_total, "delta_us": n_total - b_total, "delta_pct": total_pct,
            "regression": (n_total - b_total) >= t.min_latency_increase_us
            and total_pct is not None and total_pct > t.max_latency_increase_pct}
    else:
        totals = {"base_us": None, "new_us": None, "delta_us": None, "delta_pct": None, "regression": False}
    coverage, failures = _coverage(base, new, base_rows.keys(), new_rows.keys(), base_ev.keys(), new_ev.keys(),
                                   t.min_matched_share, compare_error=doubt is None or bool(base_rows))
    return DiffReport(t, ops, categories, delegates, totals, coverage=coverage, coverage_failures=failures,
                      program_check="same" if unchecked is None else "not checked",
                      only_in_base=sorted(base_rows.keys() - new_rows.keys()) + sorted(base_ev.keys() - new_ev.keys()),
                      only_in_new=sorted(new_rows.keys() - base_rows.keys()) + sorted(new_ev.keys() - base_ev.keys()),
                      labels=(base.labels, new.labels), notes=notes, error_not_compared=doubt)


def _coverage(base: Analysis, new: Analysis, base_rows: KeysView[str], new_rows: KeysView[str],
              base_ev: KeysView[str], new_ev: KeysView[str],
              min_share: float, compare_error: bool = True) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per kind the base has, how many of its ops the new analysis matched; and the failures below ``min_share``
    (``compare_error`` False: the layers were not compared, for a reason the report gives itself)."""
    coverage: dict[str, tuple[int, int]] = {}
    failures: list[str] = []
    for kind, what, b, n in (("error", "layers (gap rows)", base_rows, new_rows), ("latency", "timed ops", base_ev, new_ev)):
        if not b or (kind == "error" and not compare_error):
            continue
        matched = len(b & n)
        coverage[kind] = (matched, len(b))
        if matched < min_share * len(b) or not matched:
            why = ""
            if kind == "error" and new.gap is None:
                why = f": the new analysis has no gap ({new.gap_unavailable or 'not computed'})"
            failures.append(f"only {matched} of the base's {len(b)} {what} were found in the new analysis "
                            f"(at least {min_share:.0%} needed){why}")
    if not coverage and (compare_error or not base_rows):
        reason = base.gap_unavailable or "no gap rows"
        failures.append(f"nothing compared: the base analysis has neither gap rows ({reason}) nor timed ops "
                        "comparable with the new one's")
    return coverage, failures
