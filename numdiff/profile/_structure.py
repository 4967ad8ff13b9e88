"""A run's slot layout (which rows make which ``Event`` slot), worked out once per distinct run.

Within a run, profile and debug events are collated by instruction signature ``(instruction_id,
chain_index, delegate id int, delegate id str)`` in order of first appearance (the rules are in
``numdiff.profile.build``). Executions of one method usually log the same event sequence, so a
dump of a thousand runs holds a handful of distinct structures: ``Structures`` compares each run's
columns with a few earlier runs of the same length (numpy comparisons, no hashing of the columns)
and walks the rows in Python only for a run that matches none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from numdiff.schema.etdump import ETDump, EventColumns, EventKind

__all__ = ["Sig", "SlotKey", "Structure", "Structures"]

# (name, instruction id or None, delegate int or None, delegate str or None)
Sig = tuple[str, "int | None", "int | None", "str | None"]
SlotKey = tuple[int, "Sig | None", "Sig | None"]

#: The columns that decide a run's structure (timestamps and table positions do not).
_STRUCTURE_FIELDS = ("kind", "name", "chain_index", "instruction_id", "delegate_int", "delegate_str", "output")
#: Earlier runs a run is compared with before its structure is worked out anew; a bound, so a
#: crafted dump of many distinct runs of one length costs linear time, not quadratic.
_CANDIDATES = 4


@dataclass(frozen=True, slots=True)
class Structure:
    """The slot layout of a run: where each slot's profile row and debug rows are."""

    slots: tuple[SlotKey, ...]
    profile_rows: npt.NDArray[np.int64]  # -1: the slot has no profile event
    debug_rows: tuple[tuple[int, ...], ...]
    output_rows: tuple[int, ...]


class Structures:
    """Each run's ``Structure`` and layout number (runs with the same slot sequence share a number)."""

    def __init__(self, dump: ETDump) -> None:
        self._dump = dump
        self._seen: dict[tuple[int, ...], list[tuple[EventColumns, Structure, int]]] = {}
        self._layouts: dict[tuple[SlotKey, ...], int] = {}  # slot sequence -> its number

    def of(self, cols: EventColumns) -> tuple[Structure, int]:
        """The run's structure and layout number."""
        n = len(cols)
        key = (n, int(cols.name[0]), int(cols.name[-1]), int(cols.kind[-1])) if n else (0,)
        bucket = self._seen.setdefault(key, [])
        for earlier, structure, layout in bucket:
            if all(_equal(getattr(cols, f), getattr(earlier, f)) for f in _STRUCTURE_FIELDS):
                return structure, layout
        structure = _structure(self._dump, cols)
        layout = self._layouts.setdefault(structure.slots, len(self._layouts))
        if len(bucket) < _CANDIDATES:
            bucket.append((cols, structure, layout))
        return structure, layout


def _equal(a: npt.NDArray[np.generic], b: npt.NDArray[np.generic]) -> bool:
    """Two columns of the same length and dtype (the bucket's key, ``EventColumns``) hold the same values.

    A column that is one value for every row (stride 0, as the reader makes the fields a dump does
    not use) is compared by that value."""
    if a.size and not a.strides[0] and not b.strides[0]:
        return bool(a[0] == b[0])
    return bool((a == b).all())


def _structure(dump: ETDump, cols: EventColumns) -> Structure:
    kind, output = cols.kind.tolist(), cols.output.tolist()
    instr, chain, dint, dstr = (cols.instruction_id.tolist(), cols.chain_index.tolist(), cols.delegate_int.tolist(),
                                cols.delegate_str.tolist())
    names = cols.name.tolist()
    string = dump.string

    def signature(row: int) -> Sig:
        i, d = instr[row], dint[row]
        return (string(names[row]) or "", None if i == -1 else i, None if d == -1 else d, string(dstr[row]) or None)

    instructions: dict[tuple[int, int, int, int], tuple[list[int], list[int]]] = {}
    outputs: list[int] = []
    profile, debug = int(EventKind.PROFILE), int(EventKind.DEBUG)
    for row, key in enumerate(zip(instr, chain, dint, dstr, strict=True)):
        k = kind[row]
        if k != profile and k != debug:
            continue
        profile_rows, debug_rows = instructions.setdefault(key, ([], []))
        if k == profile:
            profile_rows.append(row)
        elif output[row]:
            outputs.append(row)
        else:
            debug_rows.append(row)
    slots: dict[SlotKey, tuple[int, tuple[int, ...]]] = {}
    for key, (profile_rows, debug_rows) in instructions.items():
        if not profile_rows and not debug_rows:
            continue
        debug_sig = signature(debug_rows[0]) if debug_rows else None
        drows = tuple(debug_rows)
        if not profile_rows:
            slots[(key[0], None, debug_sig)] = (-1, drows)
        for row in profile_rows:
            slots[(key[0], signature(row), debug_sig)] = (row, drows)
    return Structure(
        slots=tuple(slots),
        profile_rows=np.array([v[0] for v in slots.values()], dtype=np.int64),
        debug_rows=tuple(v[1] for v in slots.values()),
        output_rows=tuple(outputs),
    )
