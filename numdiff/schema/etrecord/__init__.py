"""Read an ETRecord (the zip ExecuTorch writes next to a model) without ExecuTorch.

The ETRecord holds the model's programs at several stages and the maps that tie runtime events
back to graph nodes. :func:`parse_etrecord` returns an :class:`ETRecord` whose attributes hold the
same values the reference's ``executorch.devtools.etrecord.parse_etrecord`` gives, so code written
for the reference's Inspector keeps working:

=================================  ==========================================================
attribute                          from entry
=================================  ==========================================================
``exported_program``               ``exported_program`` (+ ``_state_dict``, ``_constants``,
                                   ``_example_inputs`` companions), the ATen program
``edge_dialect_program``           ``edge_dialect_exported_program/<method>``: one program, or a
                                   dict by method when there are several (0.7 and 1.0: the plain
                                   ``edge_dialect_exported_program``; 0.7 writes no ATen program)
``graph_map``                      every other program entry, by entry name (``"name/forward"``)
``export_graph_id``                ``export_graph_id`` (0 when absent)
``_debug_handle_map``              ``debug_handle_map``: ``{method: {str(instruction): handles}}``
``_delegate_map``                  ``delegate_map``
``_instruction_id_to_num_outs_map``  ``instruction_id_to_num_outs_map``
``_reference_outputs``             ``reference_outputs`` (``torch.save``\\ d; ``pickle.dumps`` in 1.0.x
                                   and 0.7; tensors only)
``_representative_inputs``         ``representative_inputs`` (the same; 0.7's one run of inputs is
                                   held as later releases hold them, ``[tuple]``)
=================================  ==========================================================

Programs are real, runnable ``torch.export.ExportedProgram`` objects. Every operator node carries
``debug_handle`` (when the file has one), ``from_node`` (``torch.fx.traceback.NodeSource`` list),
``stack_trace``, ``nn_module_stack`` and ``numdiff_op_type`` (see :func:`op_type_name`); nodes
that cannot run also carry ``numdiff_unrunnable`` (the reason).

Differences from the reference, all on purpose: the zip is closed after reading; entries numdiff
does not recognise are listed in :attr:`ETRecord.unknown_entries` (with a warning) instead of being
loaded as programs; pickled entries load only with ``torch.load(weights_only=True)`` (1.0.x's
``pickle.dumps`` entries with numdiff's own restricted unpickler, which admits the same); every failure
is an :class:`~numdiff.errors.ETRecordError` naming the file and the entry.

The file is untrusted: every size, count and nesting depth in it is checked against
:mod:`numdiff.limits` (raise them with ``NUMDIFF_MAX_*`` environment variables or
:func:`numdiff.use_limits` for genuinely huge models), the JSON maps are validated field by field,
and program graphs and pickled tensors are checked before their first use
(:meth:`ETRecord.check_programs` checks every program at once).
"""

from __future__ import annotations

from numdiff.schema.etrecord.container import ENTRIES, ETRecord, ETRecordEntry, edge_methods, op_type_name, parse_etrecord

__all__ = ["ENTRIES", "ETRecord", "ETRecordEntry", "edge_methods", "op_type_name", "parse_etrecord"]
