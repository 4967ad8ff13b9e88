"""Turn an ETDump's runs into ``EventBlock``s, with the reference's grouping rules.

Rules (observable behaviour of the reference, which numdiff reproduces):

* Within a run, profile and debug events are collated by instruction signature
  ``(instruction_id, chain_index, delegate id int, delegate id str)`` in order of first
  appearance. Each profile event of an instruction yields one ``Event`` slot; an instruction with
  only debug events yields one slot. Debug events flagged as program outputs are run outputs, not
  slots. A slot's identity is ``(instruction_id, profile signature, debug signature)``; a repeat
  of the same identity inside one run replaces the earlier one (keeping its position).
* Runs with the same name, bundled input index and slot sequence merge into one block; each slot
  then holds one sample per run.

Speed: runs whose event columns are equal share one structure (``numdiff.profile._structure``), so
only the first run of each distinct structure is walked in Python; the others contribute their
timestamps through numpy indexing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from numdiff._core.types import ProgramOutput
from numdiff.errors import ETDumpError
from numdiff.limits import current_limits
from numdiff.profile._columns import BlockColumns, SlotDebug, materialise
from numdiff.profile._structure import Sig, Structure, Structures
from numdiff.profile.events import DelegateMetadataParser, DelegateTimeScaleConverter, EventBlock
from numdiff.profile.timescale import TimeScale, time_scale_factor
from numdiff.schema.debug_buffer import DebugBuffer, inflate_value
from numdiff.schema.etdump import ETDump, RunData, Tensor, Value, read_value

__all__ = ["build_event_blocks"]

_MAX_U32 = 2**32 - 1

@dataclass(slots=True)
class _Group:
    name: str | None
    bundled_input_index: int
    members: list[tuple[RunData, Structure]] = field(default_factory=list)
    compared: int = 64  # runs whose logged values are read and compared at load (see _compared_runs)
    bound: str = ""  # the limit that set ``compared``, for the note


def _elapsed(start: npt.NDArray[Any], end: npt.NDArray[Any], dump: ETDump, what: str) -> npt.NDArray[np.float64]:
    """end - start, assuming a 32-bit timer that wrapped around when start > end."""
    wrapped = start > end
    if not wrapped.any():
        plain: npt.NDArray[np.float64] = (end - start).astype(np.float64)
        return plain
    if np.any(wrapped & ((start > _MAX_U32) | (end > _MAX_U32))):
        raise ETDumpError(
            dump.buffer.path,
            f"{what} has a start time after its end time, beyond a 32-bit timer wrap-around",
            "The timestamps are corrupt, or the runtime's timer is not monotonic.",
        )
    if start.dtype == np.uint64:
        normal = (end - start).astype(np.float64)
        wrap = ((_MAX_U32 - start) + end).astype(np.float64)
    else:
        normal, wrap = end - start, (_MAX_U32 - start) + end
    out: npt.NDArray[np.float64] = np.where(wrapped, wrap, normal)
    return out


@dataclass(slots=True)
class _Options:
    source: TimeScale
    target: TimeScale
    buffer: DebugBuffer | None
    parser: DelegateMetadataParser | None
    converter: DelegateTimeScaleConverter | None  # None: the default (divide by the scale factor)
    notes: list[str]
    etdump_path: str | None = None
    logged: list[tuple[Tensor, str]] = field(default_factory=list)  # every tensor read, for the overlap check
    compared_runs: int = 64  # numdiff.limits max_compared_runs
    compared_values: int = 4096  # numdiff.limits max_compared_values
    uncompared: set[str] = field(default_factory=set)  # blocks already noted as having runs not compared


def build_event_blocks(
    dump: ETDump,
    *,
    source_time_scale: TimeScale = TimeScale.NS,
    target_time_scale: TimeScale = TimeScale.MS,
    buffer: DebugBuffer | None = None,
    delegate_metadata_parser: DelegateMetadataParser | None = None,
    delegate_time_scale_converter: DelegateTimeScaleConverter | None = None,
) -> tuple[list[EventBlock], list[str]]:
    """The dump's event blocks, and notes on anything numdiff did differently from the reference."""
    opts = _Options(source_time_scale, target_time_scale, buffer, delegate_metadata_parser,
                    delegate_time_scale_converter, [], dump.buffer.path,
                    compared_runs=current_limits().max_compared_runs,
                    compared_values=current_limits().max_compared_values)
    structures = Structures(dump)
    groups: dict[tuple[str | None, int, int], _Group] = {}
    for run in dump.run_data:
        if not run.has_events_vector:  # as the reference: no events vector, no block (an empty one gives one)
            continue
        s, layout = structures.of(run.columns)
        key = (run.name, layout, run.bundled_input_index)
        groups.setdefault(key, _Group(run.name, run.bundled_input_index)).members.append((run, s))
    for g in groups.values():
        _compared_runs(g, opts)
    try:
        blocks = [_block(dump, g, opts) for g in groups.values()]
        if buffer is not None:
            buffer.check_no_overlap(opts.logged)
    except ETDumpError as e:
        if e.path is not None:
            raise
        raise ETDumpError(dump.buffer.path, e.problem, e.hint, e.offset) from e
    return blocks, opts.notes


def _block(dump: ETDump, group: _Group, opts: _Options) -> EventBlock:
    """The block of a group of runs; its ``Event`` records are made on first access."""
    cols = _columns(dump, group, opts)
    run_output = _program_outputs(dump, group, opts)
    block = EventBlock(
        name=group.name,  # type: ignore[arg-type]
        source_time_scale=opts.source,
        target_time_scale=opts.target,
        bundled_input_index=group.bundled_input_index,
        run_output=run_output,
    )
    block._set_columns(cols, lambda: materialise(cols))
    return block


def _label(sigs: tuple[Sig | None, Sig | None]) -> tuple[str, bool | None, int | str | None]:
    """Event name, is-delegated flag and delegate identifier after applying the slot's signatures."""
    name, delegated, ident = "", None, None
    for sig in sigs:
        if sig is not None:
            _, _, dint, dstr = sig
            ident = dint if dint is not None else dstr
            delegated = ident is not None
            label = str(ident) if ident is not None else sig[0]
            if label:
                name = label
    return name, delegated, ident


def _labels(slots: Sequence[tuple[int, Sig | None, Sig | None]]) -> tuple[list[tuple[str, bool | None, int | str | None]],
                                                                       list[tuple[str, bool | None, int | str | None]]]:
    """``_label`` of each slot's signatures, and of its profile signature alone (durations use the
    profile event's own label); the same when the slot has no debug signature."""
    labels, timed = [], []
    for _, p, d in slots:
        own = _label((p, None))
        timed.append(own)
        labels.append(own if d is None else _label((p, d)))
    return labels, timed


def _columns(dump: ETDump, group: _Group, opts: _Options) -> BlockColumns:
    first = group.members[0][1]
    factor = time_scale_factor(opts.source, opts.target)
    # Each structure's profile rows (-1 read as row 0), made once; None when they are every row of
    # the run in order (a run of profile events only): its columns are then taken as they are.
    safe: dict[int, npt.NDArray[np.int64] | None] = {}
    for run, s in group.members:
        if id(s) not in safe:
            rows = s.profile_rows
            every = rows.size == len(run.columns) and bool((rows == np.arange(rows.size)).all())
            safe[id(s)] = None if every else np.maximum(rows, 0)

    def times(column: npt.NDArray[np.uint64], s: Structure) -> npt.NDArray[np.uint64]:
        at = safe[id(s)]
        return column if at is None else column[at]

    # Runs x slots, held as slots x runs (the layout the Event records and the frames read, no copy then).
    starts = np.stack([times(r.columns.start_time, s) for r, s in group.members], axis=1).T
    ends = np.stack([times(r.columns.end_time, s) for r, s in group.members], axis=1).T
    labels, timed = _labels(first.slots)
    profiled = np.array([p is not None for _, p, _ in first.slots], dtype=np.bool_)
    delegated = np.array([bool(d) for _, d, _ in timed], dtype=np.bool_)
    plain = profiled & ~delegated
    every = bool(plain.all())
    plain_starts, plain_ends = (starts, ends) if every else (starts[:, plain], ends[:, plain])
    wrapped = plain_starts > plain_ends
    if wrapped.any() and np.any(wrapped & ((plain_starts > _MAX_U32) | (plain_ends > _MAX_U32))):
        plain[:] = every = False  # a corrupt timestamp: per event, so the error names the first one
    if every:
        durations = _elapsed(plain_starts, plain_ends, dump, "")  # a new array: divided in place
        durations /= factor
    else:
        durations = np.full(starts.shape, np.nan, order="F")
        durations[:, plain] = _elapsed(starts[:, plain], ends[:, plain], dump, "") / factor
    metadata: dict[int, list[str]] = {}
    debug: dict[int, SlotDebug] = {}
    for j in np.flatnonzero(profiled & ~plain).tolist():
        name, is_delegated, _ = timed[j]
        what = f"event {name!r} of run {group.name!r}"
        durations[:, j] = _durations(bool(is_delegated), name, starts[:, j], ends[:, j], factor, opts, dump, what)
    for j in np.flatnonzero(profiled & delegated).tolist():
        meta = [dump.event_at(r.columns, int(s.profile_rows[j])).profile_event.delegate_debug_metadata  # type: ignore[union-attr]
                for r, s in group.members]
        if any(meta):
            metadata[j] = [m if m else "" for m in meta]  # type: ignore[misc]
    for j, (_, _, debug_sig) in enumerate(first.slots):
        if debug_sig is not None:
            debug[j] = _debug_data(labels[j][0], dump, group, j, opts)
    return BlockColumns(
        names=[n for n, _, _ in labels], instruction_ids=[k[0] for k in first.slots],
        identifiers=[i for _, _, i in labels], delegated=[d for _, d, _ in labels], profiled=profiled,
        durations=durations, start_times=starts, metadata=metadata, debug=debug,
        parser=opts.parser, converter=opts.converter)


def _durations(delegated: bool, name: str, start: npt.NDArray[np.uint64], end: npt.NDArray[np.uint64],
               factor: float, opts: _Options, dump: ETDump, what: str) -> npt.NDArray[np.float64]:
    if not delegated:
        return _elapsed(start, end, dump, what) / factor
    if opts.converter is None:
        return _elapsed(start.astype(np.float64) / factor, end.astype(np.float64) / factor, dump, what)
    convert = opts.converter
    conv_start = np.array([convert(name, int(t)) for t in start], dtype=np.float64)
    conv_end = np.array([convert(name, int(t)) for t in end], dtype=np.float64)
    return _elapsed(conv_start, conv_end, dump, what)


def _values(dump: ETDump, run: RunData, rows: tuple[int, ...], opts: _Options, where: str) -> list[Value | None]:
    values = [None if (p := int(run.columns.value[r])) < 0 else read_value(dump.buffer, p) for r in rows]
    for i, v in enumerate(values):
        if v is not None:
            if v.tensor is not None:
                opts.logged.append((v.tensor, f"{where} value {i}"))
            for k, t in enumerate(v.tensor_list or ()):
                opts.logged.append((t, f"{where} value {i} tensor {k}"))
    return values


def _inflate(values: list[Value | None], opts: _Options, where: str) -> ProgramOutput:
    try:
        return [None if v is None else inflate_value(v, opts.buffer, where=where) for v in values]
    except ETDumpError as e:  # raised without the file's name (also later, from a _Loader)
        if e.path is not None or opts.etdump_path is None:
            raise
        raise ETDumpError(opts.etdump_path, e.problem, e.hint, e.offset) from e


def _same(a: Value | None, b: Value | None, buffer: DebugBuffer | None) -> bool:
    if a is None or b is None or a.val != b.val:
        return a is b
    ta = [a.tensor] if a.tensor is not None else list(a.tensor_list or ())
    tb = [b.tensor] if b.tensor is not None else list(b.tensor_list or ())
    if len(ta) != len(tb):
        return False
    if ta:
        if buffer is None:
            return all((x.scalar_type, x.sizes) == (y.scalar_type, y.sizes) for x, y in zip(ta, tb, strict=True))
        return all(buffer.tensors_equal(x, y) for x, y in zip(ta, tb, strict=True))
    return (a.int_value, a.bool_value, a.float_value, a.double_value, a.string_value) == (
        b.int_value, b.bool_value, b.float_value, b.double_value, b.string_value)


def _compared_runs(group: _Group, opts: _Options) -> None:
    """How many of the group's runs are read and compared at load: at most ``max_compared_runs``, and
    at most ``max_compared_values`` values in all (never fewer than two runs, so a difference shows)."""
    s = group.members[0][1]
    per_run = sum(len(rows) for rows in s.debug_rows) + len(s.output_rows)
    by_values = max(2, opts.compared_values // max(per_run, 1))
    if by_values < opts.compared_runs:
        group.compared = by_values
        group.bound = f"limit max_compared_values={opts.compared_values}, {per_run} values per run"
    else:
        group.compared = opts.compared_runs
        group.bound = f"limit max_compared_runs={opts.compared_runs}"
    later = {id(s): s for _, s in group.members[group.compared:]}.values()  # runs share structures
    _note_uncompared(group, opts, any(s.output_rows or any(s.debug_rows) for s in later))


def _note_uncompared(group: _Group, opts: _Options, later_logged: bool) -> None:
    """Note once per run name that runs past the limit were not compared (only if they logged values)."""
    if later_logged and str(group.name) not in opts.uncompared:
        opts.uncompared.add(str(group.name))
        opts.notes.append(
            f"run {group.name!r}: {len(group.members)} runs; the logged values of runs {group.compared} and "
            f"later were not compared with run 0's when loading ({group.bound}); "
            "they are read, bounds-checked, when used")


def _debug_data(name: str, dump: ETDump, group: _Group, j: int, opts: _Options) -> SlotDebug:
    where = f"event {name!r} of run {group.name!r}"
    per_run = [_values(dump, r, s.debug_rows[j], opts, f"{where} #{i}")
               for i, (r, s) in enumerate(group.members[:group.compared])]
    debug_data = _inflate(per_run[0], opts, where)
    differing = [i for i, vals in enumerate(per_run[1:], start=1)
                 if len(vals) != len(per_run[0]) or not all(_same(a, b, opts.buffer) for a, b in zip(vals, per_run[0]))]
    if differing:
        opts.notes.append(
            f"{where}: runs {differing} logged values that differ from run 0; debug_data holds run 0's "
            "(the reference refuses to load such a dump)"
        )
    loaders = _RunLoaders(dump, group, j, opts, where, per_run) if len(group.members) > 1 else None
    return SlotDebug(debug_data, loaders)


class _RunLoaders(Sequence[Callable[[], ProgramOutput]]):
    """One slot's per-run loaders, made when asked for (a dump may hold thousands of runs)."""

    def __init__(self, dump: ETDump, group: _Group, j: int, opts: _Options, where: str,
                 compared: list[list[Value | None]]) -> None:
        self._dump, self._group, self._j, self._opts, self._where = dump, group, j, opts, where
        self._compared = compared

    def __len__(self) -> int:
        return len(self._group.members)

    @overload
    def __getitem__(self, i: int) -> Callable[[], ProgramOutput]: ...

    @overload
    def __getitem__(self, i: slice) -> list[Callable[[], ProgramOutput]]: ...

    def __getitem__(self, i: int | slice) -> Callable[[], ProgramOutput] | list[Callable[[], ProgramOutput]]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # IndexError past the runs, as a tuple would
        if i < len(self._compared):
            return _Loader(self._compared[i], self._opts, self._where)
        run, s = self._group.members[i]
        return _LaterRun(self._dump, run, s.debug_rows[self._j], self._opts, f"{self._where} #{i}")


@dataclass(frozen=True, slots=True)
class _Loader:
    """Inflates one run's logged values on demand."""

    values: list[Value | None]
    opts: _Options
    where: str

    def __call__(self) -> ProgramOutput:
        return _inflate(self.values, self.opts, self.where)


@dataclass(frozen=True, slots=True)
class _LaterRun:
    """Reads and inflates the logged values of a run past ``max_compared_runs`` on demand."""

    dump: ETDump
    run: RunData
    rows: tuple[int, ...]
    opts: _Options
    where: str

    def __call__(self) -> ProgramOutput:
        return _inflate(_values(self.dump, self.run, self.rows, self.opts, self.where), self.opts, self.where)


def _program_outputs(dump: ETDump, group: _Group, opts: _Options) -> ProgramOutput:
    per_run = [_values(dump, r, s.output_rows, opts, f"program output of run {group.name!r} #{i}")
               for i, (r, s) in enumerate(group.members[:group.compared])]
    out = _inflate(per_run[0], opts, f"program outputs of run {group.name!r}")
    for i, vals in enumerate(per_run[1:], start=1):
        if len(vals) != len(per_run[0]) or not all(_same(a, b, opts.buffer) for a, b in zip(vals, per_run[0])):
            opts.notes.append(f"run {group.name!r} #{i}: program outputs differ from run 0; run_output holds run 0's")
    return out


def warn_notes(notes: list[str], etdump_path: str | None) -> None:
    """One warning of one line summarising every note, so a large dump does not flood the console.

    The notes themselves are the Inspector's ``notes``; the warning gives their count and the first.
    """
    if len(notes) == 1:
        warnings.warn(f"ETDump {etdump_path!r}: {notes[0]}", stacklevel=3)
    elif notes:
        warnings.warn(f"ETDump {etdump_path!r}: {len(notes)} notes (inspector.notes lists them), the first: "
                      f"{notes[0]}", stacklevel=3)

