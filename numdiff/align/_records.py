"""Typed records that alignment produces: runtime outputs, aligned pairs, notes and the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from numdiff._core.notes import count_kinds, warn_counts
from numdiff._core.types import DebugHandle

__all__ = [
    "AlignedPair",
    "AlignmentNote",
    "AlignmentReport",
    "MatchKind",
    "NoteKind",
    "RuntimeOutput",
    "ShapeRelation",
    "is_sequence",
    "shape_relation",
]


def is_sequence(value: object) -> bool:
    """Tell whether an output counts as a sequence of outputs, as the reference decides it.

    A list or tuple is a sequence; a tensor or a number is not. (Strings also count, as in the
    reference, which tests ``isinstance(value, collections.abc.Sequence)``.)

    Example:
        >>> is_sequence([1, 2]), is_sequence(3.0)
        (True, False)
    """
    return isinstance(value, Sequence)


@dataclass(frozen=True, slots=True)
class RuntimeOutput:
    """What the runtime logged for one debug handle.

    Attributes:
        handle: The (possibly merged) debug handle.
        instruction_id: Instruction id of the event whose data was kept; ``None`` when unknown
            (for example when built from the reference's ``(data, num_outputs)`` tuples).
        op_name: Name of the event whose data was kept; ``None`` when unknown.
        data: The logged value: usually a list of tensors; for a delegate call, its inputs
            followed by its outputs.
        num_outputs: How many outputs the instruction produced.

    Example:
        >>> RuntimeOutput((3,), 7, "native_call_add.out", [1.0], 1).reference_value
        ([1.0], 1)
    """

    handle: DebugHandle
    instruction_id: int | None
    op_name: str | None
    data: Any
    num_outputs: int = 1

    @property
    def reference_value(self) -> tuple[Any, int]:
        """The ``(data, num_outputs)`` tuple the reference keys by handle."""
        return (self.data, self.num_outputs)


class MatchKind(str, Enum):
    """How the runtime value of a pair was chosen."""

    DIRECT = "direct"
    """The runtime logged a bare value, not a list: it is taken as is."""
    SOLE = "sole"
    """The runtime logged a one-element list: its only element."""
    POSITION = "position"
    """Picked by position from the end (the k-th output of a multi-output instruction)."""
    SHAPE = "shape"
    """The only runtime value with the AOT output's shape."""
    SHAPE_DTYPE = "shape_dtype"
    """Several runtime values had the AOT shape; only one also had its dtype."""
    FALLBACK_LAST = "fallback_last"
    """No unique shape/dtype match: the last runtime value was taken (reference behaviour)."""
    SEQUENCE = "sequence"
    """An AOT sequence paired with a runtime sequence as a whole (reference behaviour)."""
    ELEMENT_POSITION = "element_position"
    """numdiff only: the k-th element of an AOT sequence with the k-th runtime element."""
    ELEMENT_SHAPE_DTYPE = "element_shape_dtype"
    """numdiff only: an AOT sequence element with the only runtime element of its shape and dtype."""
    DELEGATE_OUTPUT = "delegate_output"
    """numdiff only: the k-th output of a multi-output delegate call with the graph node that
    produces the delegate's k-th output (reported under that node's handle)."""


class ShapeRelation(str, Enum):
    """How the shapes of the two sides of a pair relate."""

    SAME = "same"
    """Same shape (or both are not tensors)."""
    RESHAPE = "reshape"
    """Different shapes, same number of elements: compared as a reshape of the same elements."""
    MISMATCH = "mismatch"
    """Different numbers of elements: the pair cannot be compared element-wise."""


def shape_relation(aot: object, runtime: object) -> ShapeRelation:
    """Classify the shapes of two outputs; values without a ``shape`` count as scalars.

    Example:
        >>> import torch
        >>> shape_relation(torch.zeros(1, 8, 32), torch.zeros(1, 8, 2, 16)).value
        'reshape'
    """
    aot_shape = tuple(getattr(aot, "shape", ()))
    runtime_shape = tuple(getattr(runtime, "shape", ()))
    if aot_shape == runtime_shape:
        return ShapeRelation.SAME
    if _numel(aot_shape) == _numel(runtime_shape):
        return ShapeRelation.RESHAPE
    return ShapeRelation.MISMATCH


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


@dataclass(frozen=True, slots=True)
class AlignedPair:
    """One AOT output paired with one runtime output.

    Attributes:
        aot_handle: Handle the pair is reported under (the reference uses the runtime's merged
            handle here, and so does numdiff).
        aot_output: The reference graph's output (a tuple for a sequence in reference mode).
        runtime_handle: The runtime's (merged) debug handle.
        runtime_output: The runtime value chosen for ``aot_output``.
        match: How ``runtime_output`` was chosen.
        output_index: Which output of the runtime instruction, counted from the end (0 = last).
        element_index: For a pair taken from inside an AOT sequence, the element's position.
    """

    aot_handle: DebugHandle
    aot_output: Any
    runtime_handle: DebugHandle
    runtime_output: Any
    match: MatchKind
    output_index: int = 0
    element_index: int | None = None

    @property
    def shape_relation(self) -> ShapeRelation:
        """How the two sides' shapes relate (see :class:`ShapeRelation`)."""
        return shape_relation(self.aot_output, self.runtime_output)


class NoteKind(str, Enum):
    """Why something was not paired, or was paired in a way worth knowing."""

    EVENT_SKIPPED = "event_skipped"
    """An event with op types has no debug handle or instruction id (the reference crashes)."""
    MERGED_VALUE_NOT_LATEST = "merged_value_not_latest"
    """Merging overlapping runtime handles kept a value that is not the latest instruction's."""
    NO_AOT_OUTPUT = "no_aot_output"
    """A runtime output shares no debug handle id with any AOT output: skipped, as in the
    reference. (AOT outputs without a runtime counterpart are expected, ops the runtime does not
    log, and are not noted.)"""
    AMBIGUOUS_COMPONENT = "ambiguous_component"
    """Several runtime handles overlap the same AOT outputs (the reference raises)."""
    HANDLES_NOT_SUBSET = "handles_not_subset"
    """The AOT handles are not all inside the runtime handle: skipped, as in the reference."""
    AOT_OUTPUT_MISSING = "aot_output_missing"
    """No AOT output for the handle at that output position: skipped, as in the reference."""
    NO_RUNTIME_DATA = "no_runtime_data"
    """The runtime event logged no values (run without intermediate-output logging, or no debug
    buffer); the reference raises IndexError."""
    RUNTIME_TOO_SHORT = "runtime_too_short"
    """Fewer runtime handles or values than outputs (the reference raises IndexError)."""
    RUNTIME_NOT_SEQUENCE = "runtime_not_sequence"
    """An AOT sequence met a single runtime value (the reference raises TypeError)."""
    FALLBACK_MATCH = "fallback_match"
    """No unique shape/dtype match: the last runtime value was taken."""
    ELEMENT_UNMATCHED = "element_unmatched"
    """numdiff only: an element of an AOT sequence found no runtime value."""
    DELEGATE_ORDER_UNKNOWN = "delegate_order_unknown"
    """numdiff only: which graph node gives each output of a multi-output delegate call is not
    known (no graph, or the graph shows another number of partition outputs): its outputs are
    paired by the reference's position rule, and a pair whose shapes cannot correspond is not
    scored."""
    DELEGATE_ORDER_BY_SHAPE = "delegate_order_by_shape"
    """numdiff only: a multi-output delegate call logged its outputs in another order than the
    graph's (lowering re-sorts a partition's nodes once earlier partitions are cut out), which the
    logged shapes show: each output is paired with the partition output of its shape, outputs of
    one shape in graph order."""


@dataclass(frozen=True, slots=True)
class AlignmentNote:
    """A machine-readable remark about one skipped pair, fallback match or dropped event."""

    kind: NoteKind
    detail: str
    aot_handle: DebugHandle | None = None
    runtime_handle: DebugHandle | None = None


@dataclass(frozen=True, slots=True)
class AlignmentReport:
    """Every pair alignment made, and a note for everything it skipped or guessed.

    Example:
        >>> report = AlignmentReport(pairs=(), notes=())
        >>> len(report), report.counts()
        (0, {})
    """

    pairs: tuple[AlignedPair, ...]
    notes: tuple[AlignmentNote, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.pairs)

    def counts(self) -> dict[str, int]:
        """How many notes of each kind, by kind value (e.g. ``{"fallback_match": 2}``)."""
        return count_kinds(self.notes)

    def to_reference_mapping(self) -> dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]:
        """The reference's ``{(aot_handle, aot_output): (runtime_handle, runtime_output)}`` mapping.

        Later pairs overwrite earlier ones with the same key, exactly as the reference's dict does
        (tensors hash by identity, so this only happens for the very same object).
        """
        return {
            (pair.aot_handle, pair.aot_output): (pair.runtime_handle, pair.runtime_output)
            for pair in self.pairs
        }

    def warn(self, what: str, stacklevel: int = 2) -> None:
        """Emit one warning summarising the notes by kind, with counts; nothing if there are none.

        Args:
            what: What was being done, for the message (e.g. ``"aligning intermediate outputs"``).
            stacklevel: Passed to :func:`warnings.warn`. Defaults to 2.
        """
        warn_counts(self.counts(), what, "See the report's `notes` for the debug handles and reasons.", stacklevel + 1)
