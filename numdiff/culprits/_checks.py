"""Checks of the replay itself, before its verdicts are believed.

* **A replay problem** (:attr:`~numdiff.culprits._noise.Verdict.REPLAY_MISMATCH`): the replay on
  the runtime's inputs disagrees with the runtime beyond noise, yet the runtime's output matches
  the reference run from the start within noise. An op that computed something else would make
  the runtime differ from the reference too, so the disagreement is the replay's (an input taken
  from the wrong place, a layout guessed wrong), not the op's. Likewise when the replay has NaN or
  Inf where the runtime's output is finite.
* **Files that do not belong together**: from the first compared op on, (nearly) every op's
  replay on the runtime's own inputs is unrelated to what the runtime logged (relative error above
  :data:`UNRELATED`). One wrong op leaves the ops after it consistent with their replays; a debug
  buffer of another program, or one that is not a debug buffer at all, leaves none. Then
  ``find_culprits`` raises :class:`~numdiff.errors.MismatchedArtifactsError` instead of naming
  culprits.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from numdiff.culprits._measure import Sums
from numdiff.culprits.report import CulpritRow

__all__ = ["UNRELATED", "accumulated_units", "mismatched_artifacts", "nothing_comparable", "replay_problem"]

#: ``rms(replay - runtime) / rms(replay)`` above which two values are unrelated (about 10 dB SNR).
UNRELATED = 0.3
#: Share of compared rows that must be unrelated to their replay for the files not to belong together.
MISMATCHED_SHARE = 0.5
#: At least this many unrelated rows (one or two wrong ops are culprits, not wrong files), unless
#: the program has fewer compared rows and every one is unrelated: then nothing tells wrong files
#: from every op being wrong, and the error says both.
MISMATCHED_MIN_ROWS = 3


def accumulated_units(local_units: float, local_sums: Sums | None, acc_rms: float) -> float:
    """The accumulated error (AOT from the start vs runtime) in the row's own noise units (NaN if unknown)."""
    if local_sums is None or not local_sums[3] or math.isnan(acc_rms) or math.isnan(local_units):
        return math.nan
    local_rms = math.sqrt(local_sums[1] / local_sums[3])
    if local_rms == 0:
        return math.nan
    return local_units * acc_rms / local_rms


def replay_problem(local_units: float, acc_units: float, sources: Sequence[str], replay_nonfinite: int = 0) -> str:
    """The note of a :attr:`~numdiff.culprits._noise.Verdict.REPLAY_MISMATCH` row."""
    if replay_nonfinite:
        why = (f"the replay has {replay_nonfinite} NaN/Inf where the runtime's output is finite, so the replay's "
               "inputs are not what the runtime computed from")
    else:
        why = (f"the replay on the runtime's inputs is {local_units:.3g} noise units from the runtime's output, but "
               f"the runtime matches the reference run from the start within {acc_units:.3g} units, so the "
               "replay's inputs are not what the runtime computed from")
    return "replay problem, not a culprit: " + why + " (inputs: " + "; ".join(sources) + ")"


def mismatched_artifacts(rows: Sequence[CulpritRow], local_rel: Mapping[int, float], *,
                         inputs_confirmed: bool = False, input_readers: Collection[int] = ()) -> str | None:
    """Why the files do not belong together, or None when the replay is consistent enough to judge.

    ``inputs_confirmed``: the runtime logged the program's inputs (a delegate logs its arguments) and
    they are exactly the ETRecord's representative inputs. A debug buffer of another program, or of
    another run, holds other inputs; so in a program of one or two compared ops, whose replays alone
    cannot tell wrong files from wrong ops, confirmed inputs say the ops are wrong.

    ``input_readers``: rows replayed on representative inputs that nothing confirms. A run on other
    inputs makes them disagree, so they are left out, unless rows fed by logged values disagree too
    (other inputs would not explain those).
    """
    # An op that computes from nothing (zeros, full, arange) agrees with any buffer that holds its constant.
    computed = [r for r in rows if not math.isnan(local_rel.get(r.index, math.nan)) and r.input_sources]
    fed = [r for r in computed if r.index not in input_readers]
    compared = computed if any(not local_rel[r.index] <= UNRELATED for r in fed) else fed
    if not compared or (inputs_confirmed and len(compared) < MISMATCHED_MIN_ROWS):
        return None
    unrelated = [r for r in compared if not local_rel[r.index] <= UNRELATED]  # NaN-safe: inf and NaN count
    first = compared[0]
    # A program of one or two compared ops, all unrelated to their replays, is "nearly every op" too.
    if first not in unrelated or len(unrelated) < max(min(MISMATCHED_MIN_ROWS, len(compared)),
                                                      MISMATCHED_SHARE * len(compared)):
        return None
    return (f"{len(unrelated)} of {len(compared)} compared ops disagree with their own replay on the runtime's "
            f"inputs from the first op on (row {first.index} {first.node}: relative error "
            f"{local_rel[first.index]:.3g}): the logged values do not come from the program the ETRecord describes")


def nothing_comparable(rows: Sequence[CulpritRow], local_rel: Mapping[int, float],
                       unsized: Mapping[int, str]) -> str | None:
    """Why (nearly) no row could be compared because the runtime's tensors hold other numbers of
    elements than the reference run's (``unsized``: row index -> the two shapes; at least half the
    rows), or None. An ETRecord of another program whose instruction ids and kernel names happen to
    cover the run's gets this far; so does a run of a dynamic-shape program on inputs of other sizes
    than the representative ones. Either way no answer can be given. A program run on the inputs its
    ETRecord was made with gives every pair the same element count."""
    if not unsized or len(unsized) * 2 < len(rows):
        return None
    first = next(r for r in rows if r.index == min(unsized))
    compared = sum(not math.isnan(local_rel.get(r.index, math.nan)) for r in rows)
    what = "none" if not compared else f"only {compared}"
    return (f"{what} of the {len(rows)} aligned ops could be compared: the runtime's tensors have other sizes than "
            f"the reference run's ({len(unsized)} of them; row {first.index} {first.node}: {unsized[first.index]})")
