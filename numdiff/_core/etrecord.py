"""What numdiff reads from an ETRecord: a Protocol both numdiff's and ExecuTorch's records satisfy.

``Inspector(etrecord=...)`` takes a path, numdiff's :class:`~numdiff.schema.etrecord.ETRecord`, or the
reference's ``executorch.devtools.etrecord.ETRecord`` (drop-in). Code past the Inspector reads the
record through this Protocol only, so it never depends on which of them it holds. The underscored
attributes are the reference's own names, kept for that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["ETRecordLike"]


@runtime_checkable
class ETRecordLike(Protocol):
    """The attributes of an ETRecord that numdiff reads (names and meanings as in ExecuTorch 1.5.1).

    Attributes:
        exported_program: The ATen program from ``torch.export``, or None.
        export_graph_id: Id of the exported graph (``from_node`` provenance).
        edge_dialect_program: The Edge program, or a dict of them by method name, or None.
        graph_map: Other recorded programs by entry name.
        _debug_handle_map: ``{method: {str(instruction_id): handle or [handles]}}``, or None.
        _delegate_map: ``{method: {str(instruction_id): {"name": backend, "delegate_map": {...}}}}``, or None.
        _instruction_id_to_num_outs_map: ``{method: {str(instruction_id): count}}``, or None.
        _reference_outputs: ``{method: [outputs per run]}``, or None.
        _representative_inputs: The inputs the model was exported or calibrated with, or None.
    """

    exported_program: ExportedProgram | None
    export_graph_id: int
    edge_dialect_program: ExportedProgram | dict[str, ExportedProgram] | None
    graph_map: dict[str, ExportedProgram] | None
    _debug_handle_map: dict[str, dict[str, Any]] | None
    _delegate_map: dict[str, dict[str, Any]] | None
    _instruction_id_to_num_outs_map: dict[str, dict[str, Any]] | None
    _reference_outputs: dict[str, list[Any]] | None
    _representative_inputs: list[Any] | None
