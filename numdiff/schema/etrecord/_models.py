"""The shapes of the ETRecord's JSON map entries, checked with pydantic on the way in.

ExecuTorch writes each map with ``json.dumps`` of plain dicts; integer keys become strings:

==================================  ===========================================================
entry                               shape
==================================  ===========================================================
``debug_handle_map``                ``{method: {instruction id: handle | [handles] | null}}``
``delegate_map``                    ``{method: {instruction id: {"name": backend,
                                    "delegate_map": {delegate debug id: handle | [handles]}}}}``
``instruction_id_to_num_outs_map``  ``{method: {instruction id: count}}``
``export_graph_id``                 an integer
``delegate_info``                   ``{"method/lowered_name": {backend metadata}}`` (ExecuTorch's
                                    next release: per-delegate backend metadata; the metadata
                                    objects are kept as they are, depth-checked)
==================================  ===========================================================

Validation returns the same plain values (the reference's attribute values), so callers see no
change; a malformed field raises one :class:`~numdiff.errors.ETRecordError` naming the file, the
entry and the field. Counts are bounded before anything loops over them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from numdiff._core.types import JSON
from numdiff.errors import ETRecordError
from numdiff.limits import current_limits, raise_hint

__all__ = ["ENTRY_SHAPES", "validate_entry"]

_INT64_MAX = 2**63 - 1
Handle = Annotated[int, Field(strict=True, ge=0, le=_INT64_MAX)]
Handles = Handle | list[Handle] | None
Count = Annotated[int, Field(strict=True, ge=0, le=_INT64_MAX)]


class DelegateEntry(BaseModel):
    """One delegate call's entry in ``delegate_map`` (extra keys are kept, as the reference keeps them)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    name: str = ""
    delegate_map: dict[str, Handles] | None = None


#: Entry name → (pydantic adapter, the shape in words for messages).
ENTRY_SHAPES: dict[str, tuple[TypeAdapter[Any], str]] = {
    "debug_handle_map": (
        TypeAdapter(dict[str, dict[str, Handles]]),
        "{method: {instruction id: handle or list of handles}}",
    ),
    "delegate_map": (
        TypeAdapter(dict[str, dict[str, DelegateEntry]]),
        '{method: {instruction id: {"name": backend, "delegate_map": {id: handles}}}}',
    ),
    "instruction_id_to_num_outs_map": (
        TypeAdapter(dict[str, dict[str, Count]]),
        "{method: {instruction id: output count}}",
    ),
    "export_graph_id": (TypeAdapter(Annotated[int, Field(strict=True)]), "an integer"),
    "delegate_info": (
        TypeAdapter(dict[Annotated[str, Field(pattern=r"^[^/]+/[^/]+$", max_length=1000)], dict[str, Any]]),
        '{"method/lowered_name": {backend metadata}}',
    ),
}

_HINT = (
    "ExecuTorch writes {name} as {shape}; this file was altered, damaged or written by another tool. "
    "Regenerate it with the ExecuTorch release that exported the model: generate_etrecord=True when lowering, then "
    "get_etrecord().save(path) (1.0 and later), or executorch.devtools.generate_etrecord(path, ...) (0.7)."
)


def validate_entry(path: str | None, name: str, value: JSON) -> JSON:
    """Check a JSON map entry's shape and bounds; return the value unchanged.

    Raises:
        ETRecordError: A field has the wrong type or an out-of-range value; the message names the
            field (``forward → 3``) and the value found.
    """
    adapter, shape = ENTRY_SHAPES[name]
    try:
        checked = adapter.validate_python(value)
    except ValidationError as e:
        errors = [(_data_path(value, err["loc"]), err) for err in e.errors(include_url=False)]
        path_in_data, first = max(errors, key=lambda pair: len(pair[0]))  # the deepest, most specific one
        where = " → ".join(str(part) for part in path_in_data) or "(top level)"
        found = repr(first.get("input"))
        found = found if len(found) <= 80 else found[:77] + "..."
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise ETRecordError(
            path,
            f"entry {name!r}: field {where}: {first['msg']} (found {found}){more}",
            _HINT.format(name=name, shape=shape),
        ) from e
    if name == "instruction_id_to_num_outs_map":
        _check_counts(path, checked)
    return value  # strict validation coerced nothing: hand back the file's own values


def _data_path(value: object, loc: tuple[int | str, ...]) -> list[int | str]:
    """The parts of a pydantic error location that index the data (union branch names dropped)."""
    out: list[int | str] = []
    for part in loc:
        if isinstance(value, dict) and isinstance(part, str) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            continue
        out.append(part)
    return out


def _check_counts(path: str | None, counts: dict[str, dict[str, int]]) -> None:
    limit = current_limits().max_outputs_per_instruction
    for method, by_instruction in counts.items():
        for instruction, count in by_instruction.items():
            if count > limit:
                raise ETRecordError(
                    path,
                    f"entry 'instruction_id_to_num_outs_map': field {method} → {instruction}: "
                    f"{count} outputs for one instruction, more than the limit {limit} (max_outputs_per_instruction)",
                    "An instruction with that many outputs is not a real model: the file was altered or damaged. "
                    + raise_hint("max_outputs_per_instruction", count),
                )
