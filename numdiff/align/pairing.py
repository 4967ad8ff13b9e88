"""Pair the reference graph's intermediate outputs with the runtime's, by debug handle.

Two entry points share one pairing core:

* :func:`pair_outputs` / :func:`map_runtime_aot_intermediate_outputs` give the reference's pairs
  (the drop-in answer), plus a note for everything the reference skips silently or crashes on.
* :func:`align_intermediate_outputs` is numdiff's fuller alignment: it also splits multi-output
  AOT ops (sequences) into one pair per element, matched by position or by shape and dtype.

How pairs are found: AOT outputs and (merged) runtime outputs whose handles share an id form a
connected group. A group with exactly one runtime output pairs the ``k``-th output of that
runtime instruction (``k`` counted from the end) with the AOT output whose handle is the
``k``-th id from the end of the runtime handle. The pair is reported under the runtime handle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from numdiff._core.types import DebugHandle
from numdiff.align._records import (
    AlignedPair,
    AlignmentNote,
    AlignmentReport,
    MatchKind,
    NoteKind,
    RuntimeOutput,
    is_sequence,
)
from numdiff.align.delegate_outputs import DELEGATE_CALL

__all__ = [
    "align_intermediate_outputs",
    "OpNameIndex",
    "find_op_names",
    "map_runtime_aot_intermediate_outputs",
    "pair_outputs",
]


def _groups(aot_handles: list[DebugHandle], runtime_handles: list[DebugHandle]) -> list[tuple[list[int], list[int]]]:
    """Connected groups of AOT and runtime handles linked by a shared id (AOT-runtime links only).

    Returns ``(aot_indices, runtime_indices)`` per group, ordered by the group's first index
    (AOT indices come first), which is the order the reference visits them in.
    """
    n_aot = len(aot_handles)
    parent = list(range(n_aot + len(runtime_handles)))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    aot_by_id: dict[int, list[int]] = {}
    for index, handle in enumerate(aot_handles):
        for item in set(handle):
            aot_by_id.setdefault(item, []).append(index)
    for r_index, handle in enumerate(runtime_handles):
        for item in set(handle):
            for a_index in aot_by_id.get(item, ()):
                parent[find(a_index)] = find(n_aot + r_index)

    members: dict[int, tuple[list[int], list[int]]] = {}
    for node in range(len(parent)):
        aot_ids, runtime_ids = members.setdefault(find(node), ([], []))
        if node < n_aot:
            aot_ids.append(node)
        else:
            runtime_ids.append(node - n_aot)
    return list(members.values())


def _pick_by_shape_and_dtype(
    aot: torch.Tensor, candidates: list[Any]
) -> tuple[int, MatchKind, str | None]:
    """Index of the runtime value matching ``aot``, how it was chosen, and why if it is a fallback."""
    same_shape = [
        i for i, value in enumerate(candidates) if isinstance(value, torch.Tensor) and value.shape == aot.shape
    ]
    if len(same_shape) == 1:
        return same_shape[0], MatchKind.SHAPE, None
    if len(same_shape) > 1:
        same_dtype = [i for i in same_shape if candidates[i].dtype == aot.dtype]
        if len(same_dtype) == 1:
            return same_dtype[0], MatchKind.SHAPE_DTYPE, None
        reason = (
            f"{len(same_shape)} of {len(candidates)} runtime values have shape {tuple(aot.shape)} "
            f"and {len(same_dtype)} of those dtype {aot.dtype}"
        )
    else:
        reason = f"none of {len(candidates)} runtime values has shape {tuple(aot.shape)}"
    return len(candidates) - 1, MatchKind.FALLBACK_LAST, reason + "; took the last one"


def _expand_sequence(
    handle: DebugHandle, aot: tuple[Any, ...], runtime: list[Any], index: int, notes: list[AlignmentNote]
) -> list[AlignedPair]:
    """numdiff's element-wise pairs for an AOT sequence output.

    With fewer runtime values than elements, an element is paired with the one runtime value of
    its shape and dtype, and only when no other element has that shape and dtype: an op the
    lowering splits into one instruction per element (``unbind`` into ``squeeze_copy`` calls) logs
    only its last instruction's value under the handle, and elements of one shape cannot tell
    which of them that value is.

    Example:
        >>> import torch
        >>> notes = []
        >>> q, k = torch.zeros(2, 3), torch.ones(2, 3)
        >>> _expand_sequence((11,), (q, k), [torch.ones(2, 3)], 0, notes), [n.kind.value for n in notes]
        ([], ['element_unmatched', 'element_unmatched'])
    """
    if len(aot) == len(runtime):
        return [
            AlignedPair(handle, a, handle, r, MatchKind.ELEMENT_POSITION, index, k)
            for k, (a, r) in enumerate(zip(aot, runtime, strict=True))
        ]
    found = [
        [
            j
            for j, r in enumerate(runtime)
            if isinstance(element, torch.Tensor)
            and isinstance(r, torch.Tensor)
            and r.shape == element.shape
            and r.dtype == element.dtype
        ]
        for element in aot
    ]
    claims = [sum(j in f for f in found) for j in range(len(runtime))]
    pairs = []
    for k, element in enumerate(aot):
        if len(found[k]) == 1 and claims[found[k][0]] == 1:
            pairs.append(
                AlignedPair(handle, element, handle, runtime[found[k][0]], MatchKind.ELEMENT_SHAPE_DTYPE, index, k)
            )
        else:
            shared = f"; {max(claims[j] for j in found[k])} elements have its shape and dtype" if found[k] else ""
            notes.append(
                AlignmentNote(
                    NoteKind.ELEMENT_UNMATCHED,
                    f"AOT element {k} of {len(aot)} matches {len(found[k])} of {len(runtime)} runtime "
                    f"values by shape and dtype{shared}",
                    aot_handle=handle,
                    runtime_handle=handle,
                )
            )
    return pairs


def _pair_one(
    aot_by_handle: Mapping[DebugHandle, Any],
    runtime: RuntimeOutput,
    index: int,
    expand: bool,
    notes: list[AlignmentNote],
    output_ids: tuple[int, ...] | None = None,
) -> list[AlignedPair]:
    """Pairs for the ``index``-th output (from the end) of one runtime instruction.

    ``output_ids`` (a multi-output delegate call's output handle ids, in output order) picks the
    AOT output by the delegate's own output order instead of the runtime handle's order.
    """
    handle, data = runtime.handle, runtime.data
    position = -(index + 1)

    def note(kind: NoteKind, detail: str) -> list[AlignedPair]:
        notes.append(AlignmentNote(kind, detail, aot_handle=handle, runtime_handle=handle))
        return []

    ids = handle if output_ids is None else output_ids
    if index >= len(ids):
        return note(
            NoteKind.RUNTIME_TOO_SHORT,
            f"output {index} of {runtime.num_outputs} has no id in runtime handle {handle}",
        )
    key = (ids[position],)
    if key not in aot_by_handle:
        return note(NoteKind.AOT_OUTPUT_MISSING, f"no AOT output for handle {key} (output {index})")
    aot = aot_by_handle[key]
    if is_sequence(data) and len(data) == 0:
        return note(NoteKind.NO_RUNTIME_DATA, f"the runtime logged no values for output {index}")
    if output_ids is not None and is_sequence(data) and not is_sequence(aot):
        if index >= len(data):
            return note(NoteKind.RUNTIME_TOO_SHORT, f"runtime logged {len(data)} values, needs output {index}")
        return [AlignedPair(key, aot, handle, data[position], MatchKind.DELEGATE_OUTPUT, index)]

    if is_sequence(aot):
        if not is_sequence(data):
            if expand:
                return _expand_sequence(handle, tuple(aot), [data], index, notes)
            return note(NoteKind.RUNTIME_NOT_SEQUENCE, f"AOT output is a sequence, runtime logged {type(data).__name__}")
        if index >= len(data):
            return note(NoteKind.RUNTIME_TOO_SHORT, f"runtime logged {len(data)} values, needs output {index}")
        last = data[position]
        if isinstance(last, list) and all(isinstance(t, torch.Tensor) for t in last):
            chosen = last
        elif isinstance(last, torch.Tensor):
            chosen = data
        else:
            return note(
                NoteKind.RUNTIME_NOT_SEQUENCE,
                f"runtime value at position {position} is {type(last).__name__}, not a tensor or list of tensors",
            )
        if expand:
            return _expand_sequence(handle, tuple(aot), list(chosen), index, notes)
        return [AlignedPair(handle, tuple(aot), handle, tuple(chosen), MatchKind.SEQUENCE, index)]

    if not is_sequence(data):
        return [AlignedPair(handle, aot, handle, data, MatchKind.DIRECT, index)]
    if index >= len(data):
        return note(NoteKind.RUNTIME_TOO_SHORT, f"runtime logged {len(data)} values, needs output {index}")
    if runtime.num_outputs == 1 and len(data) > 1 and isinstance(aot, torch.Tensor):
        chosen_index, kind, fallback_reason = _pick_by_shape_and_dtype(aot, list(data))
        if fallback_reason is not None:
            note(NoteKind.FALLBACK_MATCH, fallback_reason)
        return [AlignedPair(handle, aot, handle, data[chosen_index], kind, index)]
    kind = MatchKind.SOLE if len(data) == 1 else MatchKind.POSITION
    return [AlignedPair(handle, aot, handle, data[position], kind, index)]


def _order_by_shape(
    output_ids: tuple[int, ...], aot_by_handle: Mapping[DebugHandle, Any], data: Any
) -> tuple[int, ...] | None:
    """A multi-output delegate call's output ids in the order its logged outputs' shapes show, or
    None when the graph's order already fits them (or the shapes cannot tell).

    The graph tells which nodes are the partition's outputs, not the order the lowered module
    returns them in: lowering cuts partitions out one at a time and re-sorts the graph in between,
    so a later partition's nodes (and outputs) may come in another topological order. When the
    logged shapes are those of the outputs in another order, each logged output takes the output
    of its shape; outputs of one shape keep the graph's order (the shapes cannot tell them apart).

    Example:
        >>> import torch
        >>> aot = {(6,): torch.zeros(1, 8, 16), (9,): torch.zeros(2, 8), (19,): torch.zeros(2, 8, 8)}
        >>> _order_by_shape((6, 9, 19), aot, [torch.zeros(3), torch.zeros(2, 8, 8), torch.zeros(1, 8, 16),
        ...                                   torch.zeros(2, 8)])
        (19, 6, 9)
    """
    if not is_sequence(data) or len(data) < len(output_ids):
        return None
    logged = list(data)[len(data) - len(output_ids):]
    values = [*logged, *(aot_by_handle.get((i,)) for i in output_ids)]
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if len(tensors) != len(values):
        return None
    logged_shapes = [tuple(v.shape) for v in tensors[: len(logged)]]
    shapes = [tuple(v.shape) for v in tensors[len(logged) :]]
    if shapes == logged_shapes or sorted(shapes) != sorted(logged_shapes):
        return None
    of_shape: dict[tuple[int, ...], list[int]] = {}
    for item, shape in zip(output_ids, shapes, strict=True):
        of_shape.setdefault(shape, []).append(item)
    return tuple(of_shape[shape].pop(0) for shape in logged_shapes)


def _pair(
    aot_intermediate_outputs: Mapping[DebugHandle, Any],
    runtime_outputs: Mapping[DebugHandle, RuntimeOutput],
    expand: bool,
    delegate_outputs: Mapping[DebugHandle, tuple[int, ...]] | None = None,
) -> AlignmentReport:
    aot_handles = list(aot_intermediate_outputs)
    runtimes = list(runtime_outputs.values())
    pairs: list[AlignedPair] = []
    notes: list[AlignmentNote] = []
    for aot_indices, runtime_indices in _groups(aot_handles, [r.handle for r in runtimes]):
        if not runtime_indices:
            continue
        if not aot_indices:
            lone = runtimes[runtime_indices[0]]
            notes.append(
                AlignmentNote(
                    NoteKind.NO_AOT_OUTPUT,
                    f"runtime output of {lone.op_name or 'an event'} has no AOT output with a shared handle id",
                    runtime_handle=lone.handle,
                )
            )
            continue
        if len(runtime_indices) != 1:
            notes.append(
                AlignmentNote(
                    NoteKind.AMBIGUOUS_COMPONENT,
                    f"AOT handles {[aot_handles[i] for i in aot_indices]} overlap "
                    f"{len(runtime_indices)} runtime handles {[runtimes[i].handle for i in runtime_indices]}",
                )
            )
            continue
        runtime = runtimes[runtime_indices[0]]
        aot_by_handle = {aot_handles[i]: aot_intermediate_outputs[aot_handles[i]] for i in aot_indices}
        if not {handle[0] for handle in aot_by_handle} <= set(runtime.handle):
            notes.append(
                AlignmentNote(
                    NoteKind.HANDLES_NOT_SUBSET,
                    f"AOT handles {list(aot_by_handle)} are not all inside runtime handle {runtime.handle}",
                    runtime_handle=runtime.handle,
                )
            )
            continue
        # Outputs past the handle's length have no id to pair with: one note for all of them, so
        # a huge count (from a hostile file) costs nothing.
        output_ids = None if delegate_outputs is None else delegate_outputs.get(runtime.handle)
        if (delegate_outputs is not None and output_ids is None and runtime.num_outputs > 1
                and runtime.op_name == DELEGATE_CALL):
            notes.append(
                AlignmentNote(
                    NoteKind.DELEGATE_ORDER_UNKNOWN,
                    f"the graph does not show which node gives each of the {runtime.num_outputs} outputs "
                    f"of this delegate call; paired by position from the end of its handle",
                    runtime_handle=runtime.handle,
                )
            )
        if output_ids is not None:
            by_shape = _order_by_shape(output_ids, aot_by_handle, runtime.data)
            if by_shape is not None:
                notes.append(
                    AlignmentNote(
                        NoteKind.DELEGATE_ORDER_BY_SHAPE,
                        f"the {len(output_ids)} outputs of this delegate call have the shapes of its partition's "
                        f"outputs in another order than the graph's; paired by shape (handles "
                        f"{list(output_ids)} -> {list(by_shape)})",
                        runtime_handle=runtime.handle,
                    )
                )
                output_ids = by_shape
        paired = min(runtime.num_outputs, len(runtime.handle))
        for index in range(paired):
            pairs.extend(_pair_one(aot_by_handle, runtime, index, expand, notes, output_ids))
        if runtime.num_outputs > paired:
            notes.append(
                AlignmentNote(
                    NoteKind.RUNTIME_TOO_SHORT,
                    f"outputs {paired}..{runtime.num_outputs - 1} of {runtime.num_outputs} have no id in "
                    f"runtime handle {runtime.handle}",
                    aot_handle=runtime.handle,
                    runtime_handle=runtime.handle,
                )
            )
    return AlignmentReport(tuple(pairs), tuple(notes))


def pair_outputs(
    aot_intermediate_outputs: Mapping[DebugHandle, Any],
    runtime_outputs: Mapping[DebugHandle, RuntimeOutput],
    *,
    delegate_outputs: Mapping[DebugHandle, tuple[int, ...]] | None = None,
) -> AlignmentReport:
    """The reference's pairs, as typed records, with a note for everything skipped or guessed.

    Where the reference raises (several runtime handles in one group, fewer runtime values
    than outputs, a sequence meeting a single value), the pair is skipped with a note instead.

    Args:
        aot_intermediate_outputs: ``{handle: output}`` captured from the reference graph.
        runtime_outputs: ``{handle: RuntimeOutput}`` from :func:`collect_runtime_outputs`.
        delegate_outputs: ``{runtime handle: output handle ids}`` of multi-output delegate calls
            (:func:`~numdiff.align.delegate_output_ids`). When given, each output of such a call
            is paired with the node that produces it and reported under that node's handle
            (:attr:`MatchKind.DELEGATE_OUTPUT`), not by the reference's position rule; a
            multi-output delegate call missing from it gets a
            :attr:`NoteKind.DELEGATE_ORDER_UNKNOWN` note. Defaults to None (the reference's rule).

    Returns:
        The report; it does not warn (call :meth:`AlignmentReport.warn`).

    Example:
        >>> report = pair_outputs({(0,): 100, (1,): 200}, {(0, 1): RuntimeOutput((0, 1), 5, "d", 150)})
        >>> [(p.aot_handle, p.aot_output, p.runtime_output, p.match.value) for p in report.pairs]
        [((0, 1), 200, 150, 'direct')]
    """
    return _pair(aot_intermediate_outputs, runtime_outputs, expand=False, delegate_outputs=delegate_outputs)


def align_intermediate_outputs(
    aot_intermediate_outputs: Mapping[DebugHandle, Any],
    runtime_outputs: Mapping[DebugHandle, RuntimeOutput],
    *,
    delegate_outputs: Mapping[DebugHandle, tuple[int, ...]] | None = None,
) -> AlignmentReport:
    """numdiff's fuller alignment: like :func:`pair_outputs`, with sequences split element-wise.

    An AOT sequence output (max_pool2d with indices, topk, var_mean, split...) becomes one pair
    per element: by position when the runtime logged as many values, otherwise with the only
    runtime value of the element's shape and dtype; an element with no unique match gets a
    :attr:`NoteKind.ELEMENT_UNMATCHED` note. Each pair records how it was matched
    (:attr:`AlignedPair.match`) and how the shapes relate (:attr:`AlignedPair.shape_relation`).
    ``delegate_outputs`` is as for :func:`pair_outputs`.

    Example:
        >>> import torch
        >>> values, indices = torch.ones(2), torch.zeros(2, dtype=torch.long)
        >>> runtime = {(3,): RuntimeOutput((3,), 1, "max", [values + 1, indices])}
        >>> report = align_intermediate_outputs({(3,): (values, indices)}, runtime)
        >>> [(p.element_index, p.match.value) for p in report.pairs]
        [(0, 'element_position'), (1, 'element_position')]
    """
    return _pair(aot_intermediate_outputs, runtime_outputs, expand=True, delegate_outputs=delegate_outputs)


def map_runtime_aot_intermediate_outputs(
    aot_intermediate_outputs: Mapping[DebugHandle, Any],
    runtime_intermediate_outputs: Mapping[DebugHandle, tuple[Any, int]],
) -> dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]:
    """Drop-in for the reference function of that name.

    Args:
        aot_intermediate_outputs: ``{handle: output}`` captured from the reference graph.
        runtime_intermediate_outputs: ``{handle: (debug_data, num_outputs)}``.

    Returns:
        ``{(handle, aot_output): (runtime_handle, runtime_output)}``, the reference's mapping.
        Skipped pairs and fallback matches are summarised in one warning.

    Example:
        >>> map_runtime_aot_intermediate_outputs({(2,): 100, (9,): 300}, {(2, 3): (200, 1), (8, 9): (300, 1)})
        {((8, 9), 300): ((8, 9), 300)}
    """
    runtime = {
        handle: RuntimeOutput(handle, None, None, data, num_outputs)
        for handle, (data, num_outputs) in runtime_intermediate_outputs.items()
    }
    report = pair_outputs(aot_intermediate_outputs, runtime)
    report.warn("pairing runtime and AOT intermediate outputs")
    return report.to_reference_mapping()


def find_op_names(target: DebugHandle, op_names_by_handle: Mapping[DebugHandle, list[str]]) -> list[str]:
    """Op names of every handle whose ids all lie inside ``target``, in mapping order.

    Example:
        >>> find_op_names((1, 2), {(1,): ["add"], (2,): ["mul", "relu"], (3,): ["sub"]})
        ['add', 'mul', 'relu']
    """
    if isinstance(op_names_by_handle, OpNameIndex):
        return op_names_by_handle.find(target)
    ids = set(target)
    return [name for handle, names in op_names_by_handle.items() if set(handle) <= ids for name in names]


class OpNameIndex(Mapping[DebugHandle, list[str]]):
    """A read-only view of ``{handle: op names}`` that :func:`find_op_names` answers from an index.

    :func:`find_op_names` scans every handle for each target, so naming every row of a table is
    quadratic in the number of handles; over this view it looks only at the handles sharing an id
    with the target. Same answers, in the same order. The mapping must not change while in use.

    Example:
        >>> find_op_names((1, 2), OpNameIndex({(1,): ["add"], (2,): ["mul", "relu"], (3,): ["sub"]}))
        ['add', 'mul', 'relu']
    """

    def __init__(self, op_names_by_handle: Mapping[DebugHandle, list[str]]) -> None:
        self._names = op_names_by_handle
        self._position = {handle: i for i, handle in enumerate(op_names_by_handle)}
        self._by_id: dict[int, list[DebugHandle]] = {}
        self._empty = [handle for handle in op_names_by_handle if not handle]
        for handle in op_names_by_handle:
            for i in set(handle):
                self._by_id.setdefault(i, []).append(handle)

    def __getitem__(self, handle: DebugHandle) -> list[str]:
        return self._names[handle]

    def __iter__(self) -> Iterator[DebugHandle]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def find(self, target: DebugHandle) -> list[str]:
        """:func:`find_op_names` of ``target``."""
        ids = set(target)
        found = {handle for i in ids for handle in self._by_id.get(i, ()) if set(handle) <= ids}
        found.update(self._empty)
        return [name for handle in sorted(found, key=self._position.__getitem__) for name in self._names[handle]]
