"""What :func:`~numdiff.runs_compare.compare.compare_runs` returns: typed, frozen records and their JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from numdiff.culprits import Verdict
from numdiff.runs_compare.fit import Fit

__all__ = ["Agreement", "OpComparison", "OutputComparison", "RunComparison", "RunsComparison", "Side",
           "TokenStep", "TokenView"]


class Agreement(str, Enum):
    """How one op's values in a run agree with the base run's."""

    IDENTICAL = "identical"
    """Bit for bit."""
    WITHIN_NOISE = "within-noise"
    """Different, within the tolerance, or beyond it while each run's op is within its own noise of the
    reference on its inputs (rounding of another kernel or accumulation order)."""
    DIVERGES = "diverges"
    """Beyond the tolerance while every op it consumes agrees, and some run's op is beyond its noise (or
    cannot be judged): the runs part here."""
    INHERITS = "inherits"
    """Beyond the tolerance, and so is an op it consumes: the difference comes from upstream."""
    NOT_COMPARED = "not-compared"
    """The values cannot be compared (see the note)."""

    @property
    def beyond_noise(self) -> bool:
        """Whether the runs differ beyond the tolerance here."""
        return self in (Agreement.DIVERGES, Agreement.INHERITS)


class Side(str, Enum):
    """Which run's op departs from the reference where the runs differ (each op replayed on that run's inputs)."""

    RUN = "run"
    BASE = "base"
    BOTH = "both"
    NEITHER = "neither"
    """The runs differ beyond the tolerance but each op is within its own noise of the reference."""
    UNKNOWN = "unknown"
    """A side's op has no local verdict (not replayed: see the culprit report)."""
    NONE = ""
    """The runs agree here: no side to name."""


@dataclass(frozen=True, slots=True)
class OpComparison:
    """One aligned op of a run against the same op of the base run.

    Attributes:
        index: Row of the culprit report (execution order).
        aot_ops: AOT op names (as in ``calculate_numeric_gap``).
        runtime_ops: Runtime op names.
        module_path: Innermost ``nn.Module`` path.
        gap_vs_base: The comparator between the base's value (as reference) and the run's.
        rel_diff: ``rms(run - base) / rms(base)`` (for integers: the largest absolute difference, in steps).
        verdict: :class:`Agreement`.
        fit: The run's values fitted against the base's (:class:`~numdiff.runs_compare.fit.Fit`).
        run_local: The run's local verdict (the op replayed on the run's own inputs vs the run).
        base_local: The base's local verdict.
        departs: Which side departs from the reference here (:class:`Side`; empty where they agree).
        note: Why something is missing, if it is.
    """

    index: int
    aot_ops: tuple[str, ...]
    runtime_ops: tuple[str, ...]
    module_path: str | None
    gap_vs_base: float
    rel_diff: float
    verdict: Agreement
    fit: Fit
    run_local: Verdict
    base_local: Verdict
    departs: Side
    note: str | None = None


@dataclass(frozen=True, slots=True)
class OutputComparison:
    """The program's outputs of a run against the base's.

    Attributes:
        source: ``program outputs`` (logged by the runtime for its first run) or ``output op`` (the op
            that makes the first output; ``output op, step N`` for decode runs: the step whose ops are shown).
        gap_vs_base: The comparator between the outputs.
        rel_diff: ``rms(run - base) / rms(base)``.
        beyond_noise: Beyond the tolerance.
        fit: The run's outputs fitted against the base's.
        answers_agree: Share of the output's rows (last dimension: classes, vocabulary) whose argmax is the
            base's; None for outputs that are not floating point with at least two classes.
    """

    source: str
    gap_vs_base: float
    rel_diff: float
    beyond_noise: bool
    fit: Fit
    answers_agree: float | None = None


@dataclass(frozen=True, slots=True)
class TokenStep:
    """One decode step of a run, read as tokens (the first program output is the logits).

    Attributes:
        step: Run index in the ETDump.
        token: Argmax of the run's logits.
        margin: Its logit minus the runner-up's (how close the choice was).
        reference_token: Argmax of the reference graph's logits on the run's own step inputs.
        topk_agreement: Top-k agreement of the run's logits with the reference's (same inputs).
        kl_vs_reference: ``KL(softmax(reference) || softmax(run))`` on the same inputs.
        base_token: The base run's token at this step (None for the base or a missing step).
        tensors_diverge: Some op of this step differs from the base beyond the tolerance.
    """

    step: int
    token: int
    margin: float
    reference_token: int | None
    topk_agreement: float
    kl_vs_reference: float
    base_token: int | None
    tensors_diverge: bool


@dataclass(frozen=True, slots=True)
class TokenView:
    """A decode run's steps as tokens, against the reference and the base run.

    Attributes:
        steps: One :class:`TokenStep` per step.
        first_token_differs: First step whose token differs from the base's, or None.
        first_tensor_divergence: First step where some op differs from the base beyond the tolerance.
        first_departs_from_reference: First step where some op of this run is beyond its noise
            (a culprit of the decode view), or None.
        first_token_departs_from_reference: First step whose token differs from the reference's on
            the same inputs, or None.
        k: The k of the top-k agreement.
    """

    steps: tuple[TokenStep, ...]
    first_token_differs: int | None
    first_tensor_divergence: int | None
    first_departs_from_reference: int | None
    first_token_departs_from_reference: int | None
    k: int


@dataclass(frozen=True, slots=True)
class RunComparison:
    """One run against the base run.

    Attributes:
        name: The run's name.
        ops: One :class:`OpComparison` per aligned op, in execution order (the first step's for decode runs).
        outputs: The program outputs against the base's, or None when neither logged them.
        departs_from_reference: Some op of this run is beyond its own noise (a culprit of its replay).
        culprits: The AOT ops of the run's culprits (its own replay).
        tokens: The decode view as tokens, for decode runs.
        notes: Remarks (fallbacks, what was not compared).
    """

    name: str
    ops: tuple[OpComparison, ...]
    outputs: OutputComparison | None
    departs_from_reference: bool
    culprits: tuple[tuple[str, ...], ...] = ()
    tokens: TokenView | None = None
    notes: tuple[str, ...] = ()

    @property
    def first_divergent(self) -> OpComparison | None:
        """The first op where the run parts from the base (verdict ``diverges``), or None."""
        return next((op for op in self.ops if op.verdict is Agreement.DIVERGES), None)

    @property
    def diverges(self) -> bool:
        """The run differs from the base beyond the tolerance (an op, the outputs or a token)."""
        tokens = self.tokens is not None and (self.tokens.first_token_differs is not None
                                              or self.tokens.first_tensor_divergence is not None)
        return (self.first_divergent is not None or tokens
                or (self.outputs is not None and self.outputs.beyond_noise))


@dataclass(frozen=True, slots=True)
class RunsComparison:
    """Runs of one program against a base run (``numdiff compare-runs``).

    Attributes:
        base: The base run's name.
        runs: The other runs, by name, in the order given.
        metric: Comparator class name of ``gap_vs_base``.
        higher_is_better: How to read it.
        tolerance: Relative difference (rms) within which floating-point values count as agreeing; None:
            by dtype (:data:`~numdiff.runs_compare.ops.DEFAULT_TOLERANCES`).
        base_culprits: The base run's own culprits (ops beyond noise on its own inputs).
        graph_name: The reference graph.
        notes: Remarks.
    """

    base: str
    runs: dict[str, RunComparison]
    metric: str
    higher_is_better: bool
    tolerance: float | None
    base_culprits: tuple[tuple[str, ...], ...] = ()
    graph_name: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def diverges(self) -> bool:
        """Some run differs from the base beyond the tolerance."""
        return any(r.diverges for r in self.runs.values())

    def to_json(self) -> dict[str, object]:
        """The comparison as JSON-ready data (numbers as numbers, null where there is none).

        The shape of issue 25: ``{"base", "runs": {name: {"first_divergent_op", "departs_from_reference",
        "ops": [{"aot_ops", "gap_vs_base", "verdict", "scale", "offset", "r2", ...}]}}}``, plus the
        metric, each op's local verdicts and the side that departs, the outputs and the tokens.
        """
        return {"base": self.base, "metric": self.metric, "higher_is_better": self.higher_is_better,
                "tolerance": self.tolerance, "graph": self.graph_name,
                "base_departs_from_reference": bool(self.base_culprits),
                "runs": {name: _run_json(run) for name, run in self.runs.items()},
                "notes": list(self.notes)}

    def headline(self) -> str:
        """One line: how many runs part from the base, and where the first does."""
        parted = [r for r in self.runs.values() if r.diverges]
        head = (f"compare-runs ({self.metric} against base {self.base!r}): {len(self.runs)} run"
                f"{'s' if len(self.runs) != 1 else ''}; {len(parted)} of them part{'s' if len(parted) == 1 else ''} "
                "from the base")
        if not parted:
            return head + ": every run agrees with the base within noise"
        return head + ": " + "; ".join(_run_line(r) for r in parted)

    def __str__(self) -> str:
        lines = [self.headline()]
        if self.base_culprits:
            lines.append(f"base {self.base!r} itself departs from the reference at "
                         + "; ".join(", ".join(c) for c in self.base_culprits))
        for run in self.runs.values():
            lines.append(f"{run.name}: {_run_line(run)}")
            if run.outputs is not None and run.outputs.fit.words and run.outputs.beyond_noise:
                lines.append(f"  {run.outputs.fit.words}")
            agree = None if run.outputs is None else run.outputs.answers_agree
            if agree is not None and agree < 1:
                lines.append(f"  the outputs' argmax differs from the base's in {1 - agree:.0%} of rows")
            first = run.first_divergent
            if first is not None and first.fit.words:
                lines.append(f"  at {', '.join(first.aot_ops)}: {first.fit.words}")
            if run.tokens is not None:
                lines.append(f"  {_tokens_line(run.tokens)}")
            lines.extend(f"  note: {n}" for n in run.notes)
        lines.extend(self.notes)
        return "\n".join(lines)


def _run_line(run: RunComparison) -> str:
    first = run.first_divergent
    if first is None:
        if run.outputs is not None and run.outputs.beyond_noise:
            return f"{run.name}'s outputs differ from the base's (rel {run.outputs.rel_diff:.3g})"
        if run.tokens is not None and run.tokens.first_token_differs is not None:
            return f"{run.name}'s token differs at step {run.tokens.first_token_differs}"
        return "agrees with the base within noise"
    who = {Side.RUN: f"{run.name} departs from the reference there",
           Side.BASE: "the base departs from the reference there",
           Side.BOTH: "both depart from the reference there",
           Side.NEITHER: "each is within its own noise of the reference there",
           Side.UNKNOWN: "which side departs is unknown (not replayed)"}.get(first.departs, "")
    where = f" ({first.module_path})" if first.module_path else ""
    return f"{run.name} parts from the base at {', '.join(first.aot_ops)}{where}: {who}"


def _tokens_line(view: TokenView) -> str:
    def at(step: int | None) -> str:
        return "none" if step is None else f"step {step}"

    return (f"tokens: first differs from the base's at {at(view.first_token_differs)}; tensors part at "
            f"{at(view.first_tensor_divergence)}; departs from the reference at {at(view.first_departs_from_reference)}")


def _num(value: float) -> float | None:
    return None if isinstance(value, float) and (math.isnan(value) or math.isinf(value)) else value


def _fit_json(fit: Fit) -> dict[str, object]:
    return {"scale": _num(fit.scale), "offset": _num(fit.offset), "r2": _num(fit.r2)}


def _run_json(run: RunComparison) -> dict[str, object]:
    first = run.first_divergent
    out: dict[str, object] = {
        "first_divergent_op": None if first is None else list(first.aot_ops),
        "departs_from_reference": run.departs_from_reference,
        "diverges": run.diverges,
        "departs": None if first is None else first.departs.value,
        "culprits": [list(c) for c in run.culprits],
        "ops": [{"aot_ops": list(op.aot_ops), "gap_vs_base": _num(op.gap_vs_base), "verdict": op.verdict.value,
                 **_fit_json(op.fit), "rel_diff": _num(op.rel_diff), "systematic": op.fit.words,
                 "run_local": op.run_local.value, "base_local": op.base_local.value,
                 "departs": op.departs.value or None, "module_path": op.module_path, "note": op.note}
                for op in run.ops],
        "outputs": None if run.outputs is None else {
            "source": run.outputs.source, "gap_vs_base": _num(run.outputs.gap_vs_base),
            "rel_diff": _num(run.outputs.rel_diff), "beyond_noise": run.outputs.beyond_noise,
            "answers_agree": run.outputs.answers_agree,
            **_fit_json(run.outputs.fit), "systematic": run.outputs.fit.words},
        "notes": list(run.notes),
    }
    if run.tokens is not None:
        view = run.tokens
        out["tokens"] = {
            "first_token_differs": view.first_token_differs, "first_tensor_divergence": view.first_tensor_divergence,
            "first_departs_from_reference": view.first_departs_from_reference,
            "first_token_departs_from_reference": view.first_token_departs_from_reference, "k": view.k,
            "steps": [{"step": s.step, "token": s.token, "base_token": s.base_token,
                       "reference_token": s.reference_token, "margin": _num(s.margin),
                       "topk_agreement": _num(s.topk_agreement), "kl_vs_reference": _num(s.kl_vs_reference),
                       "tensors_diverge": s.tensors_diverge} for s in view.steps]}
    return out
