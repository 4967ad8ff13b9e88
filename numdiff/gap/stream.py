"""The numerical gap one pair at a time, for intermediate outputs larger than memory.

``calculate_numeric_gap`` answers with the reference's DataFrame, which holds every AOT and runtime
intermediate output: its memory grows with the model's activations. :func:`stream_numeric_gap`
gives the same rows and gap values without those two columns, in bounded memory. The reference
graph runs twice: first keeping only the shape and dtype of each output (meta tensors), so outputs
are paired with the runtime's exactly as ``calculate_numeric_gap`` pairs them; then again, scoring
each pair as soon as its AOT output is computed. The AOT value goes as soon as the graph and the
pairs no longer need it, and the runtime value's debug-buffer pages are released once scored.
Peak memory: the weights, the graph's live values and the pair being scored.

Example:
    >>> df = inspector.stream_numeric_gap("SNR")  # doctest: +SKIP
    >>> df[["aot_ops", "runtime_ops", "gap"]].head()  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from numdiff._core.types import DebugHandle
from numdiff.errors import UsageError

if TYPE_CHECKING:
    import torch
    import pandas as pd

    from numdiff.comparators import NumericalComparatorBase
    from numdiff.gap.inputs import GapInputs

__all__ = ["STREAMED_COLUMNS", "stream_numeric_gap"]

#: Columns of the streamed gap: the reference's, less the two intermediate-output columns.
STREAMED_COLUMNS = ("aot_debug_handle", "aot_ops", "runtime_ops", "runtime_debug_handle", "gap", "stacktraces")

_Path = tuple[int, ...]


def stream_numeric_gap(inputs: GapInputs, comparator: NumericalComparatorBase,
                       release: Callable[[Any], None] | None = None) -> pd.DataFrame:
    """The gap rows of ``calculate_numeric_gap`` (columns :data:`STREAMED_COLUMNS`), scored while the
    reference graph runs a second time. ``inputs`` come from ``gather(..., shapes_only=True)``.

    Raises:
        UsageError: ``inputs`` hold values rather than shapes, or the comparator overrides
            ``compare`` or ``preprocessing`` (those need every pair at once).
    """
    from numdiff.align import pair_outputs
    from numdiff.comparators import NumericalComparatorBase
    from numdiff.comparators import GapTable
    from numdiff.gap.inputs import stack_traces_for
    from numdiff.gap.table import reference_raises

    if inputs.rerun is None:
        raise UsageError("stream_numeric_gap needs inputs gathered with shapes_only=True")
    cls = type(comparator)
    if cls.compare is not NumericalComparatorBase.compare or cls.preprocessing is not NumericalComparatorBase.preprocessing:
        raise UsageError(f"{cls.__name__} overrides compare() or preprocessing(), which need every pair at once\n"
                         "Use calculate_numeric_gap() with it, or a comparator that only defines element_compare().")
    report = pair_outputs(inputs.aot_outputs, inputs.runtime_outputs)
    if inputs.delegate_outputs and reference_raises(report):
        report = pair_outputs(inputs.aot_outputs, inputs.runtime_outputs, delegate_outputs=inputs.delegate_outputs)
    report.warn("pairing runtime and AOT intermediate outputs", stacklevel=3)
    scorer = _Scorer(inputs, comparator, list(report.to_reference_mapping().items()), release)
    inputs.rerun(scorer.on_output)
    table = GapTable(tuple(r for r in scorer.rows if r is not None), tuple(scorer.notes))
    table.warn(f"comparing with {cls.__name__}", stacklevel=3)
    df = table.to_dataframe().drop(columns=["aot_intermediate_output", "runtime_intermediate_output"])
    df["stacktraces"] = [stack_traces_for(list(ops), inputs.stack_traces) for ops in df["aot_ops"]]
    return df


class _Scorer:
    """Scores each pair the moment the last AOT output it needs is computed, then lets it go."""

    def __init__(self, inputs: GapInputs, comparator: NumericalComparatorBase,
                 entries: list[tuple[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]],
                 release: Callable[[Any], None] | None) -> None:
        self.inputs, self.comparator, self.entries, self.release = inputs, comparator, entries, release
        self.rows: list[Any] = [None] * len(entries)
        self.notes: list[Any] = []
        self.where: dict[int, tuple[DebugHandle, _Path]] = {}  # id(meta object) -> (handle, path in its output)
        for handle, shape in inputs.aot_outputs.items():
            self._index(shape, handle, ())
        self.waiting: dict[DebugHandle, list[int]] = {}  # handle -> entries that need it
        self.missing: list[int] = []  # per entry: handles not computed yet
        self.users: dict[DebugHandle, int] = {}  # handle -> entries not scored yet that need it
        self.held: dict[DebugHandle, Any] = {}  # computed outputs some unscored entry still needs
        for i, ((_, shape), _) in enumerate(entries):
            needs = {self.where[id(obj)][0] for obj in _objects(shape) if id(obj) in self.where}
            self.missing.append(len(needs))
            for handle in needs:
                self.waiting.setdefault(handle, []).append(i)
                self.users[handle] = self.users.get(handle, 0) + 1
            if not needs:  # no AOT tensor in it (None, a scalar): nothing to wait for
                self._score(i)

    def _index(self, obj: object, handle: DebugHandle, path: _Path) -> None:
        self.where[id(obj)] = (handle, path)
        if isinstance(obj, (list, tuple)):
            for k, item in enumerate(obj):
                self._index(item, handle, (*path, k))

    def on_output(self, handle: DebugHandle, node: torch.fx.Node, value: object) -> None:
        entries = self.waiting.get(handle)
        if not entries:
            return
        self.held[handle] = value
        for i in entries:
            self.missing[i] -= 1
            if self.missing[i] == 0:
                self._score(i)

    def _real(self, obj: object) -> object:
        """``obj`` (a meta output or a container of them) with the computed values in place."""
        found = self.where.get(id(obj))
        if found is not None:
            value = self.held[found[0]]
            for k in found[1]:
                value = value[k]
            return value
        if isinstance(obj, (list, tuple)):
            return type(obj)(self._real(x) for x in obj) if type(obj) in (list, tuple) else [self._real(x) for x in obj]
        return obj

    def _score(self, i: int) -> None:
        (aot_handle, shape), (runtime_handle, runtime_output) = self.entries[i]
        row = self.comparator.score_pair(aot_handle, self._real(shape), runtime_handle, runtime_output,
                                         self.inputs.aot_op_names, self.inputs.runtime_op_names, self.notes)
        self.rows[i] = None if row is None else dataclasses.replace(row, aot_output=None, runtime_output=None)
        if self.release is not None:
            self.release(runtime_output)
        for handle in {self.where[id(o)][0] for o in _objects(shape) if id(o) in self.where}:
            self.users[handle] -= 1
            if self.users[handle] == 0:
                self.held.pop(handle, None)


def _objects(obj: object) -> list[object]:
    """``obj`` and everything nested in it."""
    out = [obj]
    if isinstance(obj, (list, tuple)):
        for item in obj:
            out.extend(_objects(item))
    return out
