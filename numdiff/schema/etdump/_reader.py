"""Reading an ETDump: locate and check the root, then read runs and events column-wise.

Every offset, vtable, field and vector is checked against the bytes that exist by
``numdiff.schema.etdump._flatbuf`` (a vector of N tables needs 4N bytes, so nothing is sized by an
unchecked field); enum fields (``Value.val``, ``Tensor.scalar_type``) must hold known values and
strings must be UTF-8. Events are read with numpy gathers, one pass per field over the events of
all runs, so large dumps need no Python loop per event. Failures are ``ETDumpError`` naming the
file, the byte offset and the table and field. The records it fills are defined in
``numdiff.schema.etdump``.
"""

from __future__ import annotations

import mmap
import os
import stat
from typing import Any

import numpy as np
import numpy.typing as npt

from numdiff.errors import ETDumpError
from numdiff.schema.etdump._flatbuf import FIELD_NAMES, Buffer
from numdiff.schema.etdump._flatbuf_columns import TableVector
from numdiff.schema.etdump._flatbuf_strings import intern_strings
from numdiff.schema.etdump.dump import ETDump, RunData
from numdiff.schema.etdump.records import FILE_IDENTIFIER, Allocator, EventColumns, EventKind

__all__ = ["read_etdump"]


FIELD_NAMES.update({  # the order of fields in numdiff/schema/etdump/etdump.fbs
    "ETDump": ("version", "run_data"),
    "RunData": ("name", "bundled_input_index", "allocators", "events"),
    "Allocator": ("name",),
    "Event": ("profile_event", "allocation_event", "debug_event"),
    "ProfileEvent": ("name", "chain_index", "instruction_id", "delegate_debug_id_int", "delegate_debug_id_str",
                     "delegate_debug_metadata", "start_time", "end_time"),
    "DebugEvent": ("chain_index", "instruction_id", "debug_entry", "delegate_debug_id_int",
                   "delegate_debug_id_str", "name"),
    "AllocationEvent": ("allocator_id", "allocation_size"),
    "Value": ("val", "tensor", "tensor_list", "int_value", "float_value", "double_value", "bool_value",
              "output", "string_value"),
    "Tensor": ("scalar_type", "sizes", "strides", "offset"),
    "TensorList": ("tensors",),
    "Int": ("int_val",), "Bool": ("bool_val",), "Float": ("float_val",), "Double": ("double_val",),
    "String": ("string_val",),
})


def _locate_root(data: bytes | mmap.mmap, path: str | None) -> tuple[int, bool]:
    """Root table position, and whether the file has exactly the size its prefix declares."""

    def fail(problem: str, hint: str) -> ETDumpError:
        return ETDumpError(path, problem, hint)

    if len(data) == 0:
        raise fail("the file is empty", "The runtime wrote nothing: check that ETDump generation was enabled and flushed.")
    if len(data) < 8:
        raise fail(f"only {len(data)} bytes: too short to be an ETDump (truncated?)", "Re-copy the file from the device.")
    if len(data) >= 12 and data[8:12] == FILE_IDENTIFIER:
        declared = int.from_bytes(data[0:4], "little")
        if declared > len(data) - 4:
            raise fail(
                f"truncated: the size prefix says {declared} bytes follow but only {len(data) - 4} do",
                "Re-copy the file from the device: it was cut short.",
            )
        return 4 + int.from_bytes(data[4:8], "little"), declared == len(data) - 4
    if data[4:8] == FILE_IDENTIFIER:
        return int.from_bytes(data[0:4], "little"), False
    found = data[8:12] if len(data) >= 12 else data[4:8]
    raise fail(
        f"not an ETDump: file identifier is {bytes(found)!r}, expected {FILE_IDENTIFIER!r}",
        "Pass the .etdp file the runtime's ETDumpGen wrote (not the .pte program or the debug buffer).",
    )


def _map_file(name: str) -> bytes | mmap.mmap:
    """The file's bytes: mapped read-only when the system allows (no copy; its pages come straight
    from the page cache), else read. Like the debug buffer, the file must not be rewritten while a
    dump read from it is in use."""
    try:
        with open(name, "rb") as f:
            info = os.fstat(f.fileno())
            if info.st_size and stat.S_ISREG(info.st_mode):
                try:
                    return mmap.mmap(f.fileno(), info.st_size, **_READ_ONLY)
                except (OSError, ValueError):
                    pass  # a file system that cannot map files: read it
            return f.read()
    except OSError as e:
        raise ETDumpError(name, f"cannot be read: {e.strerror or e}", "Check the path.") from e


#: A private read-only mapping; on Linux every page is mapped at once (MAP_POPULATE: one call
#: instead of a fault per page). Systems without MAP_PRIVATE (Windows) map with ACCESS_READ.
_READ_ONLY: dict[str, int] = (
    {"flags": mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0), "prot": mmap.PROT_READ}
    if hasattr(mmap, "MAP_PRIVATE") else {"access": mmap.ACCESS_READ})


def read_etdump(source: str | os.PathLike[str] | bytes, *, path: str | os.PathLike[str] | None = None) -> ETDump:
    """Parse an ETDump from a file path or from bytes.

    Args:
        source: Path of the ``.etdp`` file, or its contents.
        path: Name to use in error messages when ``source`` is bytes.

    Returns:
        The parsed dump.

    Raises:
        ETDumpError: The file is missing, empty, truncated, corrupt or not an ETDump.
    """
    data: bytes | mmap.mmap
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = None if path is None else os.fspath(path)
    else:
        name = os.fspath(source)
        data = _map_file(name)
    root_pos, intact = _locate_root(data, name)
    buf = Buffer.of(data, name, intact=intact)
    root = buf.table(root_pos, "ETDump root")
    strings: dict[bytes, int] = {}
    dump = ETDump(version=int(root.scalar(0, "u32", 0)), run_data=[], strings=[], buffer=buf)
    heads: list[tuple[str | None, int, tuple[Allocator, ...], bool]] = []
    spans: list[tuple[int, int]] = []  # each distinct run's events vector: (first element, length)
    seen: dict[int, int] = {}  # run table position -> its index in heads/spans (a repeated run is read once)
    order = []
    for pos in root.table_positions(1, "ETDump.run_data", half_signature=True).tolist():
        i = seen.get(pos)
        if i is None:
            run = buf.table(pos, "RunData")
            allocators = tuple(Allocator(a.string(0)) for a in run.table_vector(2, "RunData.allocators"))
            i = seen[pos] = len(heads)
            heads.append((run.string(0), int(run.scalar(1, "i32", -1)), allocators, run.has(3)))
            spans.append(run.vector(3, 4, "RunData.events") or (0, 0))
        order.append(i)
    # All runs' events are read in one column-wise pass, then split back per run (views, no copies).
    columns = _read_event_columns(buf, buf.follow_spans(spans, "RunData.events"), strings,
                                  _repeated_runs([n for _, n in spans]))
    bounds = np.cumsum([0, *(n for _, n in spans)]).tolist()
    per_run = [columns.slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    for i in order:
        name_, bundled, allocators, has_events = heads[i]
        dump.run_data.append(RunData(name=name_, bundled_input_index=bundled, allocators=allocators,
                                     columns=per_run[i], _dump=dump, has_events_vector=has_events))
    _check_repeated_names(buf, dump, strings, columns if len(heads) == len(order) else None)
    dump.strings.extend(_decode(buf, list(strings)))
    return dump


#: Every table built from a dump repeats its run, event and delegate names in each event's row;
#: together they may come to this many times the file's size, plus this floor, and no more.
NAME_RATIO, NAME_FLOOR = 16, 32 << 20


def _check_repeated_names(buf: Buffer, dump: ETDump, strings: dict[bytes, int],
                          every_run: EventColumns | None = None) -> None:
    """Refuse a dump whose names, repeated row by row, would take far more memory than the file.

    A real dump's names are short ("native_call_add.out", "Execute"), a few percent of the file
    once repeated; a crafted one can give a megabyte-long name to every event and run.
    ``every_run``: the events of all runs together, when each run appears once (then counted at once).
    """
    lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
    total = 0
    for cols in [every_run] if every_run is not None else [run.columns for run in dump.run_data]:
        for ids in (cols.name, cols.delegate_str):
            if ids.size and not ids.strides[0]:  # one id for every row
                total += int(lengths[ids[0]]) * ids.size if ids[0] >= 0 else 0
            else:  # each name's count times its length
                total += int(np.bincount(ids[ids >= 0], minlength=len(strings)) @ lengths)
    total += sum(len(run.name or "") * len(run.columns.kind) for run in dump.run_data)
    allowed = NAME_RATIO * len(buf) + NAME_FLOOR
    if total > allowed:
        raise ETDumpError(
            buf.path, f"its run, event and delegate names come to {total} bytes when repeated in each event's row, "
            f"more than numdiff builds tables from ({NAME_RATIO}x the {len(buf)}-byte file, plus {NAME_FLOOR >> 20} MiB)",
            "Names in a dump the runtime writes are short (op and delegate names, 'Execute'); these are not: "
            "the file is damaged or was crafted.")


def _decode(buf: Buffer, raw: list[bytes]) -> list[str]:
    out = []
    for b in raw:
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise buf.fail(f"an event name is not valid UTF-8: {b[:40]!r}") from e
    return out


class _Columns:
    """An ``EventColumns`` being filled: a column is made when first set, and a value set for every
    row becomes the column itself (no default-filled array, no scatter: in a dump of profile events
    only, every field of every event comes from the one kind of table)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.made: dict[str, npt.NDArray[np.generic]] = {}
        self.borrowed: set[str] = set()  # columns that are an array the caller gave: copied before a scatter

    def put(self, name: str, rows: npt.NDArray[np.int64] | None, values: npt.ArrayLike) -> None:
        """Set column ``name`` at ``rows`` (distinct rows; None: every row) to ``values``."""
        if rows is not None and rows.size == 0 and self.n:  # no row to set (a kind of event the dump does not hold)
            return
        dtype, default = _COLUMNS[name]
        if isinstance(values, np.ndarray) and values.ndim == 1 and values.size and not values.strides[0]:
            values = values[0]  # one value for every row (a _constant): kept as one
        if rows is None or rows.size == self.n:  # every row
            if np.ndim(values):
                self.made[name] = np.asarray(values).astype(dtype, copy=False)
                self.borrowed.add(name)
            elif values != default or name in self.made:
                self.made[name] = _constant(self.n, values, dtype)
                self.borrowed.add(name)  # read-only: copied before a scatter
            return
        column = self.made.get(name)
        if column is None:
            column = self.made[name] = np.full(self.n, default, dtype=dtype)
        elif name in self.borrowed:
            column = self.made[name] = column.copy()
            self.borrowed.discard(name)
        column[rows] = values

    def done(self) -> EventColumns:
        columns: dict[str, Any] = {name: self.made[name] if name in self.made else _constant(self.n, default, dtype)
                                   for name, (dtype, default) in _COLUMNS.items()}
        return EventColumns(**columns)


def _constant(n: int, value: object, dtype: type[np.generic]) -> npt.NDArray[np.generic]:
    """A read-only column of ``n`` rows that all hold ``value`` (one element in memory, stride 0): most
    columns of a dump of profile events only are one value (no debug values, no delegate ids)."""
    return np.broadcast_to(np.array(value, dtype=dtype), (n,))


#: Each ``EventColumns`` field's dtype, and its value in a row that does not set it.
_COLUMNS: dict[str, tuple[type[np.generic], int]] = {
    "kind": (np.int8, 0), "name": (np.int32, -1), "chain_index": (np.int64, 0), "instruction_id": (np.int64, -1),
    "delegate_int": (np.int64, -1), "delegate_str": (np.int32, -1), "start_time": (np.uint64, 0),
    "end_time": (np.uint64, 0), "table": (np.int64, -1), "value": (np.int64, -1), "output": (np.bool_, 0)}


def _repeated_runs(lengths: list[int]) -> tuple[int, int] | None:
    """``(start, p)`` when the last runs (at least two, from event ``start`` on) all have ``p`` events:
    executions of one method, whose names usually repeat run after run (``intern_strings`` checks)."""
    if not lengths or lengths[-1] < 1:
        return None
    p, k = lengths[-1], len(lengths) - 1
    while k > 0 and lengths[k - 1] == p:
        k -= 1
    return (sum(lengths[:k]), p) if len(lengths) - k >= 2 else None


def _read_event_columns(buf: Buffer, positions: npt.NDArray[np.int64], strings: dict[bytes, int],
                        period: tuple[int, int] | None = None) -> EventColumns:
    events = TableVector.at(buf, positions, "Event")
    out = _Columns(positions.size)
    put = out.put

    # Allocation first, then debug, then profile: later kinds overwrite, so profile wins.
    rows, alloc = events.subtables(1, "AllocationEvent")
    put("kind", rows, EventKind.ALLOCATION)
    put("table", rows, alloc.pos)

    rows, dbg = events.subtables(2, "DebugEvent")
    put("kind", rows, EventKind.DEBUG)
    put("table", rows, dbg.pos)
    put("chain_index", rows, dbg.scalar(0, "u64", 0).view(np.int64))  # raw bits; event_at restores the unsigned value
    put("instruction_id", rows, dbg.scalar(1, "i32", -1))
    put("delegate_int", rows, dbg.scalar(3, "i32", -1))
    put("delegate_str", rows, intern_strings(buf, dbg.indirect(4), "delegate id", strings))
    put("name", rows, intern_strings(buf, dbg.indirect(5), "debug event name", strings))
    vrows, values = dbg.subtables(2, "Value")
    vrows = rows if vrows is None else vrows if rows is None else rows[vrows]  # as event rows
    put("value", vrows, values.pos)
    orows, flags = values.subtables(7, "Bool")
    put("output", vrows if orows is None else orows if vrows is None else vrows[orows],
        flags.scalar(0, "bool", 0).astype(np.bool_))

    rows, prof = events.subtables(0, "ProfileEvent")
    del events, positions  # the Event tables' positions and word index: no longer needed
    if rows is not None and rows.size != out.n:
        period = None  # the runs' repeats are in event rows: only when every event is a profile event
    put("kind", rows, EventKind.PROFILE)
    put("table", rows, prof.pos)
    put("value", rows, -1)
    put("output", rows, False)
    put("name", rows, intern_strings(buf, prof.indirect(0), "profile event name", strings, period))
    put("chain_index", rows, prof.scalar(1, "i32", 0))
    put("instruction_id", rows, prof.scalar(2, "i32", -1))
    put("delegate_int", rows, prof.scalar(3, "i32", -1))
    put("delegate_str", rows, intern_strings(buf, prof.indirect(4), "delegate id", strings, period))
    put("start_time", rows, prof.scalar(6, "u64", 0))
    put("end_time", rows, prof.scalar(7, "u64", 0))
    return out.done()
