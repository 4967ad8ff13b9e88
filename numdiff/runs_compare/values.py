"""One run's files opened, replayed and its logged values read per culprit row; the runs checked to be of one program."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from numdiff._core.etrecord import ETRecordLike
from numdiff.align import RuntimeOutput, collect_runtime_outputs
from numdiff.comparators import NumericalComparatorBase
from numdiff.culprits import CulpritReport, CulpritRow, in_run
from numdiff.culprits.decode import StepInputs
from numdiff.errors import MismatchedArtifactsError, MissingDataError, UsageError
from numdiff.gap import without_scratch

if TYPE_CHECKING:
    from numdiff.profile.events import Event

__all__ = ["LoadedRun", "RunFiles", "flat_tensors", "open_run", "row_value", "same_program"]

PathArg = str | os.PathLike[str]
FORWARD = "forward"


@dataclass(frozen=True, slots=True)
class RunFiles:
    """The files of one run of the program (one device, backend or build).

    Attributes:
        etdump: The ETDump the runtime wrote.
        debug_buffer: The debug buffer written with it (needed for intermediate outputs).
        step_inputs: For decode runs: each run's input tuple (a list, or a ``torch.save`` file of it).
    """

    etdump: PathArg
    debug_buffer: PathArg | None = None
    step_inputs: StepInputs | None = None

    @classmethod
    def of(cls, value: RunFiles | PathArg | Sequence[PathArg | None]) -> RunFiles:
        """A :class:`RunFiles` from itself, an ETDump path, or ``(etdump, debug_buffer[, step_inputs])``."""
        if isinstance(value, RunFiles):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls(value)
        if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3 and value[0] is not None:
            items = list(value) + [None] * (3 - len(value))
            return cls(items[0], items[1], items[2])
        raise UsageError(f"a run is an ETDump path, (etdump, debug_buffer[, step_inputs]) or RunFiles, not {value!r}\n"
                         "Pass e.g. runs={'laptop': ('laptop.etdp', 'laptop.bin'), 'phone': ('phone.etdp', 'phone.bin')}.")


@dataclass(frozen=True, slots=True)
class LoadedRun:
    """One run opened and replayed.

    Attributes:
        name: The run's name.
        files: Its files.
        events: Its events (every block, as find_culprits reads them).
        report: Its culprit report (the replay on its own inputs), or None with program outputs only.
        outputs: The program outputs it logged for its first run (flattened tensors), if any.
        runs: How many runs of the method it holds (decode steps).
        logged: The logged values by runtime handle, one mapping per run (read once, when opened).
    """

    name: str
    files: RunFiles
    events: tuple[Event, ...]
    report: CulpritReport | None
    outputs: tuple[torch.Tensor, ...]
    runs: int
    logged: tuple[dict[tuple[int, ...], RuntimeOutput], ...]

    def values(self, step: int = 0) -> dict[tuple[int, ...], RuntimeOutput]:
        """The logged values by runtime handle, as step ``step`` saw them."""
        return self.logged[step]


def flat_tensors(value: object) -> list[torch.Tensor]:
    """Every tensor in a value (a tensor, or nested lists and tuples of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    return []


def row_value(outputs: Mapping[tuple[int, ...], RuntimeOutput], row: CulpritRow) -> torch.Tensor | None:
    """The value the runtime logged for a culprit row: its element of the instruction's outputs (a
    delegate logs its inputs first, then its outputs), or all of its outputs flattened together."""
    logged = outputs.get(tuple(row.runtime_handle))
    if logged is None:
        return None
    tensors = flat_tensors(logged.data)
    if not tensors:
        return None
    produced = tensors[-logged.num_outputs:] if 0 < logged.num_outputs <= len(tensors) else tensors
    if row.element is not None and row.element < len(produced):
        return produced[row.element]
    if len(produced) == 1:
        return produced[0]
    return torch.cat([t.detach().reshape(-1).to(torch.float64) for t in produced])


def same_program(base: LoadedRun, run: LoadedRun, etrecord_name: str) -> None:
    """Refuse runs that were not made by the same program: their ops, handles and value shapes must match.

    Raises:
        MismatchedArtifactsError: Naming both runs' files and the first difference.
    """
    def refuse(what: str) -> MismatchedArtifactsError:
        return MismatchedArtifactsError(
            f"runs {base.name!r} ({os.fspath(base.files.etdump)}) and {run.name!r} ({os.fspath(run.files.etdump)}) "
            f"are not runs of one program: {what}\nCompare runs of the same .pte, each with the ETDump and debug "
            f"buffer it wrote, under the ETRecord {etrecord_name} of that program.")

    if (base.report is None) != (run.report is None):
        logged = base.name if base.report is not None else run.name
        raise MismatchedArtifactsError(
            f"run {logged!r} logged intermediate outputs and the other run did not ({os.fspath(base.files.etdump)}, "
            f"{os.fspath(run.files.etdump)})\nRun both with the same debug level and pass each run's debug buffer "
            "(or compare program outputs only: runs with no intermediate outputs).")
    if base.report is not None and run.report is not None:
        ours, theirs = base.report.rows, run.report.rows
        if len(ours) != len(theirs):
            raise refuse(f"{len(ours)} aligned ops against {len(theirs)}")
        for a, b in zip(ours, theirs):
            if a.aot_ops != b.aot_ops or a.runtime_handle != b.runtime_handle or a.runtime_ops != b.runtime_ops:
                raise refuse(f"op {a.index} is {', '.join(a.aot_ops)} (runtime {', '.join(a.runtime_ops)}) in one "
                             f"and {', '.join(b.aot_ops)} (runtime {', '.join(b.runtime_ops)}) in the other")
        base_values, run_values = base.values(), run.values()
        for row in ours:
            a_value, b_value = row_value(base_values, row), row_value(run_values, row)
            if a_value is not None and b_value is not None and \
                    (a_value.shape != b_value.shape or a_value.dtype != b_value.dtype):
                raise refuse(f"op {', '.join(row.aot_ops)} logs {tuple(a_value.shape)} {a_value.dtype} in one and "
                             f"{tuple(b_value.shape)} {b_value.dtype} in the other")
    if base.outputs and run.outputs and [(t.shape, t.dtype) for t in base.outputs] != \
            [(t.shape, t.dtype) for t in run.outputs]:
        raise refuse("their program outputs have different shapes or dtypes")


def open_run(name: str, files: RunFiles, etrecord: ETRecordLike, *, distance: str | NumericalComparatorBase,
             reference_graph: str | None, thresholds: object, decode_steps: bool) -> LoadedRun:
    """Open one run's files and replay it on its own inputs (:meth:`Inspector.find_culprits`).

    Raises:
        MissingDataError: The ETDump logs tensors but no debug buffer was given.
    """
    from numdiff.inspector import Inspector
    from numdiff.profile.events import logged_runs
    from numdiff.schema.debug_buffer import MissingTensor

    with warnings.catch_warnings():
        # A decode run's steps log different values by design: the Inspector's note says its drop-in
        # debug_data holds run 0's, which compare_runs never reads (each step is read on its own).
        warnings.filterwarnings("ignore", message=r"(?s).*logged values that differ from run 0", category=UserWarning)
        inspector = Inspector(etdump_path=files.etdump, etrecord=etrecord, debug_buffer_path=files.debug_buffer)
    blocks = [b for b in inspector.event_blocks if (b.method_name or FORWARD) == FORWARD]
    events = tuple(ev for block in inspector.event_blocks for ev in block.events)
    run_output = next((b.run_output for b in blocks if b.run_output), None)
    runtime, _ = collect_runtime_outputs(events)
    data = [r.data for r in runtime.values()]
    if any(isinstance(t, MissingTensor) for d in data for t in (d if isinstance(d, (list, tuple)) else [d])):
        raise MissingDataError(f"run {name!r}: ETDump {os.fspath(files.etdump)} logs intermediate tensors but no "
                               "debug buffer was given\nPass the buffer the runtime wrote with it "
                               f"(CLI: --run {name}=ETDUMP,DEBUG_BUFFER).")
    runtime, _notes = without_scratch(etrecord, runtime, FORWARD)  # a delegate's scratch is not an output
    has_values = any(flat_tensors(d) for d in data)
    report = None
    if has_values:
        report = inspector.find_culprits(distance, reference_graph=reference_graph, thresholds=thresholds,
                                         decode_steps=decode_steps or None, step_inputs=files.step_inputs)
    runs = max((logged_runs(ev) for ev in events), default=1)
    logged = (runtime,) if runs == 1 else tuple(
        without_scratch(etrecord, collect_runtime_outputs(in_run(events, r))[0], FORWARD)[0] for r in range(runs))
    return LoadedRun(name, files, events, report, tuple(flat_tensors(run_output or [])), runs, logged)
