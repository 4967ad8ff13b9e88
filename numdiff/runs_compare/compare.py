"""``compare_runs``: runs of one program (devices, backends, builds) against a base run, op by op.

Each run is opened and replayed on its own inputs (:meth:`Inspector.find_culprits`), which aligns
its ops with the ETRecord's graph and gives every op's *local* verdict (the op against the reference
computation on that run's inputs). Runs of one program log the same ops under the same runtime
handles, so run and base are paired row by row; files of another program are refused
(:class:`~numdiff.errors.MismatchedArtifactsError`).

Per op: the comparator between the base's value (as reference) and the run's (``gap_vs_base``), the
relative difference ``rms(run - base) / rms(base)`` against the tolerance (for floats 1e-4 in
float32/float64 and 1e-2 in float16/bfloat16, or ``tolerance=``; for integer (quantized) values one
step), a fit of the run against the base (:mod:`~numdiff.runs_compare.fit`), and which side departs
from the reference there (:class:`~numdiff.runs_compare.records.Side`). An op whose inputs all agree
and whose values differ beyond the tolerance is where the runs part (``diverges``) unless each
run's op is within its own noise of the reference on its own inputs (the culprit noise model: then
the difference is rounding, ``within-noise``); ops after it ``inherit``. The outputs are beyond
noise when they differ beyond the tolerance and some op does. With only program outputs logged,
the outputs are compared against the tolerance alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import torch

from numdiff._core.etrecord import ETRecordLike
from numdiff.comparators import NumericalComparatorBase, get_comparator
from numdiff.culprits import CulpritReport
from numdiff.errors import NumdiffError, UsageError
from numdiff.runs_compare.fit import fit_systematic
from numdiff.runs_compare.records import OpComparison, OutputComparison, RunComparison, RunsComparison
from numdiff.runs_compare.ops import compare_step, gap, relative_difference, within
from numdiff.runs_compare.values import LoadedRun, PathArg, RunFiles, open_run, row_value, same_program

__all__ = ["answers_agree", "compare_runs"]

RunArg = RunFiles | PathArg | Sequence[PathArg | None]


def compare_runs(
    etrecord: ETRecordLike | PathArg,
    runs: Mapping[str, RunArg],
    *,
    base: str | None = None,
    distance: str | NumericalComparatorBase = "SNR",
    tolerance: float | None = None,
    reference_graph: str | None = None,
    thresholds: object = None,
    decode_steps: bool | None = None,
    top_k: int = 5,
) -> RunsComparison:
    """Runs of one program against a base run: where they part, which side departs, and how.

    Args:
        etrecord: The program's ETRecord (path or parsed).
        runs: ``{name: files}`` with files an ETDump path, ``(etdump, debug_buffer[, step_inputs])``
            or a :class:`~numdiff.runs_compare.values.RunFiles`; at least two runs.
        base: The run the others are compared with. Defaults to the first.
        distance: The comparator of ``gap_vs_base`` and of each run's replay (a name or an instance).
        tolerance: Relative rms difference within which floating-point values agree (default: by dtype,
            :data:`DEFAULT_TOLERANCES`).
        reference_graph: As in ``calculate_numeric_gap``.
        thresholds: Each run's local verdict limits, as in ``find_culprits``.
        decode_steps: The runs of each ETDump are the steps of one generation (implied by step inputs):
            adds each run's tokens (see :mod:`~numdiff.runs_compare.tokens`).
        top_k: The k of the tokens' top-k agreement.

    Raises:
        UsageError: Fewer than two runs, an unknown base, a bad tolerance.
        MismatchedArtifactsError: The runs are not of one program, or a run not of the ETRecord's program.
        MissingDataError: A run logs tensors without its debug buffer, or the ETRecord cannot be replayed.

    Example:
        >>> from numdiff.runs_compare import compare_runs
        >>> result = compare_runs("model.etrecord", {"laptop": ("laptop.etdp", "laptop.bin"),
        ...                                          "phone": ("phone.etdp", "phone.bin")})  # doctest: +SKIP
        >>> result.runs["phone"].first_divergent  # doctest: +SKIP
    """
    if len(runs) < 2:
        raise UsageError(f"compare_runs needs at least two runs, got {len(runs)}\n"
                         "Pass e.g. runs={'laptop': (etdump, debug_buffer), 'phone': (etdump, debug_buffer)}.")
    names = list(runs)
    base = names[0] if base is None else base
    if base not in runs:
        raise UsageError(f"base run {base!r} is not among the runs ({', '.join(map(repr, names))})\n"
                         "Pass the name of one of the runs as base.")
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and 0 <= tolerance < math.inf):
        raise UsageError(f"tolerance must be a number >= 0, got {tolerance!r}\nPass e.g. tolerance=1e-3.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise UsageError(f"top_k must be a whole number >= 1, got {top_k!r}\nPass e.g. top_k=5.")
    comparator = get_comparator(distance)  # an unknown metric is refused before any file is read
    record, record_name = _etrecord(etrecord)
    files = {name: RunFiles.of(value) for name, value in runs.items()}
    decode = bool(decode_steps) or any(f.step_inputs is not None for f in files.values())
    loaded: dict[str, LoadedRun] = {}
    for name, run_files in files.items():
        try:
            loaded[name] = open_run(name, run_files, record, distance=distance, reference_graph=reference_graph,
                                    thresholds=thresholds, decode_steps=decode)
        except NumdiffError as e:
            # Name the run in the message; errors built from their own fields (a file error names the file) stay as raised.
            if f"run {name!r}" in str(e) or not _message_only(type(e)):
                raise
            raise type(e)(f"run {name!r}: {e}") from e
    reference = loaded[base]
    for name in names:
        if name != base:
            same_program(reference, loaded[name], record_name)
    output_row = None if reference.report is None else _output_row(reference.report, record)
    graph_module = None
    if decode and reference.report is not None and any(f.step_inputs is not None for f in files.values()):
        from numdiff.capture import resolve_reference_graph

        graph_module = resolve_reference_graph(record, reference.report.graph_name)[0]
    out = {name: _compare(reference, loaded[name], comparator, tolerance, output_row,
                          (top_k, graph_module) if decode else None) for name in names if name != base}
    base_report = reference.report
    return RunsComparison(base, out, type(comparator).__name__, comparator.higher_is_better,
                          None if tolerance is None else float(tolerance),
                          _culprits(base_report), "" if base_report is None else base_report.graph_name,
                          _notes(tolerance))


def _message_only(cls: type[NumdiffError]) -> bool:
    """Whether ``cls`` is built from its message alone (no ``__init__`` of its own)."""
    return all("__init__" not in vars(base) for base in cls.__mro__
               if issubclass(base, NumdiffError) and base is not NumdiffError) and \
        not issubclass(cls, KeyError)  # str() of a KeyError quotes its message


def answers_agree(base: torch.Tensor, run: torch.Tensor) -> float | None:
    """Share of rows (over the last dimension) whose argmax is the same in both, or None when there are
    no classes to choose between (not floating point, fewer than two on the last dimension).

    Example:
        >>> answers_agree(torch.tensor([[1.0, 2.0], [3.0, 0.0]]), torch.tensor([[1.0, 2.0], [0.0, 3.0]]))
        0.5
    """
    if base.shape != run.shape or not base.dtype.is_floating_point or base.dim() == 0 or base.shape[-1] < 2:
        return None
    a, b = base.reshape(-1, base.shape[-1]), run.reshape(-1, run.shape[-1])
    return float((a.argmax(-1) == b.argmax(-1)).to(torch.float64).mean()) if a.shape[0] else None


def _etrecord(etrecord: ETRecordLike | PathArg) -> tuple[ETRecordLike, str]:
    if isinstance(etrecord, (str, os.PathLike)):
        from numdiff.schema.etrecord import parse_etrecord

        return parse_etrecord(os.fspath(etrecord)), repr(os.fspath(etrecord))
    return etrecord, "(given as an object)"


def _notes(tolerance: float | None) -> tuple[str, ...]:
    if tolerance is not None:
        return (f"floating-point values agree within a relative rms difference of {tolerance:g}",)
    return ("floating-point values agree within a relative rms difference of 1e-4 (float32, float64) or 1e-2 "
            "(float16, bfloat16); integer values within one step",)


def _culprits(report: CulpritReport | None) -> tuple[tuple[str, ...], ...]:
    return () if report is None else tuple(tuple(r.aot_ops) for r in report.culprits)


def _outputs(base: LoadedRun, run: LoadedRun, comparator: NumericalComparatorBase, tolerance: float | None,
             ops: tuple[OpComparison, ...], output_row: int | None, step: int | None = None) -> OutputComparison | None:
    """The program outputs the runtime logged (first run), or the value of the op that makes the first
    output at ``step`` (a decode step: the logged program outputs are the first step's only)."""
    if step is None and base.outputs and run.outputs:
        a = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in base.outputs]) \
            if len(base.outputs) > 1 else base.outputs[0]
        b = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in run.outputs]) \
            if len(run.outputs) > 1 else run.outputs[0]
        rel = relative_difference(a, b)
        beyond = not torch.equal(a, b) and not within(a, rel, tolerance) and \
            (not ops or any(op.verdict.beyond_noise for op in ops))
        return OutputComparison("program outputs", gap(comparator, a, b, "the program outputs"), rel, beyond,
                                fit_systematic(a, b, "outputs"), answers_agree(base.outputs[0], run.outputs[0]))
    if output_row is not None and output_row < len(ops) and base.report is not None and run.report is not None:
        op = ops[output_row]
        base_out = row_value(base.values(step or 0), base.report.rows[output_row])
        run_out = row_value(run.values(step or 0), run.report.rows[output_row])
        if base_out is not None and run_out is not None:
            where = "output op" if step is None else f"output op, step {step}"
            return OutputComparison(where, op.gap_vs_base, op.rel_diff, op.verdict.beyond_noise,
                                    fit_systematic(base_out, run_out, "outputs"), answers_agree(base_out, run_out))
    return None


def _compare(base: LoadedRun, run: LoadedRun, comparator: NumericalComparatorBase, tolerance: float | None,
             output_row: int | None, decode: tuple[int, torch.fx.GraphModule | None] | None) -> RunComparison:
    """One run against the base; ``decode`` = (top-k's k, the reference graph for step inputs) for decode runs."""
    notes: list[str] = []
    if base.report is None or run.report is None:
        notes.append("no intermediate outputs logged: program outputs compared (which side departs from the "
                     "reference needs each op's values: run with a debug buffer)")
        outputs = _outputs(base, run, comparator, tolerance, (), None)
        return RunComparison(run.name, (), outputs, False, (), None, tuple(notes))
    ops = compare_step(base.report, run.report, base.values(), run.values(), comparator, tolerance)
    tokens, shown = None, None
    if decode is not None:
        from numdiff.runs_compare.tokens import token_view

        tokens, step_ops, step = token_view(base, run, comparator, tolerance, decode[1], output_row, decode[0])
        shown = 0
        if step is not None and step > 0:
            ops, shown = step_ops, step
            notes.append(f"ops of step {step}, the first where the tensors part from the base's")
        if base.runs != run.runs:
            notes.append(f"the base holds {base.runs} steps and {run.name!r} {run.runs}: the first "
                         f"{min(base.runs, run.runs)} compared")
    elif max(base.runs, run.runs) > 1:
        notes.append(f"the ETDumps hold {max(base.runs, run.runs)} runs that logged different values: run 0 compared "
                     "(decode steps: pass each run's step inputs, or --decode-steps, to compare every step)")
    departs = bool(run.report.culprits) or (run.report.decode is not None
                                            and run.report.decode.first_divergent_step is not None)
    return RunComparison(run.name, ops, _outputs(base, run, comparator, tolerance, ops, output_row, shown), departs,
                         _culprits(run.report), tokens, tuple(notes))


def _output_row(report: CulpritReport, etrecord: ETRecordLike) -> int | None:
    from numdiff.culprits.decode import output_node

    node = output_node(etrecord, report.graph_name)
    return next((r.index for r in reversed(report.rows) if r.node == node), None)
