"""The comparator contract: subclasses fill hooks, the base validates and orchestrates."""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sized
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, cast

import torch

from numdiff.comparators.numerics import collect_replacements
from numdiff._core.types import DebugHandle
from numdiff.align import (
    AlignmentReport,
    MatchKind,
    OpNameIndex,
    ShapeRelation,
    find_op_names,
    is_sequence,
    shape_relation,
)
from numdiff.comparators._result import CompareNote, CompareNoteKind, GapRow, GapTable
from numdiff.errors import ComparatorError, ComparatorTypeError, ComparatorValueError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["IntermediateOutputMapping", "NumericalComparatorBase"]

#: The hook contract kept from the reference: ``{(aot_handle, aot_output): (runtime_handle, runtime_output)}``.
IntermediateOutputMapping: TypeAlias = dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]

_OpNames: TypeAlias = Mapping[DebugHandle, list[str]]
AfterPair: TypeAlias = Callable[[Any, Any], None]


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)} {value.dtype}"
    if is_sequence(value):
        return f"{type(value).__name__} of {len(cast(Sized, value))}"
    return type(value).__name__


def _wrapped(error: Exception) -> type[ComparatorError]:
    """The ComparatorError class that also keeps the builtin the hook raised (TypeError, ValueError)."""
    if isinstance(error, TypeError):
        return ComparatorTypeError
    if isinstance(error, ValueError):
        return ComparatorValueError
    return ComparatorError


def _numel(value: object) -> int:
    """Element count of a tensor; 1 for a number (a scalar against a one-element tensor is no reshape)."""
    return int(value.numel()) if isinstance(value, torch.Tensor) else 1


def _is_handle(value: object) -> bool:
    return isinstance(value, tuple) and all(isinstance(item, int) for item in value)


class NumericalComparatorBase(ABC):
    """Base of every comparator: scores each AOT/runtime output pair with one number.

    Hook order (the base calls them; subclasses override only the hooks)::

        compare(mapping, aot_op_names, runtime_op_names)        public, do not override
        ├── preprocessing(mapping) -> mapping                   optional hook, called once
        ├── (base) validate the returned mapping
        └── for each pair, for each element of a sequence pair:
            ├── (base) skip None outputs and AOT sequences of several values (noted)
            ├── (base) reshape when only the shapes differ (see ``reshape_same_numel``)
            ├── element_compare(aot_value, runtime_value) -> float    required hook
            └── (base) check it returned a real number

    A hook that raises, or an ``element_compare`` that returns something other than a real
    number (a tensor, ``None``), becomes a :class:`~numdiff.errors.ComparatorError` naming the
    debug handles, op names, shapes and dtypes.

    Adding a metric is one file in ``numdiff/comparators/`` with a subclass, one
    ``register_comparator("name", Class)`` line, and one test module. A complete custom
    comparator that dequantizes int8 runtime outputs before scoring:

    >>> import torch
    >>> from numdiff.comparators import NumericalComparatorBase
    >>> class DequantizedMaxAbs(NumericalComparatorBase):
    ...     '''Largest absolute difference after dequantizing int8 runtime outputs.'''
    ...     def __init__(self, scale: float, zero_point: int = 0) -> None:
    ...         super().__init__()
    ...         self.scale, self.zero_point = scale, zero_point
    ...     def preprocessing(self, mapping):
    ...         def dequantize(out):
    ...             if isinstance(out, torch.Tensor) and out.dtype == torch.int8:
    ...                 return (out.double() - self.zero_point) * self.scale
    ...             return out
    ...         return {aot: (handle, dequantize(out)) for aot, (handle, out) in mapping.items()}
    ...     def element_compare(self, a, b) -> float:
    ...         a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    ...         return float((a - b).abs().max())
    >>> aot = torch.tensor([0.5, -1.0], dtype=torch.float64)
    >>> runtime = torch.tensor([5, -11], dtype=torch.int8)
    >>> df = DequantizedMaxAbs(scale=0.1).compare(
    ...     {((1,), aot): ((1,), runtime)}, {(1,): ["linear"]}, {(1,): ["quantized_linear"]})
    >>> round(df["gap"][0][0], 6), df["aot_ops"][0], df["runtime_ops"][0]
    (0.1, ['linear'], ['quantized_linear'])

    Attributes:
        reshape_same_numel: When the two sides of a pair hold the same number of elements in
            different shapes, reshape the runtime side to the AOT shape before
            ``element_compare`` (and note it). Set to False in a subclass whose
            ``element_compare`` handles shapes itself. Defaults to True.
        higher_is_better: How to read the metric: True when a larger number means closer outputs
            (SNR, cosine similarity), False for an error (L1, MSE, max abs). Views rank rows worst
            first by it, so a custom metric sets it once here. Defaults to False.
    """

    reshape_same_numel: ClassVar[bool] = True
    higher_is_better: ClassVar[bool] = False

    def __init__(self, inspector: Any | None = None) -> None:
        """Args:
        inspector: The Inspector using this comparator, for hooks that need the reference
            graph; the Inspector sets it when left ``None``. Defaults to None.
        """
        self._inspector = inspector

    @property
    def inspector(self) -> Any | None:
        """The Inspector this comparator works for (set by the Inspector; kept for drop-in use)."""
        return self._inspector

    @inspector.setter
    def inspector(self, value: Any | None) -> None:
        self._inspector = value

    def preprocessing(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
        """Hook: transform the pairs before scoring (dequantize, change layout...). Identity by default.

        Args:
            mapping: ``{(aot_handle, aot_output): (runtime_handle, runtime_output)}``.

        Returns:
            A mapping of the same form.
        """
        return mapping

    @abstractmethod
    def element_compare(self, a: Any, b: Any) -> float:
        """Hook: score one AOT value ``a`` against one runtime value ``b``; return a real number."""

    # ------------------------------------------------------------------ orchestration
    def compare(
        self,
        mapping: IntermediateOutputMapping,
        aot_debug_handle_to_op_names: _OpNames,
        runtime_debug_handle_to_op_names: _OpNames,
    ) -> pd.DataFrame:
        """Score every pair; the reference's DataFrame (drop-in entry point).

        Columns: ``aot_debug_handle, aot_ops, aot_intermediate_output, runtime_ops,
        runtime_debug_handle, runtime_intermediate_output, gap``. Rows the reference drops
        (a ``None`` output, an AOT sequence of several values) are dropped too; where the
        reference raises for the whole table (sequence lengths or element counts differ) the row
        is kept with gap ``[nan]``. Everything of the kind is summarised in one warning; the
        counts are in ``df.attrs["numdiff_notes"]``.

        Raises:
            ComparatorError: A hook raised, ``preprocessing`` returned a malformed mapping, or
                ``element_compare`` returned something other than a real number. Where the
                reference raises ``TypeError`` (``preprocessing`` did not return a dict) or
                ``ValueError`` (a malformed key, value or debug handle; a hook raised
                ``ValueError``) the error is a ``ComparatorTypeError`` / ``ComparatorValueError``,
                so it is also that builtin, and its first sentence is the reference's.
        """
        table = self.compare_to_table(mapping, aot_debug_handle_to_op_names, runtime_debug_handle_to_op_names)
        table.warn(f"comparing with {type(self).__name__}")
        return table.to_dataframe()

    def compare_to_table(
        self,
        mapping: IntermediateOutputMapping,
        aot_debug_handle_to_op_names: _OpNames,
        runtime_debug_handle_to_op_names: _OpNames,
        *,
        after_pair: AfterPair | None = None,
    ) -> GapTable:
        """Like :meth:`compare`, returning typed rows and notes, without warning.

        Args:
            after_pair: Called with ``(aot_output, runtime_output)`` once a pair is scored (the
                Inspector uses it to let go of debug-buffer pages as it goes). Defaults to None.
        """
        processed = self._preprocess(mapping)
        rows: list[GapRow] = []
        notes: list[CompareNote] = []
        if len(processed) > 1:  # each row names its ops: from an index, not a scan of every handle
            aot_debug_handle_to_op_names = OpNameIndex(aot_debug_handle_to_op_names)
            runtime_debug_handle_to_op_names = OpNameIndex(runtime_debug_handle_to_op_names)
        for (aot_handle, aot_output), (runtime_handle, runtime_output) in processed.items():
            row = self.score_pair(aot_handle, aot_output, runtime_handle, runtime_output,
                                  aot_debug_handle_to_op_names, runtime_debug_handle_to_op_names, notes)
            if row is not None:
                rows.append(row)
            if after_pair is not None:
                after_pair(aot_output, runtime_output)
        return GapTable(tuple(rows), tuple(notes))

    def score_pair(self, aot_handle: DebugHandle, aot_output: Any, runtime_handle: DebugHandle, runtime_output: Any,
                   aot_names: _OpNames, runtime_names: _OpNames, notes: list[CompareNote]) -> GapRow | None:
        """One pair as :meth:`compare_to_table` scores it (after preprocessing): its row, or None when
        the reference skips it (the reason appended to ``notes``)."""
        return self._score_pair(aot_handle, aot_output, runtime_handle, runtime_output, aot_names, runtime_names,
                                None, notes)

    def compare_aligned(
        self,
        report: AlignmentReport,
        aot_debug_handle_to_op_names: _OpNames,
        runtime_debug_handle_to_op_names: _OpNames,
    ) -> GapTable:
        """numdiff's fuller comparison of an :func:`~numdiff.align.align_intermediate_outputs` report.

        Each aligned pair (multi-output ops already split into elements) becomes a row that
        says how it was matched. ``preprocessing`` still sees the reference-shaped mapping;
        match kinds are kept when it returns as many pairs as it was given (in order).
        """
        mapping: IntermediateOutputMapping = {}
        notes: list[CompareNote] = []
        for pair in report.pairs:
            key = (pair.aot_handle, pair.aot_output)
            if key in mapping:
                notes.append(
                    CompareNote(CompareNoteKind.KEY_COLLISION, "the same AOT output object twice", pair.aot_handle)
                )
            mapping[key] = (pair.runtime_handle, pair.runtime_output)
        processed = self._preprocess(mapping)
        matches: list[MatchKind | None] = [pair.match for pair in report.pairs]
        if len(processed) != len(matches) or notes:
            matches = [None] * len(processed)
        rows: list[GapRow] = []
        for ((aot_handle, aot_output), (runtime_handle, runtime_output)), match in zip(
            processed.items(), matches, strict=True
        ):
            row = self._score_pair(
                aot_handle, aot_output, runtime_handle, runtime_output,
                aot_debug_handle_to_op_names, runtime_debug_handle_to_op_names, match, notes,
            )
            if row is not None:
                rows.append(row)
        return GapTable(tuple(rows), tuple(notes))

    # ------------------------------------------------------------------ internals
    def _preprocess(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
        name = type(self).__name__
        try:
            processed = self.preprocessing(mapping)
        except Exception as e:
            raise _wrapped(e)(
                f"{name}.preprocessing raised {type(e).__name__}: {e}\n"
                f"It received {len(mapping)} pairs keyed (aot_handle, aot_output) -> (runtime_handle, runtime_output)."
            ) from e
        # The first sentence of each message is the reference's, so code matching on it keeps working.
        if not isinstance(processed, dict):
            raise ComparatorTypeError(
                f"preprocessing() must return a dict, got {type(processed).__name__}. "
                f"Expected format: Dict[Tuple[DebugHandle, Any], Tuple[DebugHandle, Any]]\n"
                f"{name}.preprocessing should return {{(aot_handle, aot_output): (runtime_handle, runtime_output)}}."
            )
        for key, value in processed.items():
            for side, item in (("key", key), ("value", value)):
                if not (isinstance(item, tuple) and len(item) == 2):
                    raise ComparatorValueError(
                        f"Invalid {side} format in preprocessed mapping: {item!r:.100}. "
                        "Expected Tuple[DebugHandle, Any] where DebugHandle is Tuple[int, ...]\n"
                        f"{name}.preprocessing must map 2-tuples (debug_handle, output) to 2-tuples."
                    )
                if not _is_handle(item[0]):
                    which, where = ("AOT", "key") if side == "key" else ("runtime", "value")
                    raise ComparatorValueError(
                        f"Invalid {which} debug handle in {where}: {item[0]!r:.100}. Expected Tuple[int, ...]\n"
                        f"{name}.preprocessing must keep debug handles as tuples of ints, e.g. (3,) or (3, 4)."
                    )
        return processed

    def _score_pair(
        self,
        aot_handle: DebugHandle,
        aot_output: Any,
        runtime_handle: DebugHandle,
        runtime_output: Any,
        aot_names: _OpNames,
        runtime_names: _OpNames,
        match: MatchKind | None,
        notes: list[CompareNote],
    ) -> GapRow | None:
        def note(kind: CompareNoteKind, detail: str) -> None:
            notes.append(CompareNote(kind, detail, aot_handle, runtime_handle))

        if aot_output is None or runtime_output is None:
            note(CompareNoteKind.NONE_OUTPUT, f"{'AOT' if aot_output is None else 'runtime'} output is None")
            return None
        if is_sequence(aot_output) and len(aot_output) > 1:
            note(CompareNoteKind.SEQUENCE_SKIPPED, f"AOT output is a {_describe(aot_output)} values")
            return None
        aot_ops = find_op_names(aot_handle, aot_names)
        runtime_ops = find_op_names(runtime_handle, runtime_names)

        def row(gap: list[float], matched: bool, text: str | None) -> GapRow:
            return GapRow(
                aot_handle, aot_ops, aot_output, runtime_ops, runtime_handle, runtime_output,
                gap, matched, match, text,
            )

        def unmatched(reason: str) -> GapRow:
            note(CompareNoteKind.UNMATCHED, reason)
            return row([float("nan")], False, f"unmatched: {reason}")

        if is_sequence(aot_output) != is_sequence(runtime_output):
            return unmatched(
                f"one side is a sequence: AOT {_describe(aot_output)}, runtime {_describe(runtime_output)}"
            )
        if is_sequence(aot_output):
            if len(aot_output) != len(runtime_output):
                return unmatched(f"sequence lengths differ: AOT {len(aot_output)}, runtime {len(runtime_output)}")
            elements = list(zip(aot_output, runtime_output, strict=True))
        else:
            elements = [(aot_output, runtime_output)]

        gaps: list[float] = []
        remarks: list[str] = []
        for a, b in elements:
            if self.reshape_same_numel:
                relation = shape_relation(a, b)
                if relation is ShapeRelation.MISMATCH:
                    return unmatched(f"element counts differ: AOT {_describe(a)}, runtime {_describe(b)}")
                if relation is ShapeRelation.RESHAPE and _numel(a) > 1:
                    detail = f"compared runtime {_describe(b)} as a reshape to AOT {_describe(a)}"
                    if isinstance(a, torch.Tensor) and sorted(a.shape) == sorted(getattr(b, "shape", ())):
                        detail += (
                            " (the shapes are a permutation of each other: if the runtime used another"
                            " layout, permute it back in preprocessing())"
                        )
                    note(CompareNoteKind.RESHAPED, detail)
                    remarks.append(detail)
                    if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor):
                        b = b.reshape(a.shape)
            with collect_replacements() as tally:
                gaps.append(self._element_compare_checked(a, b, aot_handle, aot_ops, runtime_handle, runtime_ops))
            if tally:
                note(CompareNoteKind.NAN_REPLACED, tally.describe())
                remarks.append(tally.describe() + " (reference behaviour)")
        return row(gaps, True, "; ".join(remarks) or None)

    def _element_compare_checked(
        self,
        a: object,
        b: object,
        aot_handle: DebugHandle,
        aot_ops: list[str],
        runtime_handle: DebugHandle,
        runtime_ops: list[str],
    ) -> float:
        where = (
            f"AOT handle {aot_handle} {aot_ops} ({_describe(a)}) vs "
            f"runtime handle {runtime_handle} {runtime_ops} ({_describe(b)})"
        )
        name = type(self).__name__
        try:
            value = self.element_compare(a, b)
        except Exception as e:
            raise _wrapped(e)(
                f"{name}.element_compare failed on {where}: {type(e).__name__}: {e}\n"
                "Fix the comparator, or transform the outputs in preprocessing()."
            ) from e
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ComparatorError(
                f"{name}.element_compare returned {type(value).__name__} on {where}\n"
                "It must return a real number (a float); for a 0-d tensor use float(t) or t.item()."
            )
        return float(value)
