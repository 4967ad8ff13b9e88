"""Which verdicts rest on graph inputs the run may not have shared with the ETRecord's representative ones.

The runtime does not log graph inputs: ops that read one are replayed on the representative value.
:func:`settle_inputs` takes back, or qualifies, the verdicts of those ops once every row is scored.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from numdiff._core.advice import INPUTS_HINT
from numdiff.culprits._checks import UNRELATED
from numdiff.culprits._input_fit import fit_input
from numdiff.culprits._noise import Verdict
from numdiff.culprits._scorer import _SHAPE_ONLY, _culprit

if TYPE_CHECKING:
    from numdiff.culprits._scorer import Scorer
    from numdiff.culprits.report import CulpritRow

__all__ = ["settle_inputs"]

#: Ops whose output sees its input only through its extremes: a dynamic quantization's parameters
#: (the zero point of non-negative values is the same for every input). Agreeing with its replay, such
#: a row does not confirm that the run used the representative input.
_EXTREMES_ONLY = frozenset({"choose_qparams", "choose_qparams_per_token", "choose_qparams_per_token_asymmetric",
                            "choose_qparams_affine"})


def settle_inputs(scorer: Scorer) -> tuple[list[str], set[int]]:
    """Take back the verdicts that rest on representative inputs unrelated to the run's.

    The runtime does not log graph inputs, so a row that reads one is replayed on the ETRecord's
    representative input. A graph input is *confirmed* when some row that reads it agrees with
    its replay (and computes from its values, not only its shape). A row that reads an input
    nothing confirms and whose output is unrelated to its replay (relative error above
    :data:`~numdiff.culprits._checks.UNRELATED`) is explained as well by a run on other inputs (a
    camera frame, a user's prompt) as by a badly wrong op: it becomes ``not-judged`` with a note,
    and the culprits are recounted. So do all the rows that read one unconfirmed input when two or
    more of them are beyond noise (an input the run did not share explains them all; a fault
    would have to be in each), however related to their replays. The one row beyond noise that
    reads an input while related to its replay keeps its verdict: a slightly different input
    and a wrong op look the same there, so the verdict rests on the input being the
    representative one, and the input is listed in :attr:`Scorer.assumed`. An op that sees the input
    only through its extremes (:data:`_EXTREMES_ONLY`) confirms nothing by agreeing.

    Returns the graph inputs in doubt and the rows that read them (their disagreement says
    nothing about whether the files belong together).
    """
    def row(index: int) -> CulpritRow:
        return scorer.rows[index - scorer.first_index]

    agreeing = [(index, names) for index, names in scorer.representative_reads.items()
                if row(index).verdict in (Verdict.OK, Verdict.EXPECTED_NOISE)
                and row(index).op_type not in _SHAPE_ONLY | _EXTREMES_ONLY]
    # A quantized output agrees with its replay on an input a fraction of a step away (a 1% different
    # camera frame quantizes to nearly the same int8 values): it confirms the input for other
    # quantized readers, not for an op that computes on it in floating point.
    confirmed_coarse = {g for _, names in agreeing for g in names}
    confirmed_fine = {g for index, names in agreeing if index not in scorer.coarse_readers for g in names}

    def unconfirmed_of(index: int, names: tuple[str, ...]) -> list[str]:
        confirmed = confirmed_coarse if index in scorer.coarse_readers else confirmed_fine
        return [g for g in names if g not in confirmed]

    # Several ops that read one unconfirmed input all beyond noise: one input the run did not share
    # explains them all; a fault would have to be in each of them.
    disagreeing: dict[str, list[int]] = {}
    for index, names in scorer.representative_reads.items():
        if row(index).verdict.beyond_noise and row(index).op_type not in _SHAPE_ONLY:
            for g in unconfirmed_of(index, names):
                disagreeing.setdefault(g, []).append(index)
    shared_doubt = {g for g, indices in disagreeing.items() if len(indices) >= 2}
    doubtful: list[str] = []
    readers: set[int] = set()
    for index, names in scorer.representative_reads.items():
        unconfirmed = unconfirmed_of(index, names)
        if not unconfirmed:
            continue
        readers.add(index)
        judged = row(index)
        if not judged.verdict.beyond_noise:
            continue
        rel = scorer.local_rel.get(index, math.nan)
        shared = [g for g in unconfirmed if g in shared_doubt]
        case = scorer.fit_cases.get(index) if rel <= UNRELATED and not shared else None
        fit = None if case is None else fit_input(case)
        if fit is not None and not fit.trusted:
            fit = None  # the op reaches any output from some input: the fit cannot tell a fault from an input
        explained = case is not None and fit is not None and fit.explains(case.limits, UNRELATED)
        if fit is not None and not explained:
            # The op maps few inputs to many outputs, and no input near the representative one gives
            # what the runtime logged: the verdict does not rest on the input.
            said = (f"no input near the representative {', '.join(unconfirmed)} explains its output (the "
                    f"closest leaves {fit.units:.3g} noise units): the op computes something else")
            scorer.rows[index - scorer.first_index] = replace(
                judged, note="; ".join(n for n in (said, judged.note) if n))
            continue
        if rel <= UNRELATED and not shared and not explained:  # NaN: unrelated
            # Related to its replay, and the only op that reads the input: nothing tells a slightly
            # different input from a wrong op; judged, with the assumption said (report.inputs_assumed).
            caution = (f"judged on the representative inputs: no other op that reads {', '.join(unconfirmed)} "
                       "confirms the run used them; if it did not, pass the run's own inputs (step_inputs=)")
            scorer.rows[index - scorer.first_index] = replace(
                judged, note="; ".join(n for n in (caution, judged.note) if n))
            scorer.assumed += [g for g in unconfirmed if g not in scorer.assumed]
            continue
        doubtful += [g for g in unconfirmed if g not in doubtful]
        if explained:
            assert fit is not None
            why = (f"its output is what it computes from an input {fit.relative_change:.2%} (rms) away from the "
                   f"representative one (the closest leaves {fit.units:.3g} noise units) while no other op that "
                   "reads it agrees: either the run's input differs slightly from the representative one, or this "
                   "op is wrong in a way an input change mimics")
        elif rel <= UNRELATED:
            why = (f"every one of the {len(disagreeing[shared[0]])} ops that read {', '.join(shared)} disagrees with "
                   f"its replay on the ETRecord's representative inputs and none agrees (this one by relative error "
                   f"{rel:.3g}): either the run used other inputs than the representative ones, or each of "
                   "these ops is wrong")
        else:
            why = (f"its output is unrelated to its replay on the ETRecord's representative inputs (relative "
                   f"error {rel:.3g}) while no op that reads them agrees with its replay: either the run used "
                   "other inputs than the representative ones, or this op is badly wrong")
        note = (f"not judged: this op reads graph input(s) {', '.join(unconfirmed)}, which the runtime did not log, "
                f"and {why}: {INPUTS_HINT}")
        scorer.rows[index - scorer.first_index] = replace(judged, verdict=Verdict.NOT_JUDGED, is_culprit=False,
                                                      note="; ".join(n for n in (note, judged.note) if n))
    if doubtful:
        for i, each in enumerate(scorer.rows):
            culprit, _ = _culprit(each.verdict, [row(p) for p in each.producers if p >= scorer.first_index])
            if culprit != each.is_culprit:
                scorer.rows[i] = replace(each, is_culprit=culprit)
    return doubtful, readers
