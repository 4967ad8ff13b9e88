"""Collect what the runtime logged per debug handle, and merge handles that overlap.

The result matches the reference Inspector's private ``_get_runtime_intermediate_outputs_and_op_names``
and its ``merge_runtime_overlapping_debug_handles``: same keys, same values, same order.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from numdiff._core.types import DebugHandle
from numdiff.align._records import AlignmentNote, NoteKind, RuntimeOutput

__all__ = [
    "EventLike",
    "collect_runtime_outputs",
    "merge_overlapping_outputs",
    "merge_runtime_overlapping_debug_handles",
    "own_delegate_ids",
]

#: Event names whose debug data duplicates the op event before them; never used for gaps.
_EXCLUDED_EVENT_NAMES = frozenset({"OPERATOR_CALL"})


class EventLike(Protocol):
    """The attributes of an Inspector event that alignment reads (numdiff's ``Event`` has them)."""

    @property
    def name(self) -> str: ...
    @property
    def op_types(self) -> Sequence[str] | None: ...
    @property
    def debug_handles(self) -> int | Sequence[int] | None: ...
    @property
    def _instruction_id(self) -> int | None: ...
    @property
    def debug_data(self) -> Any: ...
    @property
    def num_outputs(self) -> int: ...
    @property
    def is_delegated_op(self) -> bool | None: ...
    @property
    def delegate_backend_name(self) -> str | None: ...


def _as_handle(handles: int | Sequence[int]) -> DebugHandle:
    return (handles,) if isinstance(handles, int) else tuple(handles)


def _has_data(data: object) -> bool:
    if data is None:
        return False
    return len(data) > 0 if isinstance(data, Sequence) else True


def own_delegate_ids(events: Sequence[EventLike]) -> dict[DebugHandle, DebugHandle]:
    """``{delegate call's handle: that handle without the ids of earlier delegate calls}``.

    A partitioner duplicates the dequantize node a value is read through into every partition that
    reads it, and the copy keeps the value's debug handle: the call that reads a residual computed
    by an earlier call logs that id too. The reference then merges the two calls (rule 5 of
    :func:`collect_runtime_outputs`) and keeps only the later call's data, so every output of the
    earlier one is lost (three XNNPACK calls of an int8 ConvNeXt stage became one). A copied
    dequantize is one node: an id a call holds once, which an earlier call computed (held for
    several nodes: the op, its quantize and dequantize), is that call's input, and is dropped from
    its handle. Ids that several calls hold for several nodes (one source op decomposed across
    partitions, as ``scaled_dot_product_attention`` is) stay, and those calls stay merged as the
    reference merges them. Calls that share an id with a kernel's (non-delegated) event, calls left
    without an id of their own, and repeats of the same handle (another run of the same call), are
    not changed.
    """
    kernels = {item for event in events if event.name not in ("DELEGATE_CALL", *_EXCLUDED_EVENT_NAMES)
               and event.op_types and event.debug_handles is not None for item in _as_handle(event.debug_handles)}
    computed: set[int] = set()
    out: dict[DebugHandle, DebugHandle] = {}
    for event in events:
        if event.name != "DELEGATE_CALL" or event.debug_handles is None:
            continue
        handle = _as_handle(event.debug_handles)
        if handle in out:
            continue
        if not kernels.isdisjoint(handle):  # merged with a kernel's output anyway: left as the reference has it
            out[handle] = handle
            continue
        copies = {item for item in handle if item in computed and handle.count(item) == 1}
        own = tuple(item for item in handle if item not in copies)
        out[handle] = own if own else handle
        computed.update(item for item in handle if handle.count(item) > 1)
    return {handle: own for handle, own in out.items() if own != handle}


def collect_runtime_outputs(
    events: Iterable[EventLike], *, split_delegates: bool = False,
) -> tuple[dict[DebugHandle, RuntimeOutput], dict[DebugHandle, list[str]]]:
    """Gather the runtime's intermediate outputs by debug handle, as the reference does.

    Rules, in order:

    1. ``OPERATOR_CALL`` events and events without op types are left out.
    2. A ``DELEGATE_CALL`` is left out when events delegated to the same backend already log
       per-op outputs for any of its handles.
    3. An int handle becomes a one-element tuple.
    4. When several events share a handle, the one with the largest instruction id wins; its
       name becomes the handle's op name.
    5. Handles that overlap are merged (:func:`merge_overlapping_outputs`).

    Op names stay keyed by the handles *before* merging, as in the reference. Events with op
    types but no debug handle or instruction id (the reference crashes on them) are skipped with
    a warning.

    Args:
        events: Events of every event block, in order.
        split_delegates: Not the reference's rule (the culprit finder's): first drop from each
            delegate call's handle the ids an earlier call holds (:func:`own_delegate_ids`), so
            that calls sharing only a duplicated dequantize are not merged.

    Returns:
        ``(outputs_by_handle, op_names_by_handle)``. ``outputs_by_handle[h].reference_value`` is
        the reference's ``(debug_data, num_outputs)``.

    Example:
        >>> from types import SimpleNamespace as E
        >>> ev = lambda name, h, i, d: E(name=name, op_types=["add"], debug_handles=h,
        ...     _instruction_id=i, debug_data=d, num_outputs=1, is_delegated_op=False,
        ...     delegate_backend_name=None)
        >>> outs, names = collect_runtime_outputs([ev("a", 4, 4, [1.0]), ev("b", 4, 5, [2.0])])
        >>> outs[(4,)].data, names[(4,)]
        ([2.0], ['b'])
    """
    events = list(events)
    inner_handles_by_backend: dict[str | None, set[int]] = defaultdict(set)
    for event in events:
        if (
            event.is_delegated_op
            and event.op_types
            and _has_data(event.debug_data)
            and event.debug_handles is not None
        ):
            inner_handles_by_backend[event.delegate_backend_name].update(
                _as_handle(event.debug_handles)
            )

    latest: dict[DebugHandle, RuntimeOutput] = {}
    op_names: dict[DebugHandle, list[str]] = {}
    skipped: list[str] = []
    own = own_delegate_ids(events) if split_delegates else {}
    for event in events:
        if event.name in _EXCLUDED_EVENT_NAMES or not event.op_types:
            continue
        if event.debug_handles is None or event._instruction_id is None:
            skipped.append(event.name)
            continue
        handle = _as_handle(event.debug_handles)
        if event.name == "DELEGATE_CALL":
            handle = own.get(handle, handle)
        if event.name == "DELEGATE_CALL":
            inner = inner_handles_by_backend.get(event.delegate_backend_name)
            if inner and not inner.isdisjoint(handle):
                continue
        current = latest.get(handle)
        current_id = -1 if current is None or current.instruction_id is None else current.instruction_id
        if event._instruction_id > current_id:
            latest[handle] = RuntimeOutput(
                handle, event._instruction_id, event.name, event.debug_data, event.num_outputs
            )
            op_names[handle] = [event.name]
    if skipped:
        warnings.warn(
            f"numdiff: skipped {len(skipped)} event(s) with op types but no debug handle or "
            f"instruction id: {sorted(set(skipped))}.\n"
            "Their debug data cannot be paired with the reference graph.",
            UserWarning,
            stacklevel=2,
        )

    merged, notes = merge_overlapping_outputs(latest.values())
    if notes:
        warnings.warn(
            f"numdiff: merging overlapping runtime debug handles kept an older instruction's data "
            f"for {len(notes)} handle(s) (reference behaviour): "
            f"{[note.runtime_handle for note in notes]}.",
            UserWarning,
            stacklevel=2,
        )
    return {output.handle: output for output in merged}, op_names


def _merge_handles(first: DebugHandle, second: DebugHandle) -> DebugHandle:
    """``first`` minus ids found in ``second``, then ``second`` without repeats.

    The reference keeps repeats inside ``first``; so does this.
    """
    second_ids = set(second)
    merged = [item for item in first if item not in second_ids]
    seen = set(merged)
    for item in second:
        if item not in seen:
            merged.append(item)
            seen.add(item)
    return tuple(merged)


def _id(output: RuntimeOutput) -> int:
    return -1 if output.instruction_id is None else output.instruction_id


def merge_overlapping_outputs(
    outputs: Iterable[RuntimeOutput],
) -> tuple[list[RuntimeOutput], list[AlignmentNote]]:
    """Merge runtime outputs whose handles share an id into one output per merged handle.

    Outputs are taken in order. Each one absorbs every already-merged handle it overlaps:
    ids of an older instruction come first in the merged handle, ids of a newer one after.
    The data kept is the incoming output's unless an overlapping one has an instruction id at
    least as large, in which case the *last* such overlapping output's data is kept. That is
    the reference's rule; it can keep data that is not the latest instruction's when several
    newer handles are absorbed at once, and each such case gets a
    :attr:`NoteKind.MERGED_VALUE_NOT_LATEST` note.

    Returns:
        The merged outputs (handles pairwise disjoint) and the notes.

    Example:
        >>> outs = [RuntimeOutput((1, 2, 3), 1, "a", "v1"), RuntimeOutput((2, 3, 4, 5), 2, "b", "v2")]
        >>> merged, notes = merge_overlapping_outputs(outs)
        >>> [(m.handle, m.data) for m in merged]
        [((1, 2, 3, 4, 5), 'v2')]
    """
    merged: dict[DebugHandle, RuntimeOutput] = {}
    notes: list[AlignmentNote] = []
    for incoming in outputs:
        handle = incoming.handle
        kept = incoming
        overlapping = [existing for existing in merged if not set(existing).isdisjoint(incoming.handle)]
        newest = _id(incoming)
        for existing_handle in overlapping:
            existing = merged.pop(existing_handle)
            newest = max(newest, _id(existing))
            if _id(existing) < _id(incoming):
                handle = _merge_handles(existing_handle, handle)
            else:
                handle = _merge_handles(handle, existing_handle)
                kept = existing
        if _id(kept) < newest:
            notes.append(
                AlignmentNote(
                    NoteKind.MERGED_VALUE_NOT_LATEST,
                    f"kept instruction {_id(kept)}'s data although instruction {newest} overlaps",
                    runtime_handle=handle,
                )
            )
        merged[handle] = replace(kept, handle=handle)
    return list(merged.values()), notes


def merge_runtime_overlapping_debug_handles(
    runtime_intermediate_outputs: Mapping[DebugHandle, tuple[int, Any, int]],
) -> dict[DebugHandle, tuple[int, Any, int]]:
    """Drop-in for the reference function of that name: merge overlapping runtime handles.

    Args:
        runtime_intermediate_outputs: ``{handle: (instruction_id, debug_data, num_outputs)}``.

    Returns:
        The same shape of dict, with overlapping handles merged (see
        :func:`merge_overlapping_outputs` for the rule).

    Example:
        >>> merge_runtime_overlapping_debug_handles({(9,): (1, "a", 1), (9, 9): (3, "b", 1)})
        {(9,): (3, 'b', 1)}
    """
    outputs = [
        RuntimeOutput(handle, instruction_id, None, data, num_outputs)
        for handle, (instruction_id, data, num_outputs) in runtime_intermediate_outputs.items()
    ]
    merged, _ = merge_overlapping_outputs(outputs)
    return {
        output.handle: (_id(output), output.data, output.num_outputs) for output in merged
    }
