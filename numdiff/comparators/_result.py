"""Records a comparison produces: one row per compared pair, notes, and the table."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from numdiff._core.notes import count_kinds, warn_counts
from numdiff._core.types import DebugHandle
from numdiff.align import MatchKind

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GAP_COLUMNS", "CompareNote", "CompareNoteKind", "GapRow", "GapTable"]

#: The reference's gap-table columns, in its order (the Inspector appends ``stacktraces``).
GAP_COLUMNS = (
    "aot_debug_handle",
    "aot_ops",
    "aot_intermediate_output",
    "runtime_ops",
    "runtime_debug_handle",
    "runtime_intermediate_output",
    "gap",
)


class CompareNoteKind(str, Enum):
    """What happened to a pair during comparison that a reader should know."""

    NONE_OUTPUT = "none_output"
    """One side is ``None``: no row, as in the reference."""
    SEQUENCE_SKIPPED = "sequence_skipped"
    """AOT output is a sequence of several values: no row, as in the reference (use
    :meth:`~numdiff.comparators.NumericalComparatorBase.compare_aligned` for element rows)."""
    UNMATCHED = "unmatched"
    """The two sides cannot be compared element-wise: row kept with gap NaN and the reason
    (the reference raises for the whole table)."""
    RESHAPED = "reshaped"
    """Same number of elements, different shapes: compared as a reshape of the same elements."""
    NAN_REPLACED = "nan_replaced"
    """The reference float conversion replaced NaN (and inf) values before a metric saw them."""
    KEY_COLLISION = "key_collision"
    """Two aligned pairs share one mapping key; the later one replaced the earlier."""


@dataclass(frozen=True, slots=True)
class CompareNote:
    """A machine-readable remark about one pair."""

    kind: CompareNoteKind
    detail: str
    aot_handle: DebugHandle | None = None
    runtime_handle: DebugHandle | None = None


@dataclass(frozen=True, slots=True)
class GapRow:
    """One row of the gap table.

    Attributes:
        gap: One value per compared element (one for a tensor); ``[nan]`` when unmatched.
        matched: False when the pair could not be compared (see ``note``).
        match: How alignment chose the runtime value, when known.
        note: Why the row is unmatched, or what was done to compare it (reshape, NaN replaced).
    """

    aot_handle: DebugHandle
    aot_ops: list[str]
    aot_output: Any
    runtime_ops: list[str]
    runtime_handle: DebugHandle
    runtime_output: Any
    gap: list[float]
    matched: bool = True
    match: MatchKind | None = None
    note: str | None = None

    def reference_record(self) -> dict[str, Any]:
        """The row as the reference's dict, keys in :data:`GAP_COLUMNS` order."""
        return {
            "aot_debug_handle": self.aot_handle,
            "aot_ops": self.aot_ops,
            "aot_intermediate_output": self.aot_output,
            "runtime_ops": self.runtime_ops,
            "runtime_debug_handle": self.runtime_handle,
            "runtime_intermediate_output": self.runtime_output,
            "gap": self.gap,
        }


@dataclass(frozen=True, slots=True)
class GapTable:
    """The rows of a comparison and the notes about pairs that did not become normal rows.

    Example:
        >>> table = GapTable(rows=(), notes=())
        >>> list(table.to_dataframe().columns) == list(GAP_COLUMNS)
        True
    """

    rows: tuple[GapRow, ...]
    notes: tuple[CompareNote, ...] = ()

    def __len__(self) -> int:
        return len(self.rows)

    def counts(self) -> dict[str, int]:
        """How many notes of each kind, by kind value."""
        return count_kinds(self.notes)

    def to_dataframe(self, extended: bool = False) -> pd.DataFrame:
        """The reference's DataFrame (columns :data:`GAP_COLUMNS`), one row per :class:`GapRow`.

        Args:
            extended: Also add numdiff's ``matched``, ``match`` and ``note`` columns.
                Defaults to False.

        The note counts are attached as ``df.attrs["numdiff_notes"]``.
        """
        import pandas as pd

        columns = list(GAP_COLUMNS) + (["matched", "match", "note"] if extended else [])
        records = []
        for row in self.rows:
            record = row.reference_record()
            if extended:
                record.update(
                    matched=row.matched,
                    match=None if row.match is None else row.match.value,
                    note=row.note,
                )
            records.append(record)
        frame = pd.DataFrame(records, columns=columns)
        frame.attrs["numdiff_notes"] = self.counts()
        return frame

    def warn(self, what: str, stacklevel: int = 2) -> None:
        """One warning summarising the notes by kind, with counts; nothing if there are none."""
        warn_counts(self.counts(), what,
                    "Call compare_to_table() (or compare_aligned()) for the notes with debug handles and reasons.",
                    stacklevel + 1)
