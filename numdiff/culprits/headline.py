"""The first line of a culprit report: every view that ran, summed up so that none below contradicts it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from numdiff._core.names import quantity
from numdiff.culprits._noise import Verdict
from numdiff.gap.methods import methods_left_out

if TYPE_CHECKING:
    from numdiff.culprits.report import CulpritReport, CulpritRow

__all__ = ["headline", "in_method", "methods_of"]


def headline(report: CulpritReport) -> str:
    """One line that summarises every view that ran, so that no view below contradicts it.

    It names the culprits (a delegate by backend and call index), then counts ``broken`` rows,
    replay problems and rows not judged, the graph inputs a verdict assumes, the first non-finite runtime output, the first divergent
    decode step and its culprit ops, the layers the quantization view keeps in higher precision,
    the culprits inside delegates (taps), runs whose culprits differ and the methods of a
    multi-method program that were not compared. It says "every local error is within its expected noise" only when no view found
    anything beyond noise. The first line of ``str(report)`` and of ``numdiff culprits``.
    """
    culprits = report.culprits
    scope = " in step 0" if report.decode is not None else ""
    head = (f"find_culprits ({report.metric} on {report.graph_name}): {quantity(len(report.rows), 'row')}, "
            f"{quantity(len(culprits), 'culprit')}{scope}")
    if culprits:
        head += ": " + ", ".join(_name(r) for r in culprits[:3]) + (f" and {len(culprits) - 3} more"
                                                                   if len(culprits) > 3 else "")
    facts = []
    verdicts = [r.verdict for r in report.rows]
    for verdict, what in ((Verdict.BROKEN, "broken"), (Verdict.REPLAY_MISMATCH, "with a replay problem (not judged)"),
                          (Verdict.NOT_JUDGED, "not judged (inputs not logged)")):
        n = verdicts.count(verdict)
        if n:
            facts.append(f"{quantity(n, 'row')} {what}")
    if report.inputs_assumed:
        facts.append(f"assuming the run's {', '.join(report.inputs_assumed)} = the representative one(s)")
    if report.first_nonfinite is not None:
        first = report.first_nonfinite
        facts.append(f"first NaN/Inf at row {first.row} ({first.node})")
    elif report.model_nonfinite is not None:
        own = report.model_nonfinite
        facts.append(f"NaN/Inf from row {own.row} ({own.node}) as the model computes them")
    alarm = bool(culprits) or Verdict.BROKEN in verdicts or report.first_nonfinite is not None
    per_run = [f.run for f in report.runs if f.culprits]
    if per_run and report.decode is None:
        facts.append("culprits in run" + ("s " if len(per_run) > 1 else " ") + ", ".join(map(str, per_run)))
        alarm = True
    if report.decode is not None:
        step = report.decode.first_divergent_step
        if step is None:
            facts.append(f"no decode step diverges ({quantity(len(report.decode.steps), 'step')})")
        else:
            ops = "; ".join(", ".join(o) for o in step.culprit_ops)
            facts.append(f"decode diverges at step {step.step} (culprit {ops})")
            alarm = True
    if report.quantization is not None:
        quant, keep = report.quantization, report.quantization.suggested_keep
        facts.append(f"quantization: estimated output SNR {quant.estimated_snr_db:.3g} dB (target "
                     f"{quant.target_snr_db:.3g} dB), " + (f"keep {', '.join(keep)} in higher precision" if keep
                                                         else "no layer needs higher precision"))
    if report.inside_delegates is not None:
        inside = report.inside_delegates.culprits
        if inside:
            facts.append("inside delegates (taps): culprit " + ", ".join(f"{r.node} ({r.module_path or '?'})"
                                                                          for r in inside))
            alarm = True
        else:
            facts.append(f"inside delegates (taps): no culprit among {len(report.inside_delegates.rows)} tapped ops")
    left_out = methods_left_out(report.notes) if methods_of(report) else []
    if left_out:
        facts.append("not compared: method" + ("s " if len(left_out) > 1 else " ") + ", ".join(left_out)
                     + " (see the notes)")
    if not alarm and Verdict.REPLAY_MISMATCH not in verdicts:
        judged = "judged " if Verdict.NOT_JUDGED in verdicts else ""
        head += f": every {judged}local error is within its expected noise"
    return "; ".join([head, *facts])


def methods_of(report: CulpritReport) -> list[str]:
    """The methods the rows belong to, in report order; empty for a program of one method."""
    return list(dict.fromkeys(r.method for r in report.rows if r.method is not None))


def in_method(row: CulpritRow) -> str:
    return "" if row.method is None else f" in method {row.method}"


def _name(row: CulpritRow) -> str:
    """A culprit as the headline names it: a delegate by backend and call index, else its ops and module."""
    call = row.delegate_call
    if call is not None:
        return (call if call.startswith("delegate") else f"delegate {call}") + in_method(row)
    return row.title + (f" ({row.module_path})" if row.module_path else "") + in_method(row)
