"""LLM decode steps: the runs of one method are the steps of one generation.

``find_culprits(step_inputs=...)`` (or ``decode_steps=True``) aligns the runs step by step. Each
step is analysed as run 0 is: the reference graph run from the start and the replay on the
runtime's values, with the step's own graph inputs.

Which inputs a step had: the ETRecord holds one representative input, and the runtime logs no
graph inputs (a delegate logs its inputs; portable kernels do not). So the step inputs come from
the user: ``step_inputs`` is a list (one entry per run, in run order) of each run's input tuple,
exactly what the generation loop passed to the method — for a KV cache kept as method inputs and
outputs, the caches the runtime itself returned at the previous step. A path to a ``torch.save``
file of that list is read with ``torch.load(weights_only=True)``. Without ``step_inputs`` the
view is built from the per-run local figures only (``decode_steps=True``): rows that consume a
graph input (an embedding of the token, a rotary table indexed by the position) then have no
figure after step 0, and a culprit there goes unseen; the view's notes say so.

A step's output **diverges beyond its noise** when some op in it has a local error beyond its
noise model (a culprit); ``first_divergent_step`` is the first such step and its culprit rows
name the op. ``growth`` is the output row's accumulated gap (runtime vs the reference run from
the start on the step's inputs) over the steps from there on; ``per_op_dataframe`` aggregates each
op's local error over the steps (worst, steps beyond noise, first step beyond noise).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from numdiff._core.etrecord import ETRecordLike
from numdiff._core.names import quantity
from numdiff.culprits.report import CulpritReport
from numdiff.errors import InputError, UsageError

if TYPE_CHECKING:
    import pandas as pd

#: Each run's input tuple, in run order, or the path of a ``torch.save`` file of that list.
StepInputs = str | os.PathLike[str] | Sequence[Sequence[object]]

__all__ = ["DecodeStep", "DecodeView", "decode_view", "load_step_inputs", "output_node"]


@dataclass(frozen=True, slots=True)
class DecodeStep:
    """One step (run) of the generation.

    Attributes:
        step: Run index.
        output_gap: The output row's accumulated gap (NaN without step inputs after step 0).
        culprits: Culprit row indices in this step.
        culprit_ops: Their AOT op names.
        beyond_noise: Rows whose local verdict is beyond noise.
        note: Why figures are missing, if they are.
    """

    step: int
    output_gap: float
    culprits: tuple[int, ...]
    culprit_ops: tuple[tuple[str, ...], ...]
    beyond_noise: tuple[int, ...]
    note: str | None = None

    @property
    def diverges(self) -> bool:
        """Some op of this step is beyond its noise."""
        return bool(self.culprits)


@dataclass(frozen=True, slots=True)
class DecodeView:
    """The generation step by step (see the module docstring).

    Attributes:
        steps: One :class:`DecodeStep` per run.
        output_row: Index of the row of the model's first output.
        per_step: The full report of every step (rows in the same order as ``report.rows``).
        with_step_inputs: Whether the steps' own inputs were given.
        notes: Remarks.
    """

    steps: tuple[DecodeStep, ...]
    output_row: int | None
    per_step: tuple[CulpritReport, ...] = field(repr=False, default=())
    with_step_inputs: bool = False
    notes: tuple[str, ...] = ()

    @property
    def first_divergent_step(self) -> DecodeStep | None:
        """The first step with an op beyond its noise, or None."""
        return next((s for s in self.steps if s.diverges), None)

    @property
    def growth(self) -> list[tuple[int, float]]:
        """``[(step, output accumulated gap)]`` from the first divergent step on."""
        first = self.first_divergent_step
        return [] if first is None else [(s.step, s.output_gap) for s in self.steps if s.step >= first.step]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per step: ``step``, ``output_gap``, ``diverges``, ``culprits``, ``culprit_ops``, ``note``."""
        import pandas as pd

        return pd.DataFrame([{"step": s.step, "output_gap": s.output_gap, "diverges": s.diverges,
                              "culprits": list(s.culprits), "culprit_ops": [list(o) for o in s.culprit_ops],
                              "note": s.note} for s in self.steps],
                            columns=["step", "output_gap", "diverges", "culprits", "culprit_ops", "note"])

    def per_op_dataframe(self) -> pd.DataFrame:
        """One row per op (report row): its local error aggregated over the steps."""
        import pandas as pd

        records = []
        base = self.per_step[0].rows if self.per_step else ()
        for index, row in enumerate(base):
            units = [r.rows[index].local_noise_units for r in self.per_step if index < len(r.rows)]
            finite = [u for u in units if not math.isnan(u)]
            beyond = [s for s, r in enumerate(self.per_step) if index < len(r.rows) and r.rows[index].verdict.beyond_noise]
            records.append({"aot_ops": row.aot_ops, "module_path": row.module_path,
                            "worst_local_noise_units": max(finite) if finite else math.nan,
                            "median_local_noise_units": sorted(finite)[len(finite) // 2] if finite else math.nan,
                            "steps_beyond_noise": len(beyond), "first_step_beyond_noise": beyond[0] if beyond else None,
                            "steps_with_figure": len(finite)})
        return pd.DataFrame(records, columns=["aot_ops", "module_path", "worst_local_noise_units",
                                              "median_local_noise_units", "steps_beyond_noise",
                                              "first_step_beyond_noise", "steps_with_figure"])

    def __str__(self) -> str:
        first = self.first_divergent_step
        lines = [f"decode steps: {quantity(len(self.steps), 'step')}"
                 + ("" if self.with_step_inputs else " (no step_inputs)")]
        if first is None:
            lines.append("no step diverges beyond its noise")
        else:
            ops = "; ".join(", ".join(o) for o in first.culprit_ops)
            lines.append(f"first divergent step: {first.step}, culprit {ops}")
            lines.append("output gap from there on: " + ", ".join(f"step {s}: {_fmt(g)}" for s, g in self.growth))
        lines.extend(self.notes)
        return "\n".join(lines)


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.4g}"


def load_step_inputs(step_inputs: StepInputs, etrecord: ETRecordLike | None = None) -> list[tuple[object, ...]]:
    """Step inputs as a list of tuples, from a list or a ``torch.save`` file (weights only).

    With ``etrecord``, each tuple is checked against its representative inputs (see
    :func:`check_step_inputs`).

    Raises:
        UsageError: Not a list of input sequences, or (given as a list) not fitting the graph.
        InputError: The file cannot be read safely, holds something else than such a list, or its
            inputs do not fit the graph.
    """
    path = None
    if isinstance(step_inputs, (str, os.PathLike)):
        from numdiff.program.pickles import load_torch_artifact

        path = os.fspath(step_inputs)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"cannot read the step inputs {path!r}: {e.strerror or e}\n"
                             "Check the path and its permissions.") from e
        step_inputs = load_torch_artifact(data, f"step inputs {path!r}")
    if not isinstance(step_inputs, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in step_inputs):
        what = (f"must be a list with one input tuple per run (what each run or decode step was called with), "
                f"not {type(step_inputs).__name__}")
        if path is None:
            raise UsageError(f"step_inputs {what}")
        raise InputError(f"the step inputs {path!r} hold no list of input tuples: the file's object {what}\n"
                         "Write it with torch.save([inputs_of_run_0, inputs_of_run_1, ...]), each a tuple.")
    steps = [tuple(s) for s in step_inputs]
    if etrecord is not None:
        check_step_inputs(steps, etrecord, "step_inputs" if path is None else f"the step inputs {path!r}",
                          UsageError if path is None else InputError)
    return steps


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def check_step_inputs(steps: Sequence[tuple[object, ...]], etrecord: ETRecordLike, source: str,
                      error: type[InputError] | type[UsageError] = InputError) -> None:
    """Each run's inputs against the ETRecord's representative inputs: as many, and each tensor of the
    same dtype and number of dimensions (sizes may differ: a dimension may be dynamic), so that inputs
    meant for another model fail here, naming ``source``, rather than deep inside the reference graph.
    Nothing is checked when the ETRecord holds no representative inputs."""
    representative = getattr(etrecord, "_representative_inputs", None)
    if not representative or not isinstance(representative[0], (list, tuple)):
        return
    want = tuple(representative[0])
    for run, inputs in enumerate(steps):
        problem = None
        if len(inputs) != len(want):
            problem = f"{quantity(len(inputs), 'input')} are given where the graph takes {len(want)}"
        else:
            for i, (got, ref) in enumerate(zip(inputs, want)):
                if isinstance(ref, torch.Tensor) and not (isinstance(got, torch.Tensor) and got.dtype == ref.dtype
                                                          and got.dim() == ref.dim()):
                    problem = f"input {i} is {_describe(got)} where the graph takes {_describe(ref)}"
                    break
        if problem is not None:
            raise error(f"{source}: in run {run}, {problem} (as the ETRecord's representative inputs show)\n"
                        "Give the inputs this model's method was called with, one tuple per run, in run order.")


def decode_view(runs: int, step_inputs: list[tuple[object, ...]] | None,
                analyse: Callable[[int, tuple[object, ...] | None], CulpritReport],
                first: CulpritReport, output_node: str | None) -> DecodeView:
    """Analyse every step (``analyse(run, inputs)``) and build the view."""
    if step_inputs is not None and len(step_inputs) != runs:
        raise UsageError(f"step_inputs has {len(step_inputs)} entries but the ETDump holds {runs} runs of the "
                         "method\nPass one input tuple per run, in run order (prefill included).")
    reports = [first] + [analyse(r, None if step_inputs is None else step_inputs[r]) for r in range(1, runs)]
    output_row = next((r.index for r in reversed(first.rows) if r.node == output_node), None)
    if output_row is None and first.rows:
        output_row = first.rows[-1].index
    steps, notes = [], []
    for run, report in enumerate(reports):
        note = None
        rows = list(report.rows)
        if step_inputs is None and run > 0:
            rows = [r for r in rows if r.input_source == "runtime"]
            skipped = len(report.rows) - len(rows)
            note = f"{skipped} row(s) consume graph inputs: no figure without step_inputs" if skipped else None
        if len(report.rows) != len(first.rows):
            note = f"step {run} aligned {len(report.rows)} pairs, step 0 {len(first.rows)}"
        culprits = [r for r in rows if r.is_culprit]
        gap = math.nan
        if output_row is not None and output_row < len(report.rows) and (step_inputs is not None or run == 0):
            gap = report.rows[output_row].accumulated_gap
        steps.append(DecodeStep(run, gap, tuple(r.index for r in culprits), tuple(tuple(r.aot_ops) for r in culprits),
                                tuple(r.index for r in rows if r.verdict.beyond_noise), note))
    if step_inputs is None:
        notes.append("without step_inputs, ops that consume graph inputs (token embedding, position-indexed "
                     "tables) are not checked after step 0: pass step_inputs to check them")
    return DecodeView(tuple(steps), output_row, tuple(reports), step_inputs is not None, tuple(notes))


def output_node(etrecord: ETRecordLike, graph_name: str) -> str | None:
    """Name of the node that produces the reference graph's first output."""
    from numdiff.capture import resolve_reference_graph

    try:
        graph_module, _ = resolve_reference_graph(etrecord, graph_name)
    except Exception:  # the report already resolved it once; a second failure only loses the name
        return None
    for node in graph_module.graph.nodes:
        if node.op == "output":
            out = node.args[0]
            first = out[0] if isinstance(out, (list, tuple)) and out else out
            return str(first.name) if hasattr(first, "name") else None
    return None
