"""Choose the graph whose intermediate outputs are the "expected" side of the numerical gap.

The rules are the reference's (``Inspector.calculate_numeric_gap(reference_graph=...)``):

* ``None`` (the default): the ATen ``exported_program`` when the ETRecord has one and debug-handle
  back-propagation to it succeeds, otherwise the Edge program, with a logged warning.
* ``"exported_program"``: the ATen program; a :class:`~numdiff.errors.UsageError` explaining the
  opt-out (``disable_debug_handle_validation``) when back-propagation fails.
* ``"edge_dialect_exported_program"``: the Edge program.
* any other name: a program of the ETRecord's ``graph_map``; ``"/forward"`` is appended when the
  name has no ``"/"``. An unknown name is a :class:`~numdiff.errors.UsageError` listing the
  available ones.

Back-propagation writes ``debug_handle`` into the ATen program's node meta in place (see
:mod:`numdiff.capture.handles`); the graph module returned is always a fresh
``ExportedProgram.module()``, so running it never touches the ETRecord's programs.

Example:
    >>> import torch
    >>> from types import SimpleNamespace
    >>> ep = torch.export.export(torch.nn.ReLU(), (torch.ones(1),))
    >>> etrecord = SimpleNamespace(exported_program=None, export_graph_id=None,
    ...                            edge_dialect_program=ep, graph_map={"extra/forward": ep})
    >>> resolve_reference_graph(etrecord, "extra")[1]
    'extra/forward'
"""

from __future__ import annotations

import logging
from typing import Protocol

import torch
from torch.export import ExportedProgram

from numdiff.capture.handles import plan_debug_handle_propagation
from numdiff.capture.nodes import UNSET_DEBUG_HANDLE
from numdiff.errors import CaptureError, InternalError, MissingDataError, UsageError

__all__ = [
    "EDGE_DIALECT_GRAPH",
    "EXPORTED_PROGRAM_GRAPH",
    "ETRecordPrograms",
    "resolve_reference_graph",
    "runnable_graph",
]

_log = logging.getLogger(__name__)

#: Name of the ATen program as a reference graph.
EXPORTED_PROGRAM_GRAPH = "exported_program"
#: Name of the Edge program as a reference graph.
EDGE_DIALECT_GRAPH = "edge_dialect_exported_program"

_OPT_OUT_HINT = (
    "Pass disable_debug_handle_validation=True (drop-in spelling: disable_debug_handle_valdiation=True) "
    "to use the ATen graph anyway, or reference_graph='edge_dialect_exported_program'."
)


class ETRecordPrograms(Protocol):
    """What :func:`resolve_reference_graph` reads from an ETRecord (numdiff's or the reference's)."""

    @property
    def exported_program(self) -> ExportedProgram | None: ...

    @property
    def export_graph_id(self) -> int | None: ...

    @property
    def edge_dialect_program(self) -> ExportedProgram | dict[str, ExportedProgram] | None: ...

    @property
    def graph_map(self) -> dict[str, ExportedProgram] | None: ...


def resolve_reference_graph(
    etrecord: ETRecordPrograms,
    reference_graph: str | None = None,
    disable_debug_handle_validation: bool = False,
) -> tuple[torch.fx.GraphModule, str]:
    """Pick the reference graph by name and return it as a runnable graph module.

    Args:
        etrecord: An object with ``exported_program``, ``export_graph_id``,
            ``edge_dialect_program`` and ``graph_map`` (numdiff's parsed ETRecord).
        reference_graph: ``None``, ``"exported_program"``, ``"edge_dialect_exported_program"``
            or a ``graph_map`` name (see the module docstring). Defaults to ``None``.
        disable_debug_handle_validation: Apply back-propagated handles to the ATen graph even when
            some Edge handles have no ATen counterpart. Defaults to ``False``.

    Returns:
        ``(graph_module, name)``: ``program.module()`` and the name of the graph used — for a
        ``graph_map`` graph, its full key (``"name/forward"``), where the reference returns the
        name as given (it only shows in a warning text).

    Raises:
        UsageError: ``"exported_program"`` was asked for and back-propagation failed, or the name
            is unknown.
        MissingDataError: The ETRecord lacks the program the name needs.
        CaptureError: The program could not be turned into a runnable graph module.

    Example:
        >>> import torch
        >>> from types import SimpleNamespace
        >>> ep = torch.export.export(torch.nn.ReLU(), (torch.ones(1),))
        >>> etrecord = SimpleNamespace(exported_program=None, export_graph_id=None,
        ...                            edge_dialect_program=ep, graph_map=None)
        >>> resolve_reference_graph(etrecord, "nope")
        Traceback (most recent call last):
        ...
        numdiff.errors.UsageError: reference graph 'nope/forward' not found in the ETRecord
        Choose 'exported_program', 'edge_dialect_exported_program' or a graph_map name (this ETRecord has none)
    """
    name = reference_graph
    if reference_graph is None or reference_graph == EXPORTED_PROGRAM_GRAPH:
        module, failure = _direct_aten(etrecord, disable_debug_handle_validation)
        if module is not None:
            _log.info("Using 'exported_program' (ATen dialect) as reference graph")
            return module, EXPORTED_PROGRAM_GRAPH
        if failure is None:
            failure = _back_propagate(etrecord, disable_debug_handle_validation)
        if failure is None:
            name = EXPORTED_PROGRAM_GRAPH
        elif reference_graph is None:
            # The opt-out names the ATen graph: only true when the ETRecord has one (ExecuTorch 0.7's hold
            # the Edge program alone).
            hint = _OPT_OUT_HINT if etrecord.exported_program is not None else (
                "The ETRecord holds no ATen program (ExecuTorch 0.7 wrote the Edge program alone): the Edge "
                "program is the reference graph.")
            _log.warning(  # the reference's sentence first (users grep logs for it), then the details
                "Either ATen dialect exported program is not in ETRecord, or debug handle backpropagation "
                "failed. Falling back to 'edge_dialect_exported_program'.\nWhy: %s\n%s",
                failure,
                hint,
            )
            name = EDGE_DIALECT_GRAPH
        elif etrecord.exported_program is None or _edge_program(etrecord) is None:
            raise MissingDataError(
                f"Cannot use 'exported_program': {failure}\n"
                "Generate the ETRecord with the exported (ATen) program and the Edge program."
            )
        else:
            raise UsageError(f"Cannot use 'exported_program': {failure}\n{_OPT_OUT_HINT}")

    if name == EXPORTED_PROGRAM_GRAPH:
        program = etrecord.exported_program
        _log.info("Using 'exported_program' (ATen dialect) as reference graph")
    elif name == EDGE_DIALECT_GRAPH:
        program = _edge_program(etrecord)
        if program is None:
            raise MissingDataError(
                "the ETRecord has no Edge program ('edge_dialect_exported_program')\n"
                "Generate the ETRecord from the EdgeProgramManager (generate_etrecord=True)."
            )
        _log.info("Using 'edge_dialect_exported_program' (Edge dialect) as reference graph")
    else:
        name, program = _from_graph_map(etrecord, str(name))
        _log.info("Using %r from graph_map as reference graph", name)
    if program is None:
        raise InternalError(f"reference graph {name!r} resolved to no program\nThis is a bug in numdiff: please report it.")
    return runnable_graph(program, name), name


def _direct_aten(etrecord: ETRecordPrograms, disable_validation: bool) -> tuple[torch.fx.GraphModule | None, str | None]:
    """The ATen graph built from the ETRecord's JSON, handles back-propagated from the Edge JSON.

    Returns ``(module, None)`` on success, ``(None, why)`` when back-propagation failed
    validation, and ``(None, None)`` when this route does not apply (then the programs are loaded
    with torch's deserializer). The handles are also left on the ETRecord's ATen program for
    whoever reads it later, as the reference leaves them.
    """
    from numdiff.capture._aten_builder import build_aten_graph_module
    from numdiff.program.graph_meta import ProgramLoadError, provenance_from_json

    program_source = getattr(etrecord, "program_source", None)
    edge_provenance = getattr(etrecord, "edge_provenance", None)
    source = program_source(EXPORTED_PROGRAM_GRAPH) if program_source is not None else None
    edge = edge_provenance() if edge_provenance is not None else None
    if source is None or edge is None:
        return None, None
    try:
        aten = provenance_from_json(source[0])
    except ProgramLoadError as e:
        from numdiff.errors import ETRecordError
        from numdiff.schema.etrecord.entries import REGENERATE

        raise ETRecordError(getattr(etrecord, "path", None), f"exported_program: {e.problem}", REGENERATE) from e
    if aten is None:
        return None, None
    plan = plan_debug_handle_propagation(aten, _graph_id(etrecord), edge)
    if not disable_validation and not plan.validated:
        return None, f"debug handle backpropagation failed ({plan.describe_failure()})"
    module = build_aten_graph_module(*source)
    if module is None:
        return None, None
    for node in module.graph.nodes:
        if node.op == "call_function":  # getitems are not in the JSON: 0 (unset), as torch's route gives them
            node.meta["debug_handle"] = plan.assignments.get(node.name, UNSET_DEBUG_HANDLE)
    remember = getattr(etrecord, "remember_debug_handles", None)  # numdiff's record, which gave the JSON
    if remember is not None:
        remember(EXPORTED_PROGRAM_GRAPH, dict(plan.assignments))
    return module, None


def _back_propagate(etrecord: ETRecordPrograms, disable_validation: bool) -> str | None:
    """Back-propagate handles to the ATen program; return why it failed, or None on success."""
    if etrecord.exported_program is None:
        return "the ETRecord has no ATen exported_program"
    provenance = getattr(etrecord, "edge_provenance", None)
    edge = provenance() if provenance is not None else None
    if edge is None:
        edge = _edge_program(etrecord)
    if edge is None:
        return "the ETRecord has no Edge program to take debug handles from"
    plan = plan_debug_handle_propagation(etrecord.exported_program, _graph_id(etrecord), edge)
    if not disable_validation and not plan.validated:
        return f"debug handle backpropagation failed ({plan.describe_failure()})"
    plan.apply()
    return None


def _graph_id(etrecord: ETRecordPrograms) -> int | str:
    graph_id = etrecord.export_graph_id
    return "None" if graph_id is None else graph_id


def _edge_program(etrecord: ETRecordPrograms) -> ExportedProgram | None:
    edge = etrecord.edge_dialect_program
    if isinstance(edge, dict):
        # Several methods: the numerical gap is about "forward", as in the reference.
        if "forward" not in edge:
            raise UsageError(
                f"the ETRecord's Edge programs are {sorted(edge)}, none named 'forward'\n"
                "Pass reference_graph='<graph_map name>' to choose a graph explicitly."
            )
        return edge["forward"]
    return edge


def _from_graph_map(etrecord: ETRecordPrograms, name: str) -> tuple[str, ExportedProgram]:
    key = name if "/" in name else f"{name}/forward"
    graph_map = etrecord.graph_map or {}
    if key not in graph_map:
        names = ", ".join(repr(k) for k in graph_map) if graph_map else "this ETRecord has none"
        raise UsageError(
            f"reference graph {key!r} not found in the ETRecord\n"
            f"Choose 'exported_program', 'edge_dialect_exported_program' or a graph_map name ({names})"
        )
    return key, graph_map[key]


def runnable_graph(program: ExportedProgram, name: str) -> torch.fx.GraphModule:
    """``program`` as a graph module the capture interpreter can run (``name`` is for messages).

    Raises:
        CaptureError: The program gives no runnable graph module.
    """
    from numdiff.program.loader import BUILT_KEY
    from numdiff.program.runnable import runnable_module

    try:
        built = getattr(program, "graph_module", None) is not None and program.graph_module.meta.get(BUILT_KEY)
        # Programs numdiff built: a module without module()'s unlifting (which imports torch._dynamo).
        module = (runnable_module(program) if built else None) or program.module()
    except Exception as e:
        raise CaptureError(
            f"reference graph {name!r}: cannot build a runnable module ({type(e).__name__}: {e})\n"
            "Try another reference_graph, e.g. 'edge_dialect_exported_program'."
        ) from e
    if not isinstance(module, torch.fx.GraphModule):
        raise CaptureError(
            f"reference graph {name!r}: module() gave a {type(module).__name__}, not a GraphModule\n"
            "Try another reference_graph, e.g. 'edge_dialect_exported_program'."
        )
    return module
