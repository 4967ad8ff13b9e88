"""Pair the runtime's logged intermediate outputs with the reference graph's, by debug handle.

Stages, in order::

    events ──collect_runtime_outputs──▶ {handle: RuntimeOutput}   (largest instruction id wins,
                                                                   overlapping handles merged)
    AOT outputs + runtime outputs ──pair_outputs──────────▶ AlignmentReport   (reference pairs)
                                  └─align_intermediate_outputs─▶ AlignmentReport   (numdiff: also
                                                                   multi-output ops, element-wise)

A multi-output delegate call's outputs are paired with the graph nodes that produce them
(:func:`delegate_output_ids`, passed as ``delegate_outputs=``), not by the reference's rule. A
delegate call whose lowered module declares scratch buffers (export schema 5.5) logs them after
its outputs; :func:`drop_scratch` removes them before pairing (:func:`partition_scratch` reads
them from the graph).

Every skipped pair and every guessed match is a typed :class:`AlignmentNote` on the report; the
drop-in functions (:func:`map_runtime_aot_intermediate_outputs`,
:func:`merge_runtime_overlapping_debug_handles`) return the reference's dicts and summarise the
notes in one warning.
"""

from __future__ import annotations

from numdiff.align._records import (
    AlignedPair,
    AlignmentNote,
    AlignmentReport,
    MatchKind,
    NoteKind,
    RuntimeOutput,
    ShapeRelation,
    is_sequence,
    shape_relation,
)
from numdiff.align.delegate_outputs import delegate_output_ids, partition_output_ids
from numdiff.align.delegate_scratch import PartitionScratch, drop_scratch, partition_scratch
from numdiff.align.pairing import (
    align_intermediate_outputs,
    OpNameIndex,
    find_op_names,
    map_runtime_aot_intermediate_outputs,
    pair_outputs,
)
from numdiff.align.runtime import (
    EventLike,
    collect_runtime_outputs,
    merge_overlapping_outputs,
    merge_runtime_overlapping_debug_handles,
    own_delegate_ids,
)

__all__ = [
    "AlignedPair",
    "AlignmentNote",
    "AlignmentReport",
    "EventLike",
    "MatchKind",
    "NoteKind",
    "PartitionScratch",
    "RuntimeOutput",
    "ShapeRelation",
    "align_intermediate_outputs",
    "collect_runtime_outputs",
    "delegate_output_ids",
    "drop_scratch",
    "OpNameIndex",
    "find_op_names",
    "is_sequence",
    "map_runtime_aot_intermediate_outputs",
    "merge_overlapping_outputs",
    "merge_runtime_overlapping_debug_handles",
    "own_delegate_ids",
    "pair_outputs",
    "partition_output_ids",
    "partition_scratch",
    "shape_relation",
]
