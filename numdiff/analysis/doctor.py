"""``numdiff doctor``: do the files belong together, what did the runtime log, and what to change.

The files are opened with the same checks as any analysis (a debug buffer that is a zip, an ETDump
or a ``.pte`` is refused), and with an ETRecord and a debug buffer the culprit finder's replay check
runs too: logged values that do not come from the program the ETRecord describes (another model's
or another run's debug buffer) are a ``fail``.

Each check gives a :class:`Finding` (``ok``, ``warn`` or ``fail``) with what was seen and, when
something is missing, what to change in the export or runtime settings to get it.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from numdiff._core.advice import INPUTS_HINT
from numdiff._core.events import DELEGATE_CALL, EXECUTE, OPERATOR_CALL, is_runtime_step
from numdiff._core.time_units import TimeScale, seconds_per_unit, time_scale_factor
from numdiff.errors import InputError, MismatchedArtifactsError, NumdiffError

if TYPE_CHECKING:
    from numdiff.inspector import Inspector
    from numdiff.profile.events import Event, EventBlock

__all__ = ["Finding", "diagnose", "diagnose_files"]

Level = Literal["ok", "warn", "fail"]
_HOW_TO_LOG = ("log intermediate outputs: C++ runner: ETDumpGen::set_debug_buffer(buffer) and "
               "set_event_tracer_debug_level(EventTracerDebugLogLevel::kIntermediateOutputs); Python runtime: "
               "Runtime.get().load_program(path, enable_etdump=True, debug_buffer_size=<bytes>), then "
               "program.write_etdump_result_to_file(etdump_path, debug_buffer_path)")
_HOW_TO_ETRECORD = ("write an ETRecord at export: to_edge_transform_and_lower(..., generate_etrecord=True) and "
                    "get_etrecord().save(path) on the result (or executorch.devtools.generate_etrecord)")


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's result: level, what was checked, what was seen, and what to change.

    ``bad_input`` marks a ``fail`` that is the files' fault, as every command sees it: a file numdiff
    refuses to read, or files that do not belong together (``MismatchedArtifactsError``).
    ``numdiff doctor`` then exits 3 (bad input), as the other commands do, instead of 1.
    """

    level: Level
    check: str
    detail: str
    fix: str = ""
    bad_input: bool = False


def _op_events(blocks: Sequence[EventBlock]) -> list[Event]:
    return [e for b in blocks for e in b.events if not is_runtime_step(e.name) and e.name != OPERATOR_CALL]


def diagnose(inspector: Inspector, *, has_debug_buffer: bool, has_etrecord: bool,
             inputs: Mapping[str, Any] | None = None) -> list[Finding]:
    """Checks on an opened Inspector (the files already passed numdiff's structural checks). ``inputs``:
    which graph inputs the run used (:func:`numdiff.analysis.stages.input_options`), for the replay check."""
    out: list[Finding] = []
    blocks = inspector.event_blocks
    ops = _op_events(blocks)
    top = [e for e in ops if not e.is_delegated_op]
    several = len({b.method_name for b in blocks if b.method_name}) > 1  # blocks of two methods share a name
    runs = {f"{b.name} ({b.method_name})" if several and b.method_name else b.name:
            max((len(e.perf_data.raw) for e in b.events if e.perf_data is not None), default=0) for b in blocks}
    out.append(Finding("ok" if any(n for n in runs.values()) else "fail", "runs",
                       ", ".join(f"{name}: {n} run(s)" for name, n in runs.items()) or "no blocks",
                       "" if any(runs.values()) else "enable profiling in the runner (ETDumpGen as the event tracer)"))
    # files belong together (the Inspector already refused an ETRecord of another model)
    if not has_etrecord:
        out.append(Finding("warn", "ETRecord", "no ETRecord: events have no op types, source lines or module paths, "
                           "and there is no numerical gap", _HOW_TO_ETRECORD))
    else:
        linked = [e for e in top if e.op_types]
        share = len(linked) / len(top) if top else 0.0
        level: Level = "ok" if share >= 0.9 else "warn" if share >= 0.5 else "fail"
        out.append(Finding(level, "debug handles",
                           f"{len(linked)} of {len(top)} runtime ops link to graph ops through the ETRecord ({share:.0%})"
                           + ("" if level == "ok" else ": the ETRecord may come from another export of the model"),
                           "" if share >= 0.9 else "re-export and re-run together: the ETRecord must be written by the "
                           "same export as the .pte that produced the ETDump"))
        calls = [e for e in top if e.name == DELEGATE_CALL]
        named = [e for e in calls if e.delegate_backend_name]
        if calls:
            out.append(Finding("ok" if len(named) == len(calls) else "warn", "delegate map",
                               f"{len(named)} of {len(calls)} delegate calls name their backend "
                               f"({', '.join(sorted({str(e.delegate_backend_name) for e in named})) or 'none'})",
                               "" if len(named) == len(calls) else "the ETRecord lacks the delegate map of this program: "
                               "write it from the same lowered program"))
        if getattr(inspector.etrecord, "_representative_inputs", None) is None:
            out.append(Finding("warn", "representative inputs", "the ETRecord has no representative inputs: the "
                               "reference graph cannot be run, so there is no numerical gap",
                               "export with example inputs and generate_etrecord=True, so the ETRecord keeps them"))
    # intermediate outputs
    logged = [e for e in top if e.debug_data]
    share = len(logged) / len(top) if top else 0.0
    if not has_debug_buffer:
        out.append(Finding("warn", "intermediate outputs", "no debug buffer given: tensor values are unavailable",
                           "pass --debug-buffer with the file the runtime wrote, or " + _HOW_TO_LOG))
    else:
        out.append(Finding("ok" if share >= 0.9 else "warn", "intermediate outputs",
                           f"{len(logged)} of {len(top)} runtime ops logged their outputs ({share:.0%})",
                           "" if share >= 0.9 else _HOW_TO_LOG))
    if has_debug_buffer and has_etrecord and logged:
        out += _belong_together(inspector, inputs or {})
    inside = [e for e in ops if e.is_delegated_op]
    if inside:
        out.append(Finding("ok", "inside delegates", f"{len(inside)} delegate-internal events are timed; their tensors "
                           "are compared one delegate call at a time",
                           "to compare ops inside a delegate one by one, lower fewer ops to it (a finer partitioner) "
                           "or compare a run without the delegate"))
    # timing sanity
    timed = [e for e in ops if e.perf_data is not None]
    if timed:
        out.append(_timing(timed, blocks[0].source_time_scale, blocks[0].target_time_scale))
        execute = [e.perf_data for b in blocks for e in b.events if e.name == EXECUTE and e.perf_data is not None]
        seconds = seconds_per_unit(blocks[0].target_time_scale)
        if execute and seconds is not None:  # cycles have no fixed duration: nothing to check against
            p50_s = execute[0].p50 * seconds
            sane = 1e-7 <= p50_s <= 600
            out.append(Finding("ok" if sane else "warn", "time scale", f"{EXECUTE} p50 = {p50_s:.3g} s",
                               "" if sane else "implausible: the runtime's timestamps are probably in another unit; "
                               "pass --source-time-scale (ns, us, ms, s or cycles)"))
    return out


#: A clock whose durations all come in whole steps of at least this long explains an op timed at zero:
#: such an op took less than one step. On a finer clock, a zero is the runtime logging one time twice.
_COARSE_STEP_S = 100e-9
_COARSE_STEP_CYCLES = 100


def _ticks(unit: str) -> str:
    """``unit`` as a person reads it in a sentence."""
    return "µs" if unit == "us" else unit


def _step_text(ticks: int, unit: str) -> str:
    """``ticks`` of the source clock in the largest unit that keeps it a whole-ish number: "1 µs", "250 ns"."""
    seconds = seconds_per_unit(unit)
    if seconds is None:
        return f"{ticks} {_ticks(unit)}"
    value = ticks * seconds
    for name, length in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= length * (1 - 1e-9):
            return f"{value / length:.4g} {name}"
    return f"{value / 1e-9:.4g} ns"


def _clock_step(durations: Sequence[int], unit: str) -> tuple[int | None, bool]:
    """The step (in source ticks) every nonzero duration is a whole multiple of, and whether it is coarse
    (:data:`_COARSE_STEP_S`); ``(None, False)`` when fewer than two nonzero durations cannot tell it."""
    positive = [d for d in durations if d > 0]
    if len(positive) < 2:
        return None, False
    step = math.gcd(*positive)
    seconds = seconds_per_unit(unit)
    return step, step >= _COARSE_STEP_CYCLES if seconds is None else step * seconds >= _COARSE_STEP_S * (1 - 1e-9)


def _timing(timed: Sequence[Event], source: TimeScale, target: TimeScale) -> Finding:
    """Are durations of zero what the clock explains? Events are grouped by who timed them: the runtime
    (ops and delegate calls), or each delegate's own profiler (the ops inside it). Durations are read back
    in the runtime's own ticks (``source``); in a group whose nonzero durations are all whole multiples of
    one coarse step, a zero is an op shorter than that step, and the finding says so; in a group timed
    finely, a zero is suspicious (warn); with fewer than two nonzero durations the step is unknown, and the
    finding says that. Most events at zero is a warning either way: the times say little.
    """
    per_unit = time_scale_factor(source, target)  # source ticks in one target unit

    def ticks(e: Event) -> list[int]:
        return [round(d * per_unit) for d in (e.perf_data.raw if e.perf_data is not None else [])]

    groups: dict[str, list[Event]] = {}
    for e in timed:
        who = f"inside {e.delegate_backend_name or 'a delegate'}" if e.is_delegated_op else "timed by the runtime"
        groups.setdefault(who, []).append(e)
    zero = [e for e in timed if max(ticks(e), default=0) <= 0]
    head = f"{len(timed) - len(zero)} of {len(timed)} timed events have a duration above zero"
    if not zero:
        return Finding("ok", "timing", head)
    said: list[str] = []
    unexplained = False
    for who, events in groups.items():
        zeros = sum(max(ticks(e), default=0) <= 0 for e in events)
        if not zeros:
            continue
        durations = [d for e in events for d in ticks(e)]
        step, coarse = _clock_step(durations, source.value)
        if step is None:
            nonzero = sum(d > 0 for d in durations)
            said.append(f"{zeros} {who} (the step of their clock cannot be told from {nonzero} nonzero "
                        f"duration{'s' if nonzero != 1 else ''})")
        elif coarse:
            said.append(f"{zeros} {who}, whose other durations are all whole multiples of "
                        f"{_step_text(step, source.value)}: a clock of that step, so these ops took less than one step")
        else:
            unexplained = True
            said.append(f"{zeros} {who}, on a clock that counts in steps of {_step_text(step, source.value)} or finer")
    detail = f"{head}; at zero: " + "; ".join(said)
    if len(zero) > len(timed) // 2:
        return Finding("warn", "timing", detail, "most timed events read zero, so these times say little (a clock "
                       "coarser than the ops, or one that does not count, reads so): profile with a finer clock or a "
                       "larger input, or read the times with --source-time-scale matching the runtime")
    if unexplained:
        return Finding("warn", "timing", detail, "an op timed at exactly zero on a fine clock is suspicious: the "
                       "runtime logged the same start and end time; check the runner's clock and its event tracer")
    return Finding("ok", "timing", detail)


_BELONG = "files belong together"


def _belong_together(inspector: Inspector, inputs: Mapping[str, Any]) -> list[Finding]:
    """The culprit finder's check that the logged values come from the program the ETRecord describes:
    every op is replayed on the runtime's logged inputs, and (nearly) every op disagreeing with its
    own replay from the first op on means another model's or another run's debug buffer or ETDump.
    A second finding warns when the run may have used other graph inputs than the representative ones."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = inspector.find_culprits("SNR", **inputs)
    except MismatchedArtifactsError as e:
        lines = str(e).splitlines()
        return [Finding("fail", _BELONG, lines[0], " ".join(lines[1:]), bad_input=True)]
    except NumdiffError as e:
        return [Finding("warn", _BELONG, "not checked: the ops could not be replayed on the logged values: "
                        + " — ".join(str(e).splitlines()), "")]
    found = [Finding("ok", _BELONG, f"{len(report.rows)} compared ops replayed on the runtime's logged inputs: the "
                     "logged values come from the program the ETRecord describes")]
    if report.inputs_in_doubt:
        found.append(Finding(
            "warn", "run's inputs", f"graph input(s) {', '.join(report.inputs_in_doubt)} may not be the ETRecord's "
            "representative inputs: no op that reads them agrees with its replay on those (or those ops are badly "
            "wrong), so the gap compares the device with a reference run on other inputs and numdiff diff does not "
            "gate this run's layers",
            INPUTS_HINT))
    return found


def diagnose_files(etdump: str | os.PathLike[str], etrecord: str | os.PathLike[str] | None = None,
                   debug_buffer: str | os.PathLike[str] | None = None,
                   inputs: Mapping[str, Any] | None = None) -> list[Finding]:
    """Open the files and run :func:`diagnose`; a file numdiff refuses (the run's step inputs too) is a
    ``fail`` finding."""
    from numdiff.inspector import Inspector

    inputs = dict(inputs or {})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inspector = Inspector(etdump_path=etdump, etrecord=etrecord, debug_buffer_path=debug_buffer)
            if inputs.get("step_inputs") is not None and inspector.etrecord is not None:
                from numdiff.culprits.decode import load_step_inputs

                inputs["step_inputs"] = load_step_inputs(inputs["step_inputs"], inspector.etrecord)
    except InputError as e:
        lines = str(e).splitlines()
        return [Finding("fail", type(e).__name__, lines[0], " ".join(lines[1:]), bad_input=True)]
    return diagnose(inspector, has_debug_buffer=debug_buffer is not None, has_etrecord=etrecord is not None,
                    inputs=inputs)
