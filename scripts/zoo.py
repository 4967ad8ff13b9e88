"""numdiff's self-test on the model zoo: regenerate it (oracle venv) and score the culprit finder.

One command (numdiff's venv; the oracle venv is made by ../shared/oracle-venv.sh on first use)::

    .venv/bin/python scripts/zoo.py                     # generate into ~/.cache/numdiff-zoo if missing, score
    .venv/bin/python scripts/zoo.py --regenerate        # write it anew first
    .venv/bin/python scripts/zoo.py --dir DIR --only conv_bn --json out.json

The zoo (``scripts/make_zoo.py``) holds, per architecture and backend, a clean control and twins
with one planted perturbation of graded size. Scoring runs ``find_culprits("SNR")`` on each run
under the clean model's ETRecord and compares with the truth the generator derived by diffing the
two programs:

* **clean** runs must have no culprit, no ``broken`` row and must not be refused;
* **planted** runs are ``exact`` (one culprit, and it holds a planted op), ``partial`` (a culprit
  holds a planted op, but others are named too) or ``missed``. A miss is *explained* when the
  planted op's error is not beyond what the clean control shows at the same row (the fault is
  below the noise: the perturbation's effect on the planted op's output, measured on the
  reference graphs, is smaller than the control's own local error there), or when the planted op
  has no row (the runtime logged nothing numdiff could pair with it); any other miss is a failure
  of numdiff.

``tests/culprits/test_zoo_sample.py`` scores the committed sample (``tests/fixtures/zoo/``) with the
same code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = Path(os.environ.get("NUMDIFF_ZOO", Path.home() / ".cache" / "numdiff-zoo"))
BACKENDS = ("portable", "xnnpack", "int8_portable", "int8_xnnpack", "int8dyn_xnnpack")
#: A planted fault whose effect on its op is within this many dB of the control's local error at
#: the same row is below the noise: nothing distinguishes it from the clean run.
BELOW_NOISE_MARGIN_DB = 3.0


@dataclass(frozen=True)
class Score:
    arch: str
    backend: str
    variant: str
    kind: str  # clean | other-input | near-input | planted | dropped
    # clean: ok | false-culprit | broken | refused
    # other-input (the clean program run on other inputs than the representative ones) and near-input
    #        (on them plus 1% noise): ok (no culprit, no broken row) | cannot-judge (refused, saying no op
    #        could be judged) | assumed (a culprit or broken row whose verdict says it assumes the
    #        representative inputs) | false-culprit | broken | refused
    # clean, not a control: runtime-fault (the runtime's output is unrelated to the reference; a culprit
    #        was named) | runtime-fault-missed
    # planted: exact | partial | undecided (refused: cannot tell wrong files from every op wrong)
    #          | no-effect (every logged value equals the control's: not a fault on this run; a culprit
    #            there is a false-culprit)
    #          | missed-explained (invisible, below the control's noise, no row)
    #          | within-allowance (numdiff's verdict on the planted row: ok or expected-noise) | missed
    outcome: str
    grade: str = ""
    plant: str = ""
    detail: str = ""
    culprits: tuple[str, ...] = ()
    #: clean controls: the largest local error in noise units on floating-point and quantized rows
    noise_float: float = 0.0
    noise_quantized: float = 0.0


def _float(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, str):
        return float(x)  # "inf", "-inf", "nan" as written by the generator
    return float(x)


@dataclass(frozen=True)
class Run:
    """One run's Inspector and its culprit report."""

    inspector: Any
    report: Any


def _run(case_dir: Path) -> Run:
    from numdiff import Inspector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=case_dir / "etdump.etdp", etrecord=str(case_dir.parent / "etrecord.bin"),
                              debug_buffer_path=case_dir / "debug_buffer.bin")
        return Run(inspector, inspector.find_culprits("SNR"))


def _logged(inspector: Any, handle: tuple[int, ...]) -> list[Any]:
    """Every tensor the runtime logged for events whose debug handles lie inside ``handle``."""
    import torch

    ids, out = set(handle), []
    for block in inspector.event_blocks:
        for ev in block.events:
            h = ev.debug_handles
            hs = {h} if isinstance(h, int) else set(h or ())
            if hs and hs <= ids and ev.debug_data:
                out += [t for t in ev.debug_data if isinstance(t, torch.Tensor)]
    return out


#: A clean export whose runtime output is this far from the ETRecord's reference output (SNR in dB:
#: unrelated values) is not a control: the runtime itself is wrong, and a culprit is the right verdict.
RUNTIME_FAULT_DB = 10.0


def output_snr_db(run: Run) -> float | None:
    """SNR of the runtime's logged program output against the ETRecord's reference output (first run)."""
    for block in run.inspector.event_blocks:
        got, want = block.run_output, block.reference_output
        if not got or not want:
            continue
        return worst_snr_db(list(want), list(got))
    return None


#: A quantized runtime this close to the float model (dB of the float model's output against it) as
#: the ETRecord's quantized reference is computes a quantization as good as the graph's: however far
#: from the reference it lands, it is a control, not a runtime fault.
AS_GOOD_AS_REFERENCE_DB = 3.0


def as_good_as_reference(folder: Path, run: Run) -> tuple[float, float] | None:
    """For a quantized program's clean run: ``(runtime, reference)`` SNR (dB) of their outputs against the
    float model's (the same architecture's portable export, whose reference output is the float model's
    on the same representative input) when the runtime is within :data:`AS_GOOD_AS_REFERENCE_DB` of the
    reference; None otherwise, or when there is no float export to compare with."""
    from numdiff import Inspector

    floated = folder.parent.parent / "portable"
    if not (floated / "etrecord.bin").is_file() or not (floated / "clean" / "etdump.etdp").is_file():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fp32 = Inspector(etdump_path=floated / "clean" / "etdump.etdp", etrecord=str(floated / "etrecord.bin"))
    want = next((list(b.reference_output) for b in fp32.event_blocks if b.reference_output), None)
    block = next((b for b in run.inspector.event_blocks if b.run_output and b.reference_output), None)
    if want is None or block is None:
        return None
    runtime, reference = worst_snr_db(want, list(block.run_output)), worst_snr_db(want, list(block.reference_output))
    if runtime is None or reference is None or runtime < reference - AS_GOOD_AS_REFERENCE_DB:
        return None
    return runtime, reference


def same_run(twin: Run, control: Run) -> bool:
    """Whether every tensor the twin's runtime logged (outputs included) equals the control's, bit for bit."""
    import torch

    def logged(run: Run) -> list[Any]:
        return [t for block in run.inspector.event_blocks for ev in block.events for t in (ev.debug_data or ())
                if isinstance(t, torch.Tensor)]

    a, b = logged(twin), logged(control)
    return bool(a) and len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def worst_snr_db(reference: list[Any], other: list[Any]) -> float | None:
    """The lowest SNR (dB) of ``other``'s tensors against ``reference``'s, pairwise; inf when all are
    bit-identical, None when the two cannot be paired (counts, types or shapes differ)."""
    import torch

    if not reference or len(reference) != len(other):
        return None
    worst = math.inf
    for a, b in zip(reference, other):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
            return None
        a, b = a.double(), b.double()
        noise, signal = float(((a - b) ** 2).sum()), float((a**2).sum())
        if noise:
            worst = min(worst, 10 * math.log10(signal / noise) if signal else -math.inf)
    return worst


def observed_effect_db(twin: Run, control: Run, row: Any) -> float | None:
    """SNR of the twin's logged outputs at ``row`` against the control's (inf: bit-identical)."""
    return worst_snr_db(_logged(control.inspector, row.runtime_handle), _logged(twin.inspector, row.runtime_handle))


def _ops(row: Any) -> set[str]:
    return set(row.aot_ops) | set(row.replayed_ops)


def _describe(row: Any) -> str:
    return f"#{row.index} {'+'.join(row.aot_ops[:3])}{'…' if len(row.aot_ops) > 3 else ''} ({row.verdict.value}, {row.local_gap:.1f} dB local)"


def score_case(folder: Path, truth: dict[str, Any], control: Run | None) -> Score:
    """Score one run; ``control`` is the clean run of the same architecture and backend."""
    from numdiff.errors import NumdiffError

    base = {"arch": truth["arch"], "backend": truth["backend"], "variant": truth["variant"]}
    plant = truth.get("plant")
    try:
        run = _run(folder)
        rep = run.report
    except NumdiffError as e:
        first = str(e).splitlines()[0][:160]
        if plant is None:
            return Score(**base, kind="clean", outcome="refused", detail=f"{type(e).__name__}: {first}")
        # A program of one or two ops all unrelated to their replays: numdiff says it cannot tell wrong
        # files from every op being wrong. Honest, but not the answer.
        undecided = type(e).__name__ == "MismatchedArtifactsError" and ("compared ops disagree" in first
                                                                         or "no op could be judged" in first)
        return Score(**base, kind="planted", outcome="undecided" if undecided else "missed", grade=plant["grade"],
                     plant=f"{plant['kind']} {plant['site']} ×{plant['size']}",
                     detail=f"refused: {type(e).__name__}: {first}")
    assert rep is not None
    culprits = tuple(_describe(r) for r in rep.culprits)
    if plant is None:
        fault = output_snr_db(run)
        if fault is not None and fault < RUNTIME_FAULT_DB and as_good_as_reference(folder, run) is None:
            # Not a control: the runtime itself computes something else than the reference model.
            named = "; ".join(culprits) or "no culprit named"
            return Score(**base, kind="clean", outcome="runtime-fault" if rep.culprits else "runtime-fault-missed",
                         culprits=culprits, detail=f"the runtime's program output is {fault:.1f} dB from the "
                         f"ETRecord's reference output: {named}")
        broken = [r for r in rep.rows if r.verdict.value == "broken"]
        if rep.culprits:
            return Score(**base, kind="clean", outcome="false-culprit", culprits=culprits,
                         detail="; ".join(culprits))
        if broken:
            return Score(**base, kind="clean", outcome="broken", detail="; ".join(_describe(r) for r in broken))
        return Score(**base, kind="clean", outcome="ok", noise_float=_largest_noise(rep, quantized=False),
                     noise_quantized=_largest_noise(rep, quantized=True))

    closure = set(truth["closure"])
    label = f"{plant['kind']} {plant['site']} ×{plant['size']}"
    if control is not None and same_run(run, control):
        # The plant changed the program but not one value of this run: numdiff sees a clean run, and a
        # culprit would be as false as on a control.
        common = {**base, "kind": "planted", "grade": plant["grade"], "plant": label, "culprits": culprits}
        if rep.culprits:
            return Score(**common, outcome="false-culprit", detail="no effect on the run, yet: " + "; ".join(culprits))
        return Score(**common, outcome="no-effect", detail="every value the runtime logged, the outputs included, "
                     "equals the control's (e.g. a change rounded away by int8)")
    hits = [r for r in rep.culprits if _ops(r) & closure]
    common = {**base, "kind": "planted", "grade": plant["grade"], "plant": label, "culprits": culprits}
    # A weight used at several places (an unrolled RNN's step) plants a fault at each: every culprit
    # holding a planted op is exact.
    if hits and len(hits) == len(rep.culprits):
        return Score(**common, outcome="exact")
    if hits:
        return Score(**common, outcome="partial", detail=f"also named: {[c for c in culprits if c not in map(_describe, hits)]}")
    planted_rows = [r for r in rep.rows if _ops(r) & closure]
    if not planted_rows:
        return Score(**common, outcome="missed-explained", detail="the planted op has no row (nothing logged to pair with it)")
    row = planted_rows[0]
    control_row = None
    if control is not None:
        control_row = next((r for r in control.report.rows if r.aot_ops == row.aot_ops), None)
    control_local = None if control_row is None else control_row.local_gap
    # The effect the runtime shows: its outputs at the planted row in the twin against the control's.
    effect = None if control is None else observed_effect_db(run, control, row)
    why = (f"planted row {_describe(row)}; twin vs control runtime there {_db(effect)}; "
           f"control's local error there {_db(control_local)}")
    if effect is not None and math.isinf(effect) and effect > 0:
        return Score(**common, outcome="missed-explained", detail=f"invisible: the runtime logged the same values "
                     f"as the control at the planted row (e.g. rounded away by int8): {why}")
    if (effect is not None and control_local is not None and not math.isnan(control_local)
            and effect >= control_local - BELOW_NOISE_MARGIN_DB):
        return Score(**common, outcome="missed-explained", detail=f"below the noise: {why}")
    if row.verdict.value in ("ok", "expected-noise"):
        return Score(**common, outcome="within-allowance",
                     detail=f"within the noise model's allowance for honest kernels ({row.local_noise_units:.2g} "
                     f"noise units, {row.noise}): {why}")
    if row.verdict.value == "not-judged":
        # The planted op reads the graph input and is unrelated to its replay: numdiff says it cannot tell a
        # run on other inputs from a badly wrong op without the run's inputs. Honest, but not the answer.
        return Score(**common, outcome="undecided", detail=f"not judged (the run's inputs are in doubt): {why}")
    if row.verdict.value == "unmatched":
        return Score(**common, outcome="missed", detail=f"the planted op's row could not be compared: {why}")
    return Score(**common, outcome="missed", detail=why)


#: The variants that run the clean program on other inputs, and on the representative ones plus 1%
#: noise (scripts/make_zoo.py).
OTHER_INPUT = "other_input"
NEAR_INPUT = "near_input"
#: How a report's note begins on a row judged on representative inputs nothing confirms.
_ASSUMED = "judged on the representative inputs"


def _score_other_input(folder: Path, base: dict[str, str], runtime_fault: bool = False,
                       kind: str = "other-input") -> Score:
    """A clean program run on other inputs (or, ``kind="near-input"``, on slightly different ones): ops
    that read the graph input cannot be judged, and no op may be called wrong (the ETRecord's
    representative inputs are not what the run read). A culprit whose verdict says it assumes the
    representative inputs (the one op reading an input, related to its replay: nothing tells a wrong op
    from a slightly different input) is ``assumed``, apart from false culprits. When the clean run
    showed the runtime computing wrongly (``runtime_fault``), this run is no control either."""
    from numdiff.errors import NumdiffError

    try:
        rep = _run(folder).report
    except NumdiffError as e:
        first = str(e).splitlines()[0][:160]
        if runtime_fault:
            return Score(**base, kind=kind, outcome="runtime-fault",
                         detail=f"the runtime computes this program wrongly (see its clean run): {first}")
        said = type(e).__name__ == "MismatchedArtifactsError" and "no op could be judged" in first
        return Score(**base, kind=kind, outcome="cannot-judge" if said else "refused",
                     detail=f"{type(e).__name__}: {first}")
    assert rep is not None
    unjudged = sum(r.verdict.value == "not-judged" for r in rep.rows)
    if runtime_fault:
        return Score(**base, kind=kind, outcome="runtime-fault",
                     culprits=tuple(_describe(r) for r in rep.culprits),
                     detail="the runtime computes this program wrongly (see its clean run): "
                     + ("; ".join(map(_describe, rep.culprits)) or "no culprit named"))
    broken = [r for r in rep.rows if r.verdict.value == "broken"]
    said = bool(rep.inputs_assumed) and all((r.note or "").startswith(_ASSUMED) for r in [*rep.culprits, *broken])
    if rep.culprits:
        return Score(**base, kind=kind, outcome="assumed" if said else "false-culprit",
                     culprits=tuple(_describe(r) for r in rep.culprits), detail="; ".join(map(_describe, rep.culprits)))
    if broken and said:
        return Score(**base, kind=kind, outcome="assumed", detail="; ".join(_describe(r) for r in broken))
    if broken:
        return Score(**base, kind=kind, outcome="broken", detail="; ".join(_describe(r) for r in broken))
    return Score(**base, kind=kind, outcome="ok", detail=f"{unjudged} of {len(rep.rows)} rows not judged")


def _largest_noise(rep: Any, quantized: bool) -> float:
    """The largest local error (noise units) among a report's quantized or floating-point rows."""
    return max((r.local_noise_units for r in rep.rows if not math.isnan(r.local_noise_units)
                and ("step" in r.noise and "no rounding" not in r.noise) == quantized), default=0.0)


def _db(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} dB"


def score_zoo(root: Path, only: list[str] | None = None) -> list[Score]:
    # Per-pair files, so that a zoo still being written can be scored (make_zoo.py writes them).
    recorded = [c for f in sorted(root.glob("*/*/cases.json")) for c in json.loads(f.read_text())]
    cases = [c for c in recorded if not only or c["arch"] in only]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        groups[(c["arch"], c["backend"])].append(c)
    scores: list[Score] = []
    for (arch, backend), group in sorted(groups.items()):
        control = None
        clean = next((c for c in group if c["variant"] == "clean"), None)
        for c in sorted(group, key=lambda c: c["variant"]):
            base = {"arch": arch, "backend": backend, "variant": c["variant"]}
            if c["status"] != "ok":
                scores.append(Score(**base, kind="dropped", outcome=c["status"], detail=str(c.get("reason", ""))[:200]))
                continue
            folder = root / arch / backend / c["variant"]
            truth = json.loads((folder / "truth.json").read_text())
            if c["variant"] == "clean":
                try:
                    control = _run(folder)
                except Exception:
                    control = None
            fault = any(x.arch == arch and x.backend == backend and x.variant == "clean"
                        and x.outcome.startswith("runtime-fault") for x in scores)
            if c["variant"] in (OTHER_INPUT, NEAR_INPUT):
                kind = "other-input" if c["variant"] == OTHER_INPUT else "near-input"
                scores.append(_score_other_input(folder, base, fault, kind))
                continue
            if fault and truth.get("plant") is not None:
                # The clean program already runs wrongly: a planted fault on top has no truth to score.
                scores.append(Score(**base, kind="dropped", outcome="runtime-fault-control",
                                    detail="the clean run of this program is a runtime fault"))
                continue
            scores.append(score_case(folder, truth, control if clean is not None else None))
    return scores


@dataclass(frozen=True)
class Crossed:
    """One run given a file of another model: it must be refused, never answered."""

    run: str  # arch/backend of the ETDump
    swapped: str  # "etrecord" or "debug_buffer"
    other: str  # arch/backend the swapped file comes from
    outcome: str  # refused | answered | crashed | same-program (lowering only)
    detail: str


def crossed_pairs(root: Path, limit: int) -> list[Crossed]:
    """Each clean run with another model's ETRecord, and with another model's debug buffer.

    Partners are the next clean runs in a fixed shuffled order (other architectures only), so the
    same ``limit`` checks the same pairs. ``find_culprits`` must raise a ``NumdiffError``.
    """
    import random

    from numdiff import Inspector
    from numdiff.errors import NumdiffError

    runs = sorted(p.parent for p in root.glob("*/*/clean/etdump.etdp"))
    random.Random(7).shuffle(runs)
    out: list[Crossed] = []
    for i, run in enumerate(runs[: max(0, limit)]):
        other = next((o for o in runs[i + 1:] + runs[:i] if o.parent.parent.name != run.parent.parent.name), None)
        if other is None:
            break
        for swapped in ("etrecord", "debug_buffer"):
            etrecord = (other if swapped == "etrecord" else run).parent / "etrecord.bin"
            buffer = (other if swapped == "debug_buffer" else run) / "debug_buffer.bin"
            name, partner = f"{run.parent.parent.name}/{run.parent.name}", f"{other.parent.parent.name}/{other.parent.name}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rep = Inspector(etdump_path=run / "etdump.etdp", etrecord=str(etrecord),
                                    debug_buffer_path=buffer).find_culprits("SNR")
            except NumdiffError as e:
                out.append(Crossed(name, swapped, partner, "refused", f"{type(e).__name__}: {str(e).splitlines()[0]}"))
            except Exception as e:  # noqa: BLE001 - an internal error is a finding too
                out.append(Crossed(name, swapped, partner, "crashed", f"{type(e).__name__}: {str(e)[:150]}"))
            else:
                out.append(Crossed(name, swapped, partner, "answered",
                                   f"{len(rep.rows)} rows, {len(rep.culprits)} culprits"))
    for run in runs[: max(0, limit)]:
        out += _other_lowerings(run)
    return out


def _event_names(run: Path) -> list[str]:
    from numdiff import Inspector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=run / "etdump.etdp")
    return sorted(e.name for block in inspector.event_blocks for e in block.events)


def _other_lowerings(run: Path) -> list[Crossed]:
    """``run`` with the ETRecord of the same architecture lowered for each other backend (a user who
    re-exported, e.g. quantized, and kept the old ETRecord): must be refused, unless both lowerings
    ran the very same operators (dynamic quantization of a model with no linear changes nothing)."""
    from numdiff import Inspector
    from numdiff.errors import NumdiffError

    out: list[Crossed] = []
    arch, backend = run.parent.parent, run.parent.name
    name = f"{arch.name}/{backend}"
    for other in sorted(b for b in arch.iterdir() if b.name != backend and (b / "clean" / "etdump.etdp").is_file()):
        partner = f"{arch.name}/{other.name}"
        if _event_names(run) == _event_names(other / "clean"):
            out.append(Crossed(name, "lowering", partner, "same-program", "both ran the same operators"))
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = Inspector(etdump_path=run / "etdump.etdp", etrecord=str(other / "etrecord.bin"),
                                debug_buffer_path=run / "debug_buffer.bin").find_culprits("SNR")
        except NumdiffError as e:
            out.append(Crossed(name, "lowering", partner, "refused", f"{type(e).__name__}: {str(e).splitlines()[0]}"))
        except Exception as e:  # noqa: BLE001 - an internal error is a finding too
            out.append(Crossed(name, "lowering", partner, "crashed", f"{type(e).__name__}: {str(e)[:150]}"))
        else:
            out.append(Crossed(name, "lowering", partner, "answered", f"{len(rep.rows)} rows, {len(rep.culprits)} culprits"))
    return out


def crossed_table(results: list[Crossed]) -> str:
    lines = ["Files that do not belong together (a run with another model's ETRecord or debug buffer, or with the "
             "ETRecord", "of its own model lowered for another backend): must be refused"]
    lines.append(f"{'swapped':<14} {'pairs':>6} {'refused':>8} {'answered':>9} {'crashed':>8} {'same program':>13}")
    for swapped in ("etrecord", "debug_buffer", "lowering"):
        rows = [r for r in results if r.swapped == swapped]
        n = Counter(r.outcome for r in rows)
        lines.append(f"{swapped:<14} {len(rows):>6} {n['refused']:>8} {n['answered']:>9} {n['crashed']:>8} "
                     f"{n['same-program']:>13}")
    lines.append("lowering: the same architecture's ETRecord for another backend; same program: both runs logged the "
                 "same operators")
    lines.append("  (e.g. dynamic quantization of a model with no linear), so answering is right: not counted.")
    for r in results:
        if r.outcome not in ("refused", "same-program"):
            lines.append(f"  {r.run} with {r.swapped} of {r.other}: {r.outcome}: {r.detail}"[:300])
    kinds = Counter(r.detail.split(":")[0] for r in results if r.outcome == "refused")
    lines.append("refused as: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return "\n".join(lines)


#: The runtime-fault cell of the controls' table: named / all.
_FAULTS = "runtime-fault named/all"


def _per_backend(scores: list[Score], columns: tuple[tuple[str, int, str], ...]) -> list[str]:
    """A header and one line per backend (and "all"): the runs, then each ``(header, width, outcome)`` count."""
    def cell(n: Counter[str], outcome: str) -> str:
        if outcome == _FAULTS:
            return f"{n['runtime-fault']}/{n['runtime-fault'] + n['runtime-fault-missed']}"
        return str(n[outcome])

    lines = [f"{'backend':<15} {'runs':>5} " + " ".join(f"{h:>{w}}" for h, w, _ in columns)]
    for b in BACKENDS + ("all",):
        rows = [s for s in scores if b in ("all", s.backend)]
        n = Counter(s.outcome for s in rows)
        lines.append(f"{b:<15} {len(rows):>5} " + " ".join(f"{cell(n, o):>{w}}" for _, w, o in columns))
    return lines


def table(scores: list[Score]) -> str:
    lines = []
    clean = [s for s in scores if s.kind == "clean"]
    planted = [s for s in scores if s.kind == "planted"]
    dropped = [s for s in scores if s.kind == "dropped"]
    lines.append("Clean runs (controls): a culprit, a broken row or a refusal is a false verdict")
    lines += _per_backend(clean, (("ok", 5, "ok"), ("false culprit", 14, "false-culprit"), ("broken row", 11, "broken"),
                                  ("refused", 8, "refused"), ("runtime fault", 14, _FAULTS)))
    controls = [s for s in clean if s.outcome == "ok"]
    lines.append(f"largest local error on the {len(controls)} controls: "
                 f"{max((s.noise_float for s in controls), default=0.0):.2g} noise units on floating-point rows, "
                 f"{max((s.noise_quantized for s in controls), default=0.0):.2g} on quantized rows")
    lines.append("runtime fault: a clean export whose runtime output is unrelated to the ETRecord's reference output")
    lines.append(f"  (< {RUNTIME_FAULT_DB:g} dB) and further from the float model's than the reference is (by over "
                 f"{AS_GOOD_AS_REFERENCE_DB:g} dB): not a")
    lines.append("  control; named/all = numdiff named a culprit in it.")
    lines.append("")
    lines += _input_runs(
        [s for s in scores if s.kind == "other-input"],
        ("Clean programs run on other inputs than the ETRecord's representative ones: a culprit, a broken",
         "row or a refusal that does not say it cannot judge is a false verdict"),
        ("cannot judge: every op reads the graph input; numdiff refuses and says to pass the run's inputs.",
         "runtime fault: the program's clean run is a runtime fault (above): not a control."))
    lines += _input_runs(
        [s for s in scores if s.kind == "near-input"],
        ("Clean programs run on their representative inputs plus 1% noise (a device that decodes its input",
         "slightly differently): a culprit, a broken row or a refusal is a false verdict, unless it says so"),
        ("assumption said: the one op that reads the input is named, and the first line says the verdict",
         "  assumes the run used the representative inputs (a slightly different input and a wrong op look",
         "  the same there; the run's own inputs, --step-inputs, settle it)."), assumed=True)
    lines.append("Planted twins: exact = the one culprit holds the planted op")
    lines.append(f"{'backend':<15} {'grade':<7} {'twins':>5} {'exact':>6} {'partial':>8} {'missed':>7} "
                 f"{'undecided':>10} {'invisible':>10} {'allowance':>10} {'exact %':>8} {'of all':>7}")
    for b in BACKENDS + ("all",):
        for g in ("small", "medium", "large", "all"):
            rows = [s for s in planted if b in ("all", s.backend) and g in ("all", s.grade) and s.outcome not in ("no-effect", "false-culprit")]
            if not rows:
                continue
            n = Counter(s.outcome for s in rows)
            judged = len(rows) - n["missed-explained"] - n["within-allowance"]
            pct = f"{100.0 * n['exact'] / judged:.1f}%" if judged else "–"
            lines.append(f"{b:<15} {g:<7} {len(rows):>5} {n['exact']:>6} {n['partial']:>8} {n['missed']:>7} "
                         f"{n['undecided']:>10} {n['missed-explained']:>10} {n['within-allowance']:>10} {pct:>8} "
                         f"{100.0 * n['exact'] / len(rows):>6.1f}%")
    no_effect = [s for s in planted if s.outcome == "no-effect"]
    faulty = [s for s in planted if s.outcome == "false-culprit"]
    lines.append(f"no effect (not counted above): {len(no_effect) + len(faulty)} twin(s) whose change altered the program "
                 "but not one value")
    lines.append(f"  the runtime logged, outputs included: clean runs; a culprit named in one is false: {len(faulty)}")
    lines.append("undecided: the planted op reads the graph input and is unrelated to its replay on the representative")
    lines.append("  inputs (numdiff says it cannot tell a run on other inputs, or wrong files, from a badly wrong op).")
    lines.append("invisible: the runtime logged the same values as the control at the planted row, or the fault is")
    lines.append("  below the control's own local error there, or the planted op has no row.")
    lines.append("allowance: numdiff judged the planted row within its documented noise model (ok or expected-noise):")
    lines.append("  no larger than an honest kernel on another device may differ (tighten with thresholds=).")
    lines.append("exact % is of the twins beyond both (detectable and beyond the allowance); of all: of every twin.")
    lines.append("")
    n = Counter(s.outcome for s in dropped)
    lines.append(f"Not scored: {len(dropped)} ({', '.join(f'{k} {v}' for k, v in sorted(n.items())) or 'none'}); "
                 "see --verbose for reasons")
    for title, outcomes in (("Wrong or incomplete verdicts:", WRONG + ("partial",)),
                            ("Explained misses:", ("missed-explained", "within-allowance", "no-effect", "runtime-fault",
                                                   "undecided"))):
        listed = [s for s in scores if s.outcome in outcomes]
        if listed:
            lines += ["", title] + [f"  {s.arch}/{s.backend}/{s.variant} [{s.outcome}] {s.plant}: {s.detail}"[:400]
                                    for s in listed]
    return "\n".join(lines)


def _input_runs(runs: list[Score], head: tuple[str, ...], legend: tuple[str, ...], assumed: bool = False) -> list[str]:
    """The table of clean programs run on inputs other than the representative ones (none: no lines).
    The "assumption said" column shows whenever a run has that outcome, so no run goes uncounted."""
    if not runs:
        return []
    columns: list[tuple[str, int, str]] = [("ok", 5, "ok"), ("cannot judge", 13, "cannot-judge")]
    if assumed or any(s.outcome == "assumed" for s in runs):
        columns.append(("assumption said", 16, "assumed"))
    columns += [("false culprit", 14, "false-culprit"), ("broken row", 11, "broken"), ("refused", 8, "refused"),
                ("runtime fault", 14, "runtime-fault")]
    return [*head, *_per_backend(runs, tuple(columns)), *legend, ""]


#: Outcomes that are numdiff's own mistakes (the command exits 1 on any).
WRONG = ("false-culprit", "broken", "refused", "missed", "runtime-fault-missed")


#: The sample committed under tests/fixtures/zoo/ (scored by tests/culprits/test_zoo_sample.py): the
#: cases that once failed and what each shows. ``(architecture, backend, variants)``.
SAMPLE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # two delegate outputs of one shape once swapped: a false broken culprit on the clean model
    ("attention_prenorm", "xnnpack", ("clean", "twin0")),
    # run on the representative input plus 1% noise: the conv that alone reads it is named, and the first
    # line says the verdict assumes the representative input
    ("conv_bn", "portable", ("clean", "near_input")),
    # ... here the quantize that also reads it agrees (1% is a fraction of its step): it confirms the input
    # for quantized readers only, so the float layer_norm reading it is not a plain culprit either
    ("input_fanout", "int8_portable", ("clean", "near_input")),
    # the float lowering of conv_bn: its ETRecord with the int8 XNNPACK run pairs by instruction and
    # handle; XNNPACK's operator names (F32 against QS8) tell the programs apart
    ("conv_bn", "xnnpack", ("clean",)),
    # the static int8 lowering of deep_mlp, against its dynamically quantized one (QS8 against QDU8)
    ("deep_mlp", "int8_xnnpack", ("clean",)),
    # a changed int8 weight read by a dequantize once hid as a quantization step of noise
    # ... and run on another input: the op that reads it is not judged, never a culprit
    ("conv_bn", "int8_portable", ("clean", "twin1", "other_input")),
    # a changed bias inside an int8 XNNPACK delegate: 7 noise units, once within 'expected'
    ("conv_bn", "int8_xnnpack", ("clean", "twin1")),
    # a bad conv inside an int8 XNNPACK delegate (named by its compute ops); twin0 is invisible
    ("depthwise_separable", "int8_xnnpack", ("clean", "twin0", "twin2")),
    # one weight used at every unrolled step: a culprit at each
    ("manual_rnn", "portable", ("clean", "twin1")),
    # a clean export the XNNPACK int8 runtime computes wrongly (-7 dB from the reference): the delegate
    # is the culprit, and the scorer does not count it as a control; twin0 (a bias change rounded away)
    # is that same wrong run: not scored as a planted fault
    ("manual_rnn", "int8_xnnpack", ("clean", "twin0")),
    # the graph input read by a layer_norm, a residual, a gate and a linear, around delegates; twin0's
    # 0.3% bias change in a delegate is 26 noise units: beyond XNNPACK's fp32 limit (8), not the default 64
    # other_input: every op reads the graph input and none can be judged: refused, naming both causes
    ("input_fanout", "xnnpack", ("clean", "twin0", "twin1", "other_input")),
    # RMSNorm, RoPE, grouped-query attention on the portable kernels
    ("llama_gqa_rope", "portable", ("clean", "twin1")),
    # a 1% larger quantize scale: 2.3 noise units, inside the quantized allowance; named by the rounding
    # check (elements a step off far from any rounding tie)
    ("autoencoder", "int8_portable", ("clean", "twin0")),
    # a 1% larger scale inside an int8 XNNPACK delegate: 2.9 noise units, beyond XNNPACK's quantized
    # limit (1; its clean delegates match the replay bit for bit), within the general sqrt(12)
    ("glu", "int8_xnnpack", ("clean", "twin0")),
    # dynamic quantization on XNNPACK, replayed per row as XNNPACK quantizes: clean once had false culprits
    # at 700-5000 units, then matched its replay to 55 dB only (the graph's per-tensor grid); now 147 dB.
    # twin1's 3% weight change was below that noise and is named
    ("deep_mlp", "int8dyn_xnnpack", ("clean", "twin0", "twin1")),
    # dynamically quantized convolutions: XNNPACK quantizes a pointwise conv's input per pixel and a 3x3
    # conv's per image; twin0's 0.3% weight change was below the per-tensor replay's noise (43 dB)
    ("upsample_decoder", "int8dyn_xnnpack", ("clean", "twin0")),
    # a delegate that logs scalar constants with its input: the input is found by its shape and dtype, so a
    # run on another input is replayed on what it read
    ("resnet_tiny", "int8dyn_xnnpack", ("clean", "other_input")),
    # a changed weight in the only op that reads the graph input: named, and the note says the verdict
    # assumes the run used the representative inputs (nothing else confirms it)
    ("temperature_softmax", "portable", ("clean", "twin1")),
)


def write_sample(root: Path, out: Path) -> None:
    """Copy :data:`SAMPLE` from the zoo at ``root`` to ``out`` (with its own cases.json files)."""
    import shutil

    for arch, backend, variants in SAMPLE:
        src, dst = root / arch / backend, out / arch / backend
        if dst.exists():
            shutil.rmtree(dst)
        dst.mkdir(parents=True)
        shutil.copy2(src / "etrecord.bin", dst / "etrecord.bin")
        cases = [c for c in json.loads((src / "cases.json").read_text()) if c["variant"] in variants]
        if sorted(c["variant"] for c in cases) != sorted(variants):
            raise SystemExit(f"{arch}/{backend}: the zoo at {root} lacks one of {variants}")
        (dst / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
        for v in variants:
            shutil.copytree(src / v, dst / v)


#: Makes (once) the virtualenv with ExecuTorch 1.5.1 that generating the zoo needs; numdiff never needs it.
ORACLE_VENV_SCRIPT = Path(os.environ.get("NUMDIFF_ORACLE_VENV_SCRIPT", REPO.parent / "shared" / "oracle-venv.sh"))


def generate(root: Path, only: list[str], jobs: int, twins: int) -> None:
    if not ORACLE_VENV_SCRIPT.is_file():
        raise SystemExit(
            f"zoo.py: generating the zoo needs ExecuTorch 1.5.1 in a separate virtualenv, made by {ORACLE_VENV_SCRIPT} "
            "(not found).\nSet NUMDIFF_ORACLE_VENV_SCRIPT to a script that prints that venv's python on its last "
            "line, or score a zoo that exists already with --dir (the committed sample: --dir tests/fixtures/zoo).")
    made = subprocess.run(["bash", str(ORACLE_VENV_SCRIPT)], capture_output=True, text=True)
    if made.returncode != 0 or not made.stdout.strip():
        raise SystemExit(f"zoo.py: {ORACLE_VENV_SCRIPT} failed (exit {made.returncode}): "
                         f"{(made.stderr.strip().splitlines() or [''])[-1]}")
    oracle = made.stdout.strip().splitlines()[-1]
    cmd = [oracle, str(REPO / "scripts" / "make_zoo.py"), "--out", str(root), "--jobs", str(jobs), "--twins", str(twins)]
    for a in only:
        cmd += ["--only", a]
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help=f"the zoo to score (and to generate when it holds none); default {DEFAULT_DIR} "
                             "(or $NUMDIFF_ZOO); the committed sample is tests/fixtures/zoo")
    parser.add_argument("--regenerate", action="store_true",
                        help="generate the zoo anew first (needs ExecuTorch 1.5.1's virtualenv, about an hour on 2 cores)")
    parser.add_argument("--only", action="append", default=[], metavar="ARCH",
                        help="only this architecture (repeatable; scripts/make_zoo.py --list names them)")
    parser.add_argument("--jobs", type=int, default=2, help="generator processes (default 2)")
    parser.add_argument("--twins", type=int, default=3, help="planted twins per architecture and backend (default 3)")
    parser.add_argument("--json", type=Path, help="also write every score as JSON")
    parser.add_argument("--verbose", action="store_true", help="list dropped cases with their reasons")
    parser.add_argument("--crossed", type=int, default=40, metavar="N",
                        help="also give N clean runs another model's ETRecord and debug buffer (default 40; 0: skip)")
    parser.add_argument("--write-sample", type=Path, metavar="DIR",
                        help="copy the committed sample's cases from --dir to DIR (tests/fixtures/zoo) and stop")
    args = parser.parse_args(argv)
    if args.write_sample:
        write_sample(args.dir, args.write_sample)
        return 0
    if args.regenerate or not any(args.dir.glob("*/*/cases.json")):
        generate(args.dir, args.only, args.jobs, args.twins)
    scores = score_zoo(args.dir, args.only)
    print(table(scores))
    crossed = crossed_pairs(args.dir, args.crossed) if args.crossed else []
    if crossed:
        print()
        print(crossed_table(crossed))
    if args.verbose:
        for s in scores:
            if s.kind == "dropped":
                print(f"  dropped {s.arch}/{s.backend}/{s.variant}: {s.outcome} {s.detail}")
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in scores], indent=1))
    wrong = sum(s.outcome in WRONG for s in scores)
    wrong += sum(c.outcome not in ("refused", "same-program") for c in crossed)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
