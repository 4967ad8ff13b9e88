"""The numerical gap of programs with several methods (``forward`` and ``encode``, ...).

An ETRecord of a multi-method program holds one Edge program per method but one ATen
``exported_program`` (``forward``'s) and one list of representative inputs, which may belong to
any method. The reference cannot open such an ETRecord. numdiff compares every method the ETDump
ran: for each, the inputs are the representative inputs that fit its program's user inputs
(count, dtype and static sizes), else the program's own example inputs; the reference graph is
the usual one for ``forward`` (the ATen program, or the Edge program when back-propagation fails)
and the method's Edge program for the others. A method with no fitting inputs, or no runs in the
ETDump, is left out with a note. Rows say which method they belong to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch.export import ExportedProgram

from numdiff._core.etrecord import ETRecordLike

from numdiff.errors import MissingDataError

if TYPE_CHECKING:
    import pandas as pd
    import torch.fx

    from numdiff.align import EventLike
    from numdiff.comparators import NumericalComparatorBase
    from numdiff.gap.inputs import GapInputs

__all__ = ["MethodBlock", "MethodPlan", "compared_note", "fits", "gather_methods", "graph_names", "method_graph",
           "methods_left_out", "nothing_compared", "plan_methods"]

FORWARD = "forward"


class MethodBlock(Protocol):
    """One run of one method as the ETDump holds it (an ``EventBlock``)."""

    @property
    def method_name(self) -> str | None: ...
    @property
    def events(self) -> Sequence[EventLike]: ...


@dataclass(frozen=True, slots=True)
class MethodPlan:
    """What to compare for one method."""

    method: str
    program: ExportedProgram
    events: list[EventLike]
    inputs: tuple[object, ...]
    inputs_source: str


def _flat(inputs: object) -> list[object]:
    if isinstance(inputs, (list, tuple)):
        return [leaf for item in inputs for leaf in _flat(item)]
    return [inputs]


def fits(program: ExportedProgram, inputs: object) -> bool:
    """Whether ``inputs`` match the program's user inputs: count, dtype and every static size."""
    signature = getattr(program, "graph_signature", None)
    if signature is None:
        return False
    wanted = set(signature.user_inputs)
    vals = [n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder" and n.name in wanted]
    given = _flat(inputs)
    if len(vals) != len(given):
        return False
    for val, value in zip(vals, given):
        if isinstance(val, torch.Tensor) != isinstance(value, torch.Tensor):
            return False
        if isinstance(val, torch.Tensor) and isinstance(value, torch.Tensor):
            if val.dtype != value.dtype or val.dim() != value.dim():
                return False
            if any(isinstance(d, int) and d != n for d, n in zip(val.shape, value.shape)):
                return False
    return True


_LEFT_OUT = re.compile(r"^method '([^']*)': not compared \(")


def _left_out(method: str, why: str) -> str:
    """The note of a method that was not compared, and why."""
    return f"method {method!r}: not compared ({why})"


def methods_left_out(notes: Iterable[str]) -> list[str]:
    """The methods that ``notes`` (:func:`plan_methods`' and :func:`method_graph`'s) say were not compared."""
    return [m.group(1) for m in map(_LEFT_OUT.match, notes) if m is not None]


def _method_count(etrecord: ETRecordLike) -> int:
    """How many Edge programs the ETRecord holds, read from its JSON when it can (building them costs seconds)."""
    from numdiff.schema.etrecord import ETRecord, edge_methods

    methods = edge_methods(etrecord) if isinstance(etrecord, ETRecord) else ()
    if methods:
        return len(methods)
    edge = getattr(etrecord, "edge_dialect_program", None)  # replaced by the caller, or not numdiff's record
    return len(edge) if isinstance(edge, dict) else 1


def plan_methods(etrecord: ETRecordLike, blocks: Iterable[MethodBlock], notes: list[str]) -> list[MethodPlan] | None:
    """One plan per method to compare, or None when the ETRecord has one Edge program (the usual path).

    Raises:
        MissingDataError: No method has both runs in the ETDump and inputs that fit it.
    """
    if _method_count(etrecord) < 2:
        return None
    edge = getattr(etrecord, "edge_dialect_program", None)
    if not isinstance(edge, dict) or len(edge) < 2:
        return None
    blocks = list(blocks)
    representative: Sequence[Any] = getattr(etrecord, "_representative_inputs", None) or []
    plans: list[MethodPlan] = []
    for method, program in edge.items():
        events = [ev for b in blocks if (b.method_name or FORWARD) == method for ev in b.events]
        if not events:
            notes.append(_left_out(method, "the ETDump has no run of it"))
            continue
        chosen = next((tuple(c) if isinstance(c, (list, tuple)) else (c,) for c in representative if fits(program, c)),
                      None)
        source = "the ETRecord's representative inputs"
        if chosen is None:
            example = getattr(program, "example_inputs", None)
            args = example[0] if isinstance(example, tuple) and len(example) == 2 else None
            if args is not None and fits(program, args):
                chosen, source = tuple(args), "the method's example inputs (no representative input fits it)"
        if chosen is None:
            notes.append(_left_out(method, "no representative or example input fits its program"))
            continue
        plans.append(MethodPlan(method, program, events, chosen, source))
    if not plans:
        raise MissingDataError(
            "none of the ETRecord's methods "
            f"{sorted(edge)} could be compared: " + "; ".join(notes) + "\n"
            "Record representative inputs for the methods you run (ETRecord.update_representative_inputs).")
    return plans


def method_graph(etrecord: ETRecordLike, plan: MethodPlan, reference_graph: str | None,
                 disable_debug_handle_validation: bool,
                 notes: list[str]) -> Callable[[], tuple[torch.fx.GraphModule, str]] | None:
    """What builds the reference graph ``plan``'s method is compared on (each call builds it afresh),
    or None, noted, when ``reference_graph`` names the ATen program (``forward``'s) and the method is another.

    Raises:
        UsageError: ``reference_graph`` is not one a multi-method ETRecord has for the method.
    """
    from numdiff.capture.graphs import EDGE_DIALECT_GRAPH, EXPORTED_PROGRAM_GRAPH, runnable_graph, resolve_reference_graph
    from numdiff.errors import UsageError

    if plan.method == FORWARD:
        return lambda: resolve_reference_graph(etrecord, reference_graph, disable_debug_handle_validation)
    if reference_graph in (None, EDGE_DIALECT_GRAPH):
        name = f"{EDGE_DIALECT_GRAPH}/{plan.method}"
        return lambda: (runnable_graph(plan.program, name), name)
    if reference_graph == EXPORTED_PROGRAM_GRAPH:
        notes.append(_left_out(plan.method, "the ETRecord's ATen exported_program is forward's; "
                               "pass reference_graph='edge_dialect_exported_program' to compare every method"))
        return None
    raise UsageError(f"reference graph {reference_graph!r} is not one of a multi-method ETRecord's\n"
                     "Pass None or 'edge_dialect_exported_program' (every method), or 'exported_program' "
                     "(forward only).")


def gather_methods(etrecord: ETRecordLike, plans: Iterable[MethodPlan], reference_graph: str | None,
                   disable_debug_handle_validation: bool, etdump_path: str | None, notes: list[str], *,
                   shapes_only: bool = False) -> Iterator[tuple[MethodPlan, GapInputs]]:
    """Each method's :func:`~numdiff.gap.inputs.gather` on its own graph and inputs, one at a time
    (methods :func:`method_graph` leaves out are noted in ``notes``)."""
    from numdiff.gap.inputs import gather

    for plan in plans:
        build = method_graph(etrecord, plan, reference_graph, disable_debug_handle_validation, notes)
        if build is not None:
            yield plan, gather(etrecord, plan.events, reference_graph=reference_graph,
                               disable_debug_handle_validation=disable_debug_handle_validation,
                               etdump_path=etdump_path, graph=build(), inputs=plan.inputs, method=plan.method,
                               shapes_only=shapes_only)


def graph_names(compared: Iterable[tuple[str, str]]) -> str:
    """The reference graphs of several methods in one name: ``(method, graph name)`` pairs -> ``"graph (method), ..."``."""
    return ", ".join(f"{graph} ({method})" for method, graph in compared)


def compared_note(plan: MethodPlan, rows: int, graph_name: str) -> str:
    """The note that says what a method was compared on."""
    return f"method {plan.method!r}: {rows} rows on {graph_name!r}, inputs from {plan.inputs_source}"


def nothing_compared(notes: Sequence[str]) -> MissingDataError:
    """The error when every method the ETDump ran was left out (``notes`` say why)."""
    return MissingDataError("no method of the ETRecord could be compared: " + "; ".join(notes) + "\n"
                            "Pass reference_graph='edge_dialect_exported_program'.")


def multi_method_gap(etrecord: ETRecordLike, blocks: Iterable[MethodBlock], comparator: NumericalComparatorBase,
                     reference_graph: str | None, disable_debug_handle_validation: bool, etdump_path: str | None,
                     release: Callable[[object], None] | None = None, *,
                     streamed: bool = False) -> pd.DataFrame | None:
    """``calculate_numeric_gap``'s DataFrame over every method, with a ``method`` column; None for one method.

    ``streamed``: each method's rows come from ``numdiff.gap.stream.stream_numeric_gap`` (bounded
    memory, no intermediate-output columns).

    Raises:
        UsageError: ``reference_graph`` names the ATen program and the ETDump ran no ``forward``.
        MissingDataError: No method could be compared (see :func:`plan_methods`).
    """
    import warnings

    import pandas as pd

    from numdiff.gap.table import numeric_gap
    from numdiff.gap.stream import stream_numeric_gap

    score = stream_numeric_gap if streamed else numeric_gap

    notes: list[str] = []
    plans = plan_methods(etrecord, blocks, notes)
    if plans is None:
        return None
    frames = []
    for plan, inputs in gather_methods(etrecord, plans, reference_graph, disable_debug_handle_validation, etdump_path,
                                       notes, shapes_only=streamed):
        df = score(inputs, comparator, release)
        df["method"] = plan.method
        notes.append(compared_note(plan, len(df), inputs.graph_name))
        frames.append(df)
    if not frames:
        raise nothing_compared(notes)
    out = pd.concat(frames, ignore_index=True)
    out.attrs["numdiff_notes"] = list(notes)
    warnings.warn("numdiff: a multi-method program (the reference cannot open it): " + "; ".join(notes), stacklevel=3)
    return out
